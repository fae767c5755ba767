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
    /// The file's other errors, in order, when there are more (one a line when shown).
    pub more: Vec<PolicyError>,
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
        write!(f, ": {}", self.message)?;
        for more in &self.more {
            write!(f, "\n{more}")?;
        }
        Ok(())
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

/// How a policy file is named in results, tool descriptions and logs: relative to the
/// working directory (the project) when it is inside it, else by its file name alone.
/// The absolute host path would go to the model's provider with every result.
fn shown_name(path: &Path, cwd: &Path) -> String {
    let path = normalize_dots(path);
    match path.strip_prefix(cwd) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
        _ => path.file_name().map_or_else(
            || PROJECT_FILE.to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
    }
}

/// `a/./b/../c` as `a/c`, without touching the filesystem (links are not followed, so
/// the name stays the one the user gave).
fn normalize_dots(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
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
    let file = parse(&label, &text)?;

    let base = match (&file.extends, source) {
        (Some(parent), _) => Some(parent_source(parent, source)),
        (None, PolicySource::Preset(name)) if name == "default" => None,
        (None, _) => Some(PolicySource::Preset("default".into())),
    };
    chain.push(source.clone());
    let base = base.map(|parent| resolve(&parent, chain)).transpose()?;
    chain.pop();
    let dir = match source {
        PolicySource::File(path) => Some(path.parent().unwrap_or(Path::new(".")).to_path_buf()),
        PolicySource::Preset(_) => None,
    };
    merge(&label, &text, dir.as_deref(), base, file)
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

pub(super) fn error(file: &str, line: Option<usize>, message: String) -> PolicyError {
    PolicyError {
        file: file.to_string(),
        line,
        column: None,
        message,
        more: Vec::new(),
    }
}

/// Parses YAML into the schema; serde_yaml's errors carry the line, column and key
/// path, and an unknown key gets the closest valid one suggested.
///
/// Every error of the file is reported, not only the first: serde stops at the first,
/// so the line at fault (with the lines nested under it) is blanked and the file read
/// again, until it reads or an error has no line to blank. A person fixing the file,
/// or an agent told what is wrong with it, gets the whole list at once.
fn parse(label: &str, text: &str) -> Result<PolicyFile, PolicyError> {
    /// More than any hand-written file has; a bound on the re-reads.
    const MOST_ERRORS: usize = 20;
    if text.trim().is_empty() {
        return Ok(PolicyFile::default());
    }
    let mut errors: Vec<PolicyError> = Vec::new();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut current = text.to_string();
    loop {
        let error = match serde_yaml::from_str::<PolicyFile>(&current) {
            Ok(file) if errors.is_empty() => return Ok(file),
            Ok(_) => break,
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
    let mut first = errors.remove(0);
    first.more = errors;
    Err(first)
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
    let own = indent(&lines[at]);
    lines[at].clear();
    for next in lines[at + 1..].iter_mut() {
        if !next.trim().is_empty() && indent(next) <= own {
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
fn merge(
    label: &str,
    text: &str,
    dir: Option<&Path>,
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
                network: file.network.clone().ok_or_else(|| missing("network"))?,
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
                    preload: Default::default(),
                },
                sessions: Default::default(),
                outputs: Default::default(),
                mounts: Vec::new(),
                audit: None,
                packages: Default::default(),
                secrets: Vec::new(),
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
    if let Some(preload) = pool_file.preload {
        if let Some(python) = preload.python {
            policy.pool.preload.python = python;
        }
        if let Some(javascript) = preload.javascript {
            policy.pool.preload.javascript = javascript;
        }
    }
    if let Some(sessions) = file.sessions {
        let settings = &mut policy.sessions;
        settings.allowed = sessions.allowed.unwrap_or(settings.allowed);
        settings.max = sessions.max.unwrap_or(settings.max);
        settings.idle_timeout = sessions.idle_timeout.unwrap_or(settings.idle_timeout);
        settings.max_lifetime = sessions.max_lifetime.unwrap_or(settings.max_lifetime);
    }

    if let Some(outputs) = file.outputs {
        let settings = &mut policy.outputs;
        settings.files = outputs.files.unwrap_or(settings.files);
        settings.figures = outputs.figures.unwrap_or(settings.figures);
        settings.max_files = outputs.max_files.unwrap_or(settings.max_files);
        settings.max_file_size = outputs.max_file_size.unwrap_or(settings.max_file_size);
        settings.max_total_size = outputs.max_total_size.unwrap_or(settings.max_total_size);
        settings.inline_text = outputs.inline_text.unwrap_or(settings.inline_text);
        if let Some(export) = outputs.export {
            settings.export = Some(super::host_paths::export(label, text, dir, export)?);
        }
    }
    if let Some(packages) = file.packages {
        let settings = &mut policy.packages;
        settings.python = packages
            .python
            .unwrap_or(std::mem::take(&mut settings.python));
        settings.javascript = packages
            .javascript
            .unwrap_or(std::mem::take(&mut settings.javascript));
        if let Some(index) = packages.index {
            if let Some(python) = index.python {
                settings.python_index = python;
            }
            if let Some(javascript) = index.javascript {
                settings.javascript_registry = javascript;
            }
        }
    }
    if let Some(audit) = file.audit {
        policy.audit = Some(super::host_paths::audit(label, text, dir, audit)?);
    }
    if let Some(mounts) = file.mounts {
        policy.mounts = mounts
            .into_iter()
            .map(|mount| super::host_paths::mount(label, text, dir, mount))
            .collect::<Result<_, _>>()?;
    }

    if let Some(secrets) = file.secrets {
        let lookup = |name: &str| std::env::var(name).ok();
        policy.secrets = super::secrets::declare(label, text, secrets, &lookup);
    }
    super::secrets::check(label, text, &policy.secrets, &policy.network)?;

    let rules = file.rules.unwrap_or_default();
    for (index, rule) in rules.iter().enumerate() {
        if rules[..index].iter().any(|earlier| earlier.id == rule.id) {
            let at = rule_id_location(text, index);
            return Err(PolicyError {
                file: label.to_string(),
                line: at.as_ref().map(|at| at.line()),
                column: at.as_ref().map(|at| at.column()),
                message: format!("rules[{index}].id: rule `{}` is listed twice", rule.id),
                more: Vec::new(),
            });
        }
    }
    for (index, rule_file) in rules.into_iter().enumerate() {
        merge_rule(label, text, &mut policy.rules, rule_file, index)?;
    }
    check_preload(label, text, &policy)?;
    Ok(policy)
}

/// A preloaded module is imported before the snippet, so before its audit hook could
/// judge who asked: one that a deny rule names would be handed to every snippet.
fn check_preload(label: &str, text: &str, policy: &Policy) -> Result<(), PolicyError> {
    use crate::analysis::Language;
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
                return Err(error(
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
    Ok(())
}

/// A rule entry either adjusts the inherited rule with its id or adds a new one, which
/// must then say everything a rule needs.
fn merge_rule(
    label: &str,
    text: &str,
    rules: &mut Vec<Rule>,
    entry: RuleFile,
    index: usize,
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

    #[test]
    fn a_policy_file_is_named_without_the_host_path() {
        let project = Path::new("/home/someone/project");
        let inside = project.join("sub/../.code-sandbox.yaml");
        assert_eq!(shown_name(&inside, project), ".code-sandbox.yaml");
        assert_eq!(
            shown_name(&project.join("policies/p.yaml"), project),
            "policies/p.yaml"
        );
        assert_eq!(shown_name(Path::new("/etc/team/p.yaml"), project), "p.yaml");
    }

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
