//! Finding, reading and merging policy files.
//!
//! Lookup order: an explicit `--policy` (a file, or a preset name), else
//! `CODE_SANDBOX_POLICY`, else `.code-sandbox.yaml` in the working directory or the
//! nearest parent that has one, else the embedded `default` preset. A file without
//! `extends` extends `default`, so a project writes only what it changes.

use super::error::{error, PolicyError};
use super::overlay::{self, Origin, Overlay};
use super::schema::{Action, Policy, PolicyFile, Rule, RuleFile};
use super::shown_name::shown_name;
use std::fmt;
use std::path::{Path, PathBuf};

/// The presets shipped inside the binary, by name.
pub const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.yaml")),
    ("strict", include_str!("../../policies/strict.yaml")),
    ("permissive", include_str!("../../policies/permissive.yaml")),
];

/// The per-project policy file looked for in the working directory and its parents.
pub const PROJECT_FILE: &str = ".code-sandbox.yaml";

/// What `policy init` writes: a commented starting point that extends `default`.
pub const STARTER_POLICY: &str = include_str!("../../policies/starter.yaml");

/// Where a policy comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySource {
    Preset(String),
    File(PathBuf),
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySource::Preset(name) => write!(f, "preset `{name}`"),
            PolicySource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl PolicySource {
    /// Where the policy comes from, in lookup order (see the module docs).
    pub fn discover(explicit: Option<&str>, cwd: &Path) -> PolicySource {
        if let Some(value) = explicit.filter(|v| !v.is_empty()) {
            return PolicySource::named(value, cwd);
        }
        if let Ok(value) = std::env::var("CODE_SANDBOX_POLICY") {
            if !value.is_empty() {
                return PolicySource::named(&value, cwd);
            }
        }
        cwd.ancestors()
            .map(|dir| dir.join(PROJECT_FILE))
            .find(|candidate| candidate.is_file())
            .map(PolicySource::File)
            .unwrap_or_else(|| PolicySource::Preset("default".into()))
    }

    /// A preset name when it is one and no file of that name exists, else a path.
    fn named(value: &str, cwd: &Path) -> PolicySource {
        let path = cwd.join(value);
        if !path.exists() && PRESETS.iter().any(|(name, _)| *name == value) {
            PolicySource::Preset(value.to_string())
        } else {
            PolicySource::File(path)
        }
    }

    /// Reads and resolves the policy, `extends` chain included.
    pub fn load(&self) -> Result<Policy, PolicyError> {
        let mut chain = Vec::new();
        let mut policy = resolve(self, &mut chain)?;
        policy.name = match self {
            PolicySource::Preset(name) => name.clone(),
            PolicySource::File(path) => {
                let cwd = std::env::current_dir().unwrap_or_default();
                shown_name(path, &cwd)
            }
        };
        Ok(policy)
    }
}

impl Policy {
    /// The embedded preset of that name.
    pub fn preset(name: &str) -> Result<Policy, PolicyError> {
        PolicySource::Preset(name.to_string()).load()
    }

    /// The policy for a process started in `cwd` with an optional `--policy` value,
    /// with the original code-sandbox-mcp's variables (`BACKEND`, `CONTAINER_IMAGE`)
    /// applied over it.
    pub fn discover(explicit: Option<&str>, cwd: &Path) -> Result<Policy, PolicyError> {
        let mut policy = PolicySource::discover(explicit, cwd).load()?;
        super::overrides::apply(&mut policy, &|name| std::env::var(name).ok())?;
        Ok(policy)
    }
}

/// Loads `source` and everything it extends; `chain` holds the sources being loaded,
/// to refuse cycles.
fn resolve(source: &PolicySource, chain: &mut Vec<PolicySource>) -> Result<Policy, PolicyError> {
    let label = label_of(source);
    if chain.contains(source) {
        let names: Vec<String> = chain.iter().map(label_of).collect();
        return Err(error(
            &label,
            None,
            format!("`extends` loops back: {} -> {label}", names.join(" -> ")),
        ));
    }
    let text = match source {
        PolicySource::Preset(name) => PRESETS
            .iter()
            .find(|(preset, _)| preset == name)
            .map(|(_, text)| text.to_string())
            .ok_or_else(|| {
                let hint = closest_preset(name)
                    .map(|preset| format!("; did you mean `{preset}`?"))
                    .unwrap_or_default();
                error(
                    &label,
                    None,
                    format!(
                        "no preset named `{name}` (presets: {}){hint}",
                        preset_names()
                    ),
                )
            })?,
        PolicySource::File(path) => std::fs::read_to_string(path).map_err(|e| {
            // `--policy stricct`: a name that is neither a file nor a preset is most
            // likely a preset mistyped.
            let hint = path
                .file_name()
                .and_then(|name| name.to_str())
                .filter(|_| e.kind() == std::io::ErrorKind::NotFound)
                .and_then(closest_preset)
                .map(|preset| format!("; did you mean the preset `{preset}`?"))
                .unwrap_or_default();
            error(&label, None, format!("cannot read policy file: {e}{hint}"))
        })?,
    };
    let Parsed {
        file,
        mut errors,
        text,
    } = parse(&label, &text);
    let Some(file) = file else {
        return Err(all(errors));
    };

    let base = match (&file.extends, source) {
        (Some(parent), _) => Some(parent_source(parent, source)),
        (None, PolicySource::Preset(name)) if name == "default" => None,
        (None, _) => Some(PolicySource::Preset("default".into())),
    };
    chain.push(source.clone());
    let base = base.map(|parent| resolve(&parent, chain)).transpose();
    chain.pop();
    let base = match base {
        Ok(base) => base,
        Err(error) => {
            errors.push(error);
            return Err(all(errors));
        }
    };
    let dir = match source {
        PolicySource::File(path) => Some(path.parent().unwrap_or(Path::new(".")).to_path_buf()),
        PolicySource::Preset(_) => None,
    };
    // The file's other errors are looked for even when it had some already.
    let faulty_lines: Vec<usize> = errors.iter().filter_map(|error| error.line).collect();
    match merge(&label, &text, dir.as_deref(), base, file, &faulty_lines) {
        Ok(mut policy) if errors.is_empty() => {
            if let PolicySource::File(path) = source {
                policy.files.push(super::host_paths::real_path(path));
            }
            super::export_folder::check(&label, &text, dir.as_deref(), &policy)?;
            Ok(policy)
        }
        Ok(_) => Err(all(errors)),
        Err(error) => {
            errors.push(error);
            Err(all(errors))
        }
    }
}

/// Errors found so far (at least one) as one error.
fn all(errors: Vec<PolicyError>) -> PolicyError {
    PolicyError::gather(errors).expect_err("there is an error to report")
}

/// How errors name a source: as results do, never by the absolute host path, which a
/// server would hand to the model with every call.
fn label_of(source: &PolicySource) -> String {
    match source {
        PolicySource::File(path) => shown_name(path, &std::env::current_dir().unwrap_or_default()),
        PolicySource::Preset(_) => source.to_string(),
    }
}

/// `extends: NAME` is a preset unless it looks like a path; paths are relative to the
/// file that names them.
fn parent_source(parent: &str, child: &PolicySource) -> PolicySource {
    let looks_like_path =
        parent.contains('/') || parent.ends_with(".yaml") || parent.ends_with(".yml");
    match child {
        PolicySource::File(path) if looks_like_path => {
            PolicySource::File(path.parent().unwrap_or(Path::new(".")).join(parent))
        }
        _ if looks_like_path => PolicySource::File(PathBuf::from(parent)),
        _ => PolicySource::Preset(parent.to_string()),
    }
}

fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The preset a mistyped name most likely meant (at most two edits away).
fn closest_preset(name: &str) -> Option<&'static str> {
    PRESETS
        .iter()
        .map(|(preset, _)| (strsim::damerau_levenshtein(name, preset), *preset))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, preset)| preset)
}

/// Parses YAML into the schema; serde_yaml's errors carry the line, column and key
/// path, and an unknown key gets the closest valid one suggested.
///
/// Every error of the file is reported, not only the first: serde stops at the first,
/// so the line at fault (with the lines nested under it) is blanked and the file read
/// again, until it reads or an error has no line to blank. A person fixing the file,
/// or an agent told what is wrong with it, gets the whole list at once.
fn parse(label: &str, text: &str) -> Parsed {
    /// More than any hand-written file has; a bound on the re-reads.
    const MOST_ERRORS: usize = 20;
    if text.trim().is_empty() {
        return Parsed {
            file: Some(PolicyFile::default()),
            errors: Vec::new(),
            text: text.to_string(),
        };
    }
    let mut errors: Vec<PolicyError> = Vec::new();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut current = text.to_string();
    loop {
        let error = match serde_yaml::from_str::<PolicyFile>(&current) {
            Ok(file) => {
                return Parsed {
                    file: Some(file),
                    errors,
                    text: current,
                }
            }
            Err(error) => parse_error(label, &error),
        };
        let line = error.line;
        if errors
            .iter()
            .any(|e| e.line == line && e.message == error.message)
        {
            break;
        }
        errors.push(error);
        match line {
            Some(line) if errors.len() < MOST_ERRORS && blank_entry(&mut lines, line) => {
                current = lines.join("\n");
            }
            _ => break,
        }
    }
    Parsed {
        file: None,
        errors,
        text: current,
    }
}

/// What reading one file gave.
struct Parsed {
    /// The file as far as it reads: with the entries at fault blanked when there are
    /// errors; `None` when even that does not read.
    file: Option<PolicyFile>,
    errors: Vec<PolicyError>,
    /// The text `file` was read from (the same lines as the file's, some blanked), where
    /// later errors are located.
    text: String,
}

fn parse_error(label: &str, e: &serde_yaml::Error) -> PolicyError {
    let location = e.location();
    let mut message = e.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    if let Some(suggestion) = suggest_key(&message) {
        message.push_str(&format!("; did you mean `{suggestion}`?"));
    }
    PolicyError {
        file: label.to_string(),
        line: location.as_ref().map(|l| l.line()),
        column: location.as_ref().map(|l| l.column()),
        message,
        more: Vec::new(),
    }
}

/// Blanks line `line` (1-based) and the lines nested under it (more indented), keeping
/// the line count, so later errors keep their line numbers. False when there is
/// nothing to blank there (the error would only repeat).
fn blank_entry(lines: &mut [String], line: usize) -> bool {
    let Some(at) = line.checked_sub(1).filter(|&at| at < lines.len()) else {
        return false;
    };
    if lines[at].trim().is_empty() {
        return false;
    }
    let indent = |text: &str| text.len() - text.trim_start_matches([' ', '-']).len();
    let spaces = |text: &str| text.len() - text.trim_start_matches(' ').len();
    // A list item (`- id: x`) goes whole: its other keys are indented past the dash,
    // and the next item starts at the dash's own column. Leaving them would make the
    // rest of the item an error of its own.
    let item = lines[at].trim_start().starts_with("- ");
    let own = if item {
        spaces(&lines[at])
    } else {
        indent(&lines[at])
    };
    lines[at].clear();
    for next in lines[at + 1..].iter_mut() {
        let depth = if item { spaces(next) } else { indent(next) };
        if !next.trim().is_empty() && depth <= own {
            break;
        }
        next.clear();
    }
    true
}

/// From "unknown field `limts`, expected one of `a`, `b`", the valid key nearest to the typo.
fn suggest_key(message: &str) -> Option<String> {
    let rest = &message[message.find("unknown field `")? + "unknown field `".len()..];
    let typo = &rest[..rest.find('`')?];
    let expected = &rest[rest.find("expected")?..];
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|candidate| (strsim::damerau_levenshtein(typo, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= 2.max(candidate.len() / 3))
        .min()
        .map(|(_, candidate)| candidate.to_string())
}

/// Where rule number `index`'s `id` value stands in `text`, as serde_yaml itself
/// reports it: a second read of the file stops with an error exactly there. Used for
/// errors found only when the rule meets the policy it extends.
fn rule_id_location(text: &str, index: usize) -> Option<serde_yaml::Location> {
    use serde::de::{
        DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor,
    };
    use std::fmt;

    /// Fails inside the visit of the scalar, so that the error carries its position.
    struct Stop;
    impl<'de> Visitor<'de> for Stop {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a rule id")
        }
        fn visit_str<E: Error>(self, _: &str) -> Result<(), E> {
            Err(E::custom("here"))
        }
    }
    impl<'de> DeserializeSeed<'de> for Stop {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_str(self)
        }
    }
    /// A map in which the value under `key` is handed to `seed`.
    struct Under<S>(&'static str, Option<S>);
    impl<'de, S: DeserializeSeed<'de, Value = ()>> Visitor<'de> for Under<S> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                match self.1.take() {
                    Some(seed) if key == self.0 => map.next_value_seed(seed)?,
                    other => {
                        self.1 = other;
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }
    impl<'de, S: DeserializeSeed<'de, Value = ()>> DeserializeSeed<'de> for Under<S> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }
    /// The `index`th element of a list, handed to a map probe for its `id`.
    struct Nth(usize);
    impl<'de> Visitor<'de> for Nth {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            for _ in 0..self.0 {
                seq.next_element::<IgnoredAny>()?;
            }
            seq.next_element_seed(Under("id", Some(Stop)))?;
            Ok(())
        }
    }
    impl<'de> DeserializeSeed<'de> for Nth {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    let probe = Under("rules", Some(Nth(index)));
    let error = probe
        .deserialize(serde_yaml::Deserializer::from_str(text))
        .err()?;
    error.location()
}

/// Lays a file over the policy it extends (or, for the root preset, over nothing).
/// Every key, rule and preload is looked at even after one fails, so that all of the
/// file's errors are reported together.
///
/// `faulty_lines` are the lines of errors found while the file was read (blanked in
/// `text`).
fn merge(
    label: &str,
    text: &str,
    dir: Option<&Path>,
    base: Option<Policy>,
    mut file: PolicyFile,
    faulty_lines: &[usize],
) -> Result<Policy, PolicyError> {
    let mut policy = match base {
        Some(base) => base,
        None => overlay::root(&file, label)?,
    };
    let rules = file.rules.take().unwrap_or_default();
    let origin = Origin { label, text, dir };
    let mut errors = Vec::new();
    if let Err(error) = file.overlay(&mut policy, &origin) {
        errors.push(error);
    }
    if let Err(error) = super::secrets::check(label, text, &policy.secrets, &policy.network) {
        errors.push(error);
    }
    for (index, rule_file) in rules.iter().enumerate() {
        // An entry that had a key blanked for an error of its own would only be
        // reported again, as incomplete: leave it out.
        let entry = rule_id_location(text, index).map(|at| at.line());
        let next = rule_id_location(text, index + 1).map_or(usize::MAX, |at| at.line());
        if entry.is_some_and(|entry| faulty_lines.iter().any(|&l| l >= entry && l < next)) {
            continue;
        }
        if rules[..index]
            .iter()
            .any(|earlier| earlier.id == rule_file.id)
        {
            let at = rule_id_location(text, index);
            errors.push(PolicyError {
                file: label.to_string(),
                line: at.as_ref().map(|at| at.line()),
                column: at.as_ref().map(|at| at.column()),
                message: format!("rules[{index}].id: rule `{}` is listed twice", rule_file.id),
                more: Vec::new(),
            });
        } else if let Err(error) = merge_rule(&origin, &mut policy.rules, rule_file.clone(), index)
        {
            errors.push(error);
        }
    }
    errors.extend(check_preload(label, text, &policy));
    PolicyError::gather(errors)?;
    Ok(policy)
}

/// A preloaded module is imported before the snippet, so before its audit hook could
/// judge who asked: one that a deny rule names would be handed to every snippet.
fn check_preload(label: &str, text: &str, policy: &Policy) -> Vec<PolicyError> {
    use crate::analysis::Language;
    let mut errors = Vec::new();
    for language in Language::ALL {
        for module in policy.pool.preload.for_language(language) {
            let denied = policy.rules.iter().find(|rule| {
                rule.action.blocks()
                    && [&rule.any_language, rule.matcher(language)]
                        .iter()
                        .flat_map(|matcher| &matcher.modules)
                        .any(|pattern| super::glob::Glob::new(pattern).matches_module(module))
            });
            if let Some(rule) = denied {
                let line = text
                    .lines()
                    .enumerate()
                    .skip_while(|(_, line)| !line.contains("preload"))
                    .find(|(_, line)| line.contains(module.as_str()))
                    .map(|(index, _)| index + 1);
                errors.push(error(
                    label,
                    line,
                    format!(
                        "pool.preload.{}: `{module}` is denied by the rule `{}`; a preloaded \
                         module is handed to every snippet, so it cannot be one the policy denies",
                        language.name(),
                        rule.id
                    ),
                ));
            }
        }
    }
    errors
}

/// A rule entry either adjusts the inherited rule with its id or adds a new one, which
/// must then say everything a rule needs.
fn merge_rule(
    origin: &Origin,
    rules: &mut Vec<Rule>,
    entry: RuleFile,
    index: usize,
) -> Result<(), PolicyError> {
    let (label, text) = (origin.label, origin.text);
    if let Some(rule) = rules.iter_mut().find(|r| r.id == entry.id) {
        return entry.overlay(rule, origin);
    }
    let (line, column) = rule_id_location(text, index)
        .map_or((None, None), |at| (Some(at.line()), Some(at.column())));
    let at_rule = |message: String| PolicyError {
        file: label.to_string(),
        line,
        column,
        message: format!("rules[{index}].id: {message}"),
        more: Vec::new(),
    };
    let nearest = rules
        .iter()
        .map(|r| (strsim::damerau_levenshtein(&entry.id, &r.id), r.id.as_str()))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, id)| format!(" (did you mean `{id}`?)"))
        .unwrap_or_default();
    let require = |value: Option<String>, key: &str| {
        value.ok_or_else(|| {
            at_rule(format!(
                    "rule `{}` is new (no inherited rule has this id){nearest}, so it needs `{key}`; inherited rules: {}",
                    entry.id,
                    rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )
        })
    };
    let category = require(entry.category.clone(), "category")?;
    let message = require(entry.message.clone(), "message")?;
    let action = entry.action.unwrap_or(Action::Deny);
    if entry.any_language.is_none() && entry.python.is_none() && entry.javascript.is_none() {
        return Err(at_rule(format!(
            "rule `{}` matches nothing: give `python`, `javascript` or `any_language`",
            entry.id
        )));
    }
    rules.push(Rule {
        id: entry.id,
        category,
        action,
        message,
        any_language: entry.any_language.unwrap_or_default(),
        python: entry.python.unwrap_or_default(),
        javascript: entry.javascript.unwrap_or_default(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn suggests_the_nearest_key() {
        let message =
            "unknown field `limts`, expected one of `version`, `extends`, `limits`, `network`";
        assert_eq!(suggest_key(message).as_deref(), Some("limits"));
        let message = "unknown field `zzzzzz`, expected one of `version`, `extends`";
        assert_eq!(suggest_key(message), None);
    }

    #[test]
    fn every_preset_loads() {
        for (name, _) in PRESETS {
            let policy = Policy::preset(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(policy.name, *name);
            assert!(!policy.rules.is_empty());
        }
    }
}
