//! Finding, reading and merging policy files.
//!
//! Lookup order: an explicit `--policy` (a file, or a preset name), else
//! `CODE_SANDBOX_POLICY`, else `.code-sandbox.yaml` in the working directory or the
//! nearest parent that has one, else the embedded `default` preset. A file without
//! `extends` extends `default`, so a project writes only what it changes.

use super::schema::{Action, Policy, PolicyFile, Rule, RuleFile};
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

/// A policy that cannot be used, located as precisely as the problem allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The file (or `preset NAME`) at fault.
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.message)
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
            PolicySource::File(path) => path.display().to_string(),
        };
        Ok(policy)
    }
}

impl Policy {
    /// The embedded preset of that name.
    pub fn preset(name: &str) -> Result<Policy, PolicyError> {
        PolicySource::Preset(name.to_string()).load()
    }

    /// The policy for a process started in `cwd` with an optional `--policy` value.
    pub fn discover(explicit: Option<&str>, cwd: &Path) -> Result<Policy, PolicyError> {
        PolicySource::discover(explicit, cwd).load()
    }
}

/// Loads `source` and everything it extends; `chain` holds the sources being loaded,
/// to refuse cycles.
fn resolve(source: &PolicySource, chain: &mut Vec<PolicySource>) -> Result<Policy, PolicyError> {
    let label = source.to_string();
    if chain.contains(source) {
        let names: Vec<String> = chain.iter().map(|s| s.to_string()).collect();
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
                error(
                    &label,
                    None,
                    format!("no preset named `{name}` (presets: {})", preset_names()),
                )
            })?,
        PolicySource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| error(&label, None, format!("cannot read policy file: {e}")))?,
    };
    let file = parse(&label, &text)?;
    validate(&label, &text, &file)?;

    let base = match (&file.extends, source) {
        (Some(parent), _) => Some(parent_source(parent, source)),
        (None, PolicySource::Preset(name)) if name == "default" => None,
        (None, _) => Some(PolicySource::Preset("default".into())),
    };
    chain.push(source.clone());
    let base = base.map(|parent| resolve(&parent, chain)).transpose()?;
    chain.pop();
    merge(&label, &text, base, file)
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

fn error(file: &str, line: Option<usize>, message: String) -> PolicyError {
    PolicyError {
        file: file.to_string(),
        line,
        column: None,
        message,
    }
}

/// Parses YAML into the schema; serde_yaml's errors carry the line, column and key
/// path, and an unknown key gets the closest valid one suggested.
fn parse(label: &str, text: &str) -> Result<PolicyFile, PolicyError> {
    if text.trim().is_empty() {
        return Ok(PolicyFile::default());
    }
    serde_yaml::from_str::<PolicyFile>(text).map_err(|e| {
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
        }
    })
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

/// The first line where `key:` appears, to point at values that parse but make no sense.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let needle = format!("{key}:");
    text.lines()
        .position(|line| {
            let code = line.split('#').next().unwrap_or_default();
            code.trim_start().starts_with(&needle)
                || code.contains(&format!(" {needle}"))
                || code.contains(&format!("{{{needle}"))
        })
        .map(|i| i + 1)
}

/// Checks that need more than one value's type.
fn validate(label: &str, text: &str, file: &PolicyFile) -> Result<(), PolicyError> {
    let at = |key: &str, message: String| PolicyError {
        file: label.to_string(),
        line: key_line(text, key),
        column: None,
        message: format!("{key}: {message}"),
    };
    if let Some(version) = file.version {
        if version != 1 {
            return Err(at(
                "version",
                format!("unsupported version {version}; this build reads version 1"),
            ));
        }
    }
    if let Some(limits) = &file.limits {
        if let Some(cpus) = limits.cpus {
            if !(cpus > 0.0 && cpus <= 1024.0) {
                return Err(at(
                    "cpus",
                    format!("must be a number of cores above 0, got {cpus}"),
                ));
            }
        }
        if limits.pids == Some(0) {
            return Err(at("pids", "must be at least 1".into()));
        }
        for (key, value) in [
            ("memory", limits.memory),
            ("output", limits.output),
            ("code", limits.code),
            ("tmpfs", limits.tmpfs),
        ] {
            if value.is_some_and(|v| v.bytes() == 0) {
                return Err(at(key, "must be above 0".into()));
            }
        }
        if limits.memory.is_some_and(|m| m.bytes() < 6 << 20) {
            return Err(at(
                "memory",
                "must be at least 6MiB (the engine's own floor)".into(),
            ));
        }
        if limits.timeout.is_some_and(|t| t.0.is_zero()) {
            return Err(at("timeout", "must be above 0".into()));
        }
    }
    if let Some(images) = &file.images {
        for (key, image) in [
            ("python", &images.python),
            ("javascript", &images.javascript),
        ] {
            if image
                .as_ref()
                .is_some_and(|i| i.trim().is_empty() || i.contains(char::is_whitespace))
            {
                return Err(at(
                    key,
                    format!(
                        "`{}` is not an image reference",
                        image.as_deref().unwrap_or_default()
                    ),
                ));
            }
        }
    }
    if let Some(runtime) = &file.runtime {
        let valid = !runtime.is_empty()
            && runtime
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !valid {
            return Err(at(
                "runtime",
                format!("`{runtime}` is not a container runtime name (such as `runsc`)"),
            ));
        }
    }
    if let Some(pool) = &file.pool {
        if pool.max_concurrent == Some(0) {
            return Err(at("max_concurrent", "must be at least 1".into()));
        }
    }
    if let Some(env) = &file.env {
        for name in env.pass_through.iter().flatten() {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(at(
                    "pass_through",
                    format!("`{name}` is not an environment variable name"),
                ));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for rule in file.rules.iter().flatten() {
        let id_ok = !rule.id.is_empty()
            && rule
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !id_ok {
            return Err(at(
                "id",
                format!(
                    "rule id `{}` must be lower-case letters, digits, `-` or `_`",
                    rule.id
                ),
            ));
        }
        if !seen.insert(rule.id.as_str()) {
            return Err(PolicyError {
                line: nth_rule_line(text, &rule.id),
                ..at("id", format!("rule `{}` is listed twice", rule.id))
            });
        }
    }
    Ok(())
}

/// The last line that declares rule `id`, for duplicate-rule errors.
fn nth_rule_line(text: &str, id: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let line = line.trim_start().trim_start_matches("- ").trim_start();
            line.strip_prefix("id:")
                .map(|v| v.trim().trim_matches(['"', '\'']))
                == Some(id)
        })
        .map(|(i, _)| i + 1)
        .last()
}

/// Lays a file over the policy it extends (or, for the root preset, over nothing).
fn merge(
    label: &str,
    text: &str,
    base: Option<Policy>,
    file: PolicyFile,
) -> Result<Policy, PolicyError> {
    let missing = |key: &str| {
        error(
            label,
            None,
            format!("`{key}` is required in a policy that extends nothing"),
        )
    };
    let limits_file = file.limits.unwrap_or_default();
    let images_file = file.images.unwrap_or_default();
    let pool_file = file.pool.unwrap_or_default();

    let mut policy = match base {
        Some(base) => base,
        None => {
            let limits = super::schema::Limits {
                timeout: limits_file
                    .timeout
                    .ok_or_else(|| missing("limits.timeout"))?,
                memory: limits_file.memory.ok_or_else(|| missing("limits.memory"))?,
                cpus: limits_file.cpus.ok_or_else(|| missing("limits.cpus"))?,
                pids: limits_file.pids.ok_or_else(|| missing("limits.pids"))?,
                output: limits_file.output.ok_or_else(|| missing("limits.output"))?,
                code: limits_file.code.ok_or_else(|| missing("limits.code"))?,
                tmpfs: limits_file.tmpfs.ok_or_else(|| missing("limits.tmpfs"))?,
            };
            Policy {
                name: String::new(),
                engine: file.engine.ok_or_else(|| missing("engine"))?,
                runtime: None,
                limits,
                network: file.network.ok_or_else(|| missing("network"))?,
                images: super::schema::Images {
                    python: images_file
                        .python
                        .clone()
                        .ok_or_else(|| missing("images.python"))?,
                    javascript: images_file
                        .javascript
                        .clone()
                        .ok_or_else(|| missing("images.javascript"))?,
                },
                env: Default::default(),
                pool: super::schema::PoolSettings {
                    size: pool_file.size.ok_or_else(|| missing("pool.size"))?,
                    max_concurrent: pool_file
                        .max_concurrent
                        .ok_or_else(|| missing("pool.max_concurrent"))?,
                },
                rules: Vec::new(),
            }
        }
    };

    if let Some(engine) = file.engine {
        policy.engine = engine;
    }
    if let Some(network) = file.network {
        policy.network = network;
    }
    if let Some(runtime) = file.runtime {
        policy.runtime = Some(runtime);
    }
    let limits = &mut policy.limits;
    limits.timeout = limits_file.timeout.unwrap_or(limits.timeout);
    limits.memory = limits_file.memory.unwrap_or(limits.memory);
    limits.cpus = limits_file.cpus.unwrap_or(limits.cpus);
    limits.pids = limits_file.pids.unwrap_or(limits.pids);
    limits.output = limits_file.output.unwrap_or(limits.output);
    limits.code = limits_file.code.unwrap_or(limits.code);
    limits.tmpfs = limits_file.tmpfs.unwrap_or(limits.tmpfs);
    if let Some(python) = images_file.python {
        policy.images.python = python;
    }
    if let Some(javascript) = images_file.javascript {
        policy.images.javascript = javascript;
    }
    if let Some(pass_through) = file.env.and_then(|e| e.pass_through) {
        policy.env.pass_through = pass_through;
    }
    policy.pool.size = pool_file.size.unwrap_or(policy.pool.size);
    policy.pool.max_concurrent = pool_file
        .max_concurrent
        .unwrap_or(policy.pool.max_concurrent);

    for rule_file in file.rules.unwrap_or_default() {
        merge_rule(label, text, &mut policy.rules, rule_file)?;
    }
    Ok(policy)
}

/// A rule entry either adjusts the inherited rule with its id or adds a new one, which
/// must then say everything a rule needs.
fn merge_rule(
    label: &str,
    text: &str,
    rules: &mut Vec<Rule>,
    entry: RuleFile,
) -> Result<(), PolicyError> {
    if let Some(rule) = rules.iter_mut().find(|r| r.id == entry.id) {
        if let Some(category) = entry.category {
            rule.category = category;
        }
        if let Some(action) = entry.action {
            rule.action = action;
        }
        if let Some(message) = entry.message {
            rule.message = message;
        }
        if let Some(matcher) = entry.any_language {
            rule.any_language = matcher;
        }
        if let Some(matcher) = entry.python {
            rule.python = matcher;
        }
        if let Some(matcher) = entry.javascript {
            rule.javascript = matcher;
        }
        return Ok(());
    }
    let line = nth_rule_line(text, &entry.id);
    let nearest = rules
        .iter()
        .map(|r| (strsim::damerau_levenshtein(&entry.id, &r.id), r.id.as_str()))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, id)| format!(" (did you mean `{id}`?)"))
        .unwrap_or_default();
    let require = |value: Option<String>, key: &str| {
        value.ok_or_else(|| {
            error(
                label,
                line,
                format!(
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
        return Err(error(
            label,
            line,
            format!(
                "rule `{}` matches nothing: give `python`, `javascript` or `any_language`",
                entry.id
            ),
        ));
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
