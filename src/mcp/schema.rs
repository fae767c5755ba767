//! The tools' JSON schemas as a client receives them: compact, because every agent
//! carries the whole `tools/list` answer in its context on every turn.
//!
//! Input schemas keep their field descriptions (they tell a model what to pass) and
//! lose only what says nothing to it: `$schema`, null defaults and the numeric
//! `format`s schemars adds. Output schemas are for the client to validate structured
//! content against, and for a model to know the field names: they keep every
//! property, its type and the values of each enum (`status`, `action`…), and lose the
//! descriptions and the inner structure of nested objects (a finding, a file), which
//! the result's text rendering and `docs/tools.md` explain. That takes a run tool's
//! output schema from about 9 KB to about 1 KB.

use serde_json::{Map, Value};

use super::types::without_numeric_formats;

type Object = Map<String, Value>;

/// The input schema as sent: the fields' descriptions kept, nested types inlined (a
/// file's fields, an encoding's values), noise dropped.
pub fn compact_input(schema: &Object) -> Object {
    let mut value = Value::Object(without_numeric_formats(schema));
    drop_keys(&mut value, &|key, value| {
        key == "$schema"
            || (key == "default" && (value.is_null() || value == &Value::Array(Vec::new())))
    });
    let mut defs = match &mut value {
        Value::Object(object) => match object.remove("$defs") {
            Some(Value::Object(defs)) => defs,
            _ => Map::new(),
        },
        _ => Map::new(),
    };
    // What a definition says of itself, the field that uses it says better.
    for def in defs.values_mut() {
        drop_keys(def, &|key, _| key == "description");
    }
    inline(&mut value, &defs);
    into_object(value)
}

/// Replaces every reference with its definition, and a `oneOf` of constants with an
/// `enum`.
fn inline(value: &mut Value, defs: &Object) {
    match value {
        Value::Object(object) => {
            if let Some(Value::String(reference)) = object.get("$ref") {
                let name = reference.rsplit('/').next().unwrap_or_default();
                let mut resolved = defs.get(name).cloned().unwrap_or(Value::Object(Map::new()));
                inline(&mut resolved, defs);
                object.remove("$ref");
                if let Value::Object(resolved) = resolved {
                    for (key, inner) in resolved {
                        object.entry(key).or_insert(inner);
                    }
                }
            }
            if let Some(values) = constants(object) {
                object.remove("oneOf");
                object.insert("type".into(), Value::String("string".into()));
                object.insert("enum".into(), Value::Array(values));
            }
            object.values_mut().for_each(|inner| inline(inner, defs));
        }
        Value::Array(items) => items.iter_mut().for_each(|inner| inline(inner, defs)),
        _ => {}
    }
}

/// The output schema as sent: every property with its type and enum values, nested
/// objects as plain objects, no descriptions.
pub fn compact_output(schema: &Object) -> Object {
    let mut value = Value::Object(without_numeric_formats(schema));
    drop_keys(&mut value, &|key, _| {
        // `required` too: every field of a result is always there or null, and the
        // client's validation gains nothing from the list.
        matches!(
            key,
            "$schema" | "description" | "title" | "minimum" | "maximum" | "default" | "required"
        )
    });
    let defs = match &mut value {
        Value::Object(object) => match object.remove("$defs") {
            Some(Value::Object(defs)) => defs,
            _ => Map::new(),
        },
        _ => Map::new(),
    };
    shrink(&mut value, &defs, true);
    into_object(value)
}

/// Removes, at every depth, the keys `unwanted` picks.
fn drop_keys(value: &mut Value, unwanted: &dyn Fn(&str, &Value) -> bool) {
    match value {
        Value::Object(object) => {
            object.retain(|key, inner| !unwanted(key, inner));
            object
                .values_mut()
                .for_each(|inner| drop_keys(inner, unwanted));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|inner| drop_keys(inner, unwanted)),
        _ => {}
    }
}

/// Resolves references (an enum inline, an object as `{"type": "object"}`), turns a
/// `oneOf` of constants into an `enum`, and, below the top level, replaces an object's
/// properties with nothing but its type.
fn shrink(value: &mut Value, defs: &Object, top: bool) {
    let Value::Object(object) = value else {
        if let Value::Array(items) = value {
            items.iter_mut().for_each(|item| shrink(item, defs, false));
        }
        return;
    };
    if let Some(Value::String(reference)) = object.get("$ref") {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let mut resolved = defs.get(name).cloned().unwrap_or(Value::Object(Map::new()));
        shrink(&mut resolved, defs, false);
        *value = resolved;
        return;
    }
    if let Some(values) = constants(object) {
        object.remove("oneOf");
        object.insert("enum".into(), Value::Array(values));
        return;
    }
    if !top && object.contains_key("properties") {
        *value = serde_json::json!({ "type": "object" });
        return;
    }
    // A list of objects is a list.
    if !top && object.get("type") == Some(&Value::from("array")) {
        object.remove("items");
        return;
    }
    for (key, inner) in object.iter_mut() {
        // Property names are keys, not schemas: go through them to their schemas.
        if key == "properties" {
            if let Value::Object(properties) = inner {
                properties
                    .values_mut()
                    .for_each(|schema| shrink(schema, defs, false));
            }
        } else {
            shrink(inner, defs, false);
        }
    }
    simplify_nullable(object);
}

/// The values of a `oneOf` whose every branch is one string constant.
fn constants(object: &Object) -> Option<Vec<Value>> {
    let branches = object.get("oneOf")?.as_array()?;
    branches
        .iter()
        .map(|branch| branch.get("const").filter(|c| c.is_string()).cloned())
        .collect()
}

/// `anyOf: [{"type": T}, {"type": "null"}]` as `type: [T, "null"]`.
fn simplify_nullable(object: &mut Object) {
    let Some(Value::Array(branches)) = object.get("anyOf") else {
        return;
    };
    let plain_type = |branch: &Value| -> Option<String> {
        let branch = branch.as_object()?;
        (branch.len() == 1)
            .then(|| branch.get("type")?.as_str().map(str::to_string))
            .flatten()
    };
    let types: Option<Vec<String>> = branches.iter().map(plain_type).collect();
    if let Some(types) = types {
        object.remove("anyOf");
        object.insert(
            "type".into(),
            Value::Array(types.into_iter().map(Value::String).collect()),
        );
    }
}

fn into_object(value: Value) -> Object {
    match value {
        Value::Object(object) => object,
        _ => unreachable!("an object stays an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::types::{CheckResult, RunCodeArgs, RunResult};

    fn schema_of<T: schemars::JsonSchema>() -> Object {
        serde_json::to_value(schemars::schema_for!(T))
            .unwrap()
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn the_output_schema_keeps_every_field_and_the_statuses_in_a_kilobyte() {
        let full = schema_of::<RunResult>();
        let compact = Value::Object(compact_output(&full));
        let text = compact.to_string();
        assert!(text.len() < 1000, "{} bytes: {text}", text.len());
        for field in full["properties"].as_object().unwrap().keys() {
            assert!(compact["properties"][field].is_object(), "{field}: {text}");
        }
        let statuses = compact["properties"]["status"]["enum"].as_array().unwrap();
        for status in ["completed", "denied", "install_failed", "engine_error"] {
            assert!(statuses.contains(&Value::from(status)), "{text}");
        }
        assert_eq!(compact["properties"]["findings"]["type"], "array");
        assert_eq!(
            compact["properties"]["exit_code"]["type"],
            serde_json::json!(["integer", "null"])
        );
        assert_eq!(
            compact["properties"]["session"]["type"],
            serde_json::json!(["object", "null"])
        );
        assert!(
            !text.contains("$ref") && !text.contains("description"),
            "{text}"
        );
        let check = Value::Object(compact_output(&schema_of::<CheckResult>())).to_string();
        assert!(
            check.contains("\"allowed\"") && !check.contains("$ref"),
            "{check}"
        );
    }

    #[test]
    fn the_input_schema_keeps_its_descriptions() {
        let compact = Value::Object(compact_input(&schema_of::<RunCodeArgs>()));
        assert!(compact["properties"]["code"]["description"].is_string());
        assert_eq!(compact["required"], serde_json::json!(["code"]));
        assert!(compact.get("$schema").is_none());
        assert!(compact["properties"]["session"].get("default").is_none());
        let text = compact.to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
        let encoding = &compact["properties"]["files"]["items"]["properties"]["encoding"];
        assert_eq!(
            encoding["enum"],
            serde_json::json!(["utf-8", "base64"]),
            "{text}"
        );
    }
}
