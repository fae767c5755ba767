//! The policy reference, made from the schema itself: every key of a policy file, its
//! type, its value in the `default` preset and the doc comment of its field in
//! `schema.rs`, as Markdown. `docs/policy-reference.md` is this text, and a test fails
//! when the two differ, so the reference cannot drift from the code:
//! `UPDATE_DOCS=1 cargo test --locked --lib policy::reference` writes it anew.
//!
//! The keys and their docs come from the `JsonSchema` of `PolicyFile`; their order is
//! the order the fields are declared in `schema.rs` (a JSON schema's properties are
//! sorted by name).

use super::schema::{Matcher, Policy, PolicyFile};
use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

/// Where the reference is kept, from the crate's root.
pub const PATH: &str = "docs/policy-reference.md";

/// The text of `schema.rs`, read for the order its fields are declared in.
const SCHEMA_SOURCE: &str = include_str!("schema.rs");

/// The reference, as Markdown.
pub fn markdown() -> String {
    let schema = serde_json::to_value(schemars::schema_for!(PolicyFile)).expect("a schema");
    let matcher = serde_json::to_value(schemars::schema_for!(Matcher)).expect("a schema");
    let defaults: Yaml = serde_yaml::from_str(&super::to_file_yaml(
        &Policy::preset("default").expect("the default preset loads"),
    ))
    .expect("the default policy as a file reads back");
    let mut out = String::from(
        "# Policy reference\n\n\
         <!-- Made by `code-sandbox-mcp policy reference` from the doc comments of \
         src/policy/schema.rs; do not edit here. After changing the schema: \
         `UPDATE_DOCS=1 cargo test --locked --lib policy::reference`. -->\n\n\
         Every key of a policy file (`.code-sandbox.yaml`, or a file given with \
         `--policy`). Every key is optional: what a file leaves out comes from the \
         policy it `extends`. *Default* is the value in the `default` preset, which \
         `code-sandbox-mcp policy show --policy default` prints whole. Sizes take an IEC \
         unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`) and durations a unit (`ms`, `s`, `m`, \
         `h`), with no space (`512MiB`, `30s`); `512MB`, `30 s` and a bare `30` are \
         refused with a hint.\n\n\
         | key | type | default | meaning |\n|---|---|---|---|\n",
    );
    rows(
        &schema,
        &schema,
        "PolicyFile",
        "",
        Some(&defaults),
        &mut out,
    );
    out.push_str(
        "\n## Matchers\n\n\
         What a rule matches, under its `python`, `javascript` or `any_language` key. \
         Every list entry is a glob where `*` matches any run of characters, dots \
         included.\n\n\
         | key | type | meaning |\n|---|---|---|\n",
    );
    let mut matcher_rows = String::new();
    rows(&matcher, &matcher, "Matcher", "", None, &mut matcher_rows);
    // The matcher's table has no default column.
    for line in matcher_rows.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        out.push_str(&format!("{} | {} | {}\n", cells[0], cells[1], cells[3]));
    }
    out
}

/// One row per key of the object `object` (the struct `name`), keys under `prefix`,
/// and rows for the keys of its sections after each section's own row.
fn rows(
    root: &Json,
    object: &Json,
    name: &str,
    prefix: &str,
    defaults: Option<&Yaml>,
    out: &mut String,
) {
    let Some(properties) = object["properties"].as_object() else {
        return;
    };
    for key in declared_order(name, properties.keys()) {
        let property = &properties[&key];
        let path = format!("{prefix}{key}");
        let default = defaults.map(|defaults| default_of(&path, defaults.get(&key)));
        out.push_str(&format!(
            "| `{path}` | {} | {} | {} |\n",
            cell(&type_of(root, property)),
            default.as_deref().map_or("—".to_string(), cell),
            cell(&one_line(property["description"].as_str().unwrap_or(""))),
        ));
        // A section (or a list of entries) gets rows for its own keys; matchers have
        // a table of their own.
        let (target, below, defaults) = match section(root, property) {
            Some((target, true)) => (target, format!("{path}[]."), None),
            Some((target, false)) => (
                target,
                format!("{path}."),
                defaults.and_then(|d| d.get(&key)),
            ),
            None => continue,
        };
        let Some(struct_name) = target.strip_prefix("#/$defs/") else {
            continue;
        };
        if struct_name != "Matcher" {
            rows(
                root,
                &root["$defs"][struct_name],
                struct_name,
                &below,
                defaults,
                out,
            );
        }
    }
}

/// The `$ref` of a section (an object of its own) and whether it is a list of them.
fn section<'a>(root: &Json, property: &'a Json) -> Option<(&'a str, bool)> {
    let property = non_null(property);
    let (reference, list) = match property["$ref"].as_str() {
        Some(reference) => (reference, false),
        None => (property["items"]["$ref"].as_str()?, true),
    };
    let name = reference.strip_prefix("#/$defs/")?;
    root["$defs"][name]["properties"]
        .is_object()
        .then_some((reference, list))
}

/// The schema without its `null` alternative (an `Option`).
fn non_null(schema: &Json) -> &Json {
    match schema["anyOf"].as_array() {
        Some(choices) => choices
            .iter()
            .find(|choice| choice["type"] != "null")
            .unwrap_or(schema),
        None => schema,
    }
}

/// What a person writes there, in a few words.
fn type_of(root: &Json, schema: &Json) -> String {
    let schema = non_null(schema);
    if let Some(words) = schema["x-type"].as_str() {
        return words.to_string();
    }
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/$defs/");
        let definition = &root["$defs"][name];
        return match name {
            "Matcher" => "matcher (see Matchers)".to_string(),
            _ if definition["properties"].is_object() => "section".to_string(),
            _ => type_of(root, definition),
        };
    }
    let values: Vec<String> = match (schema["enum"].as_array(), schema["oneOf"].as_array()) {
        (Some(values), _) => values.iter().map(|v| format!("`{}`", text(v))).collect(),
        (None, Some(choices)) => choices
            .iter()
            .flat_map(|choice| match choice["enum"].as_array() {
                Some(values) => values.iter().map(text).collect::<Vec<_>>(),
                None => choice["const"]
                    .as_str()
                    .map(str::to_string)
                    .into_iter()
                    .collect(),
            })
            .map(|value: String| format!("`{value}`"))
            .collect(),
        (None, None) => Vec::new(),
    };
    if !values.is_empty() {
        return values.join(" | ");
    }
    let kind = match &schema["type"] {
        Json::Array(kinds) => kinds.iter().find(|k| *k != "null").cloned(),
        other => Some(other.clone()),
    };
    match kind.as_ref().and_then(Json::as_str) {
        Some("array") => {
            let items = &schema["items"];
            match section(root, schema) {
                Some(_) => "list of entries".to_string(),
                None => format!("list of {}", plural(&type_of(root, items))),
            }
        }
        Some("integer") => match schema["minimum"].as_f64() {
            Some(minimum) if minimum >= 0.0 => "whole number".to_string(),
            _ => "integer".to_string(),
        },
        Some(kind) => kind.to_string(),
        None => "value".to_string(),
    }
}

fn plural(kind: &str) -> String {
    match kind {
        "string" | "boolean" | "integer" | "number" => format!("{kind}s"),
        "whole number" => "whole numbers".to_string(),
        other => format!("({other})"),
    }
}

/// The default column: the `default` preset's value, written as in a policy file.
fn default_of(path: &str, value: Option<&Yaml>) -> String {
    match (path, value) {
        ("extends", _) => "`default`".to_string(),
        ("rules", Some(_)) => "the preset's rules (`policy show --policy default`)".to_string(),
        (_, None | Some(Yaml::Null)) => "none".to_string(),
        (_, Some(Yaml::Mapping(_))) => "—".to_string(),
        (_, Some(value)) => format!("`{}`", flow(value)),
    }
}

/// A YAML value on one line: `[a, b]`, `{ allow: [x] }`, `30s`.
fn flow(value: &Yaml) -> String {
    match value {
        Yaml::Sequence(items) => {
            format!(
                "[{}]",
                items.iter().map(flow).collect::<Vec<_>>().join(", ")
            )
        }
        Yaml::Mapping(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", flow(k), flow(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Yaml::String(text) => text.clone(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Null => "null".to_string(),
        Yaml::Tagged(tagged) => flow(&tagged.value),
    }
}

fn text(value: &Json) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

/// A doc comment's lines as one paragraph.
fn one_line(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: `|` escaped.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `keys` in the order `pub struct NAME` declares its fields in `schema.rs` (the keys
/// it does not declare, if any, after them by name).
fn declared_order<'a>(name: &str, keys: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut keys: Vec<String> = keys.cloned().collect();
    let declared: Vec<&str> = SCHEMA_SOURCE
        .split_once(&format!("pub struct {name} {{\n"))
        .map(|(_, body)| body.split_once("\n}\n").map_or(body, |(body, _)| body))
        .into_iter()
        .flat_map(str::lines)
        .filter_map(|line| line.trim().strip_prefix("pub ")?.split_once(':'))
        .map(|(field, _)| field)
        .collect();
    keys.sort_by_key(|key| {
        (
            declared
                .iter()
                .position(|field| field == key)
                .unwrap_or(usize::MAX),
            key.clone(),
        )
    });
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed reference is what the code makes. After a change to the schema
    /// or its docs: `UPDATE_DOCS=1 cargo test --locked --lib policy::reference`.
    #[test]
    fn the_committed_reference_is_what_the_schema_makes() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PATH);
        let made = markdown();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &made).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == made,
            "{PATH} is not what the schema makes; run \
             `UPDATE_DOCS=1 cargo test --locked --lib policy::reference` and commit it"
        );
    }

    /// Every key of every section has a row, and a description.
    #[test]
    fn every_key_has_a_row_with_a_meaning() {
        let made = markdown();
        for key in [
            "`version`",
            "`extends`",
            "`limits.timeout`",
            "`pool.preload.python`",
            "`outputs.export.overwrite`",
            "`mounts[].target`",
            "`packages.index.javascript`",
            "`audit.path`",
            "`rules[].action`",
            "`hosts_outside_allowlist`",
        ] {
            let row = made
                .lines()
                .find(|line| line.starts_with(&format!("| {key} |")))
                .unwrap_or_else(|| panic!("no row for {key}:\n{made}"));
            let meaning = row.trim_end_matches(" |").rsplit(" | ").next().unwrap();
            assert!(meaning.len() > 10, "{row}");
        }
        for line in made.lines().filter(|line| line.starts_with("| `")) {
            assert!(
                !line.ends_with("|  |"),
                "a key without a description: {line}"
            );
        }
    }
}
