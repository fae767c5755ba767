//! The policy engine: facts from a frontend, matched against the rules of a policy,
//! become findings with an action. This is the only place that decides; frontends
//! only describe.

use super::glob::Glob;
use super::schema::{Action, Matcher, Policy, Rule};
use crate::analysis::{self, Analysis, FactKind, Language, SourceKind, Span};
use serde::Serialize;
use std::sync::Arc;

/// One rule matched at one place in the code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Finding {
    /// The id of the rule that matched, e.g. `process-exec`.
    pub rule: String,
    pub category: String,
    pub action: Action,
    /// The rule's message followed by what exactly matched.
    pub message: String,
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
    /// Which layer found it: the static check, or (for a run stopped while it ran) the
    /// run-time layer that stopped it. Left out of JSON for static findings.
    #[serde(skip_serializing_if = "Layer::is_static")]
    pub layer: Layer,
}

/// The layers that enforce a policy (see docs/security.md).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// The checker, before anything runs.
    #[default]
    Static,
    /// Python audit hooks installed before the snippet's first line.
    PythonAuditHook,
    /// The Node preload that refuses denied built-in modules and process internals.
    NodeGuard,
    /// Node's permission model (`--permission`).
    NodePermission,
    /// `--disallow-code-generation-from-strings`.
    NodeCodegen,
    /// The egress proxy of a network allowlist.
    EgressProxy,
    /// The kernel (seccomp, Landlock), refusing a system call; reported by the box's
    /// supervisor, outside the program's reach.
    Kernel,
    /// The box's supervisor itself (a thread asking for another call's program).
    Supervisor,
}

impl Layer {
    pub fn is_static(&self) -> bool {
        *self == Layer::Static
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Static => "static",
            Layer::PythonAuditHook => "python-audit-hook",
            Layer::NodeGuard => "node-guard",
            Layer::NodePermission => "node-permission",
            Layer::NodeCodegen => "node-codegen",
            Layer::EgressProxy => "egress-proxy",
            Layer::Kernel => "kernel",
            Layer::Supervisor => "supervisor",
        }
    }
}

impl Finding {
    /// The one-line form every text output uses, like ruff's concise format:
    /// `path:line:col: rule-id [action] message`.
    pub fn to_line(&self, path: &str) -> String {
        format!(
            "{path}:{}:{}: {} [{}] {}",
            self.line, self.column, self.rule, self.action, self.message
        )
    }
}

/// Why a snippet was refused before any analysis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("code is {size} bytes, over the policy's limit of {limit} bytes (limits.code)")]
    TooLarge { size: usize, limit: u64 },
    #[error("code is not valid UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
}

/// The verdict on one snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Every finding whose action is not `off`, in source order.
    pub findings: Vec<Finding>,
    /// How the interpreter must load the code, should it run.
    #[serde(skip)]
    pub kind: SourceKind,
}

impl Report {
    /// True when any finding denies: the code must not run.
    pub fn denied(&self) -> bool {
        self.findings.iter().any(|f| f.action == Action::Deny)
    }

    /// The rules that want a person's approval before the code runs (none when it is
    /// denied outright).
    pub fn asks(&self) -> Vec<&str> {
        if self.denied() {
            return Vec::new();
        }
        let mut rules: Vec<&str> = self
            .findings
            .iter()
            .filter(|f| f.action == Action::Ask)
            .map(|f| f.rule.as_str())
            .collect();
        rules.dedup();
        rules
    }
}

/// A policy compiled for matching. Cheap to clone and share between tasks.
#[derive(Debug, Clone)]
pub struct PolicyEngine {
    policy: Arc<Policy>,
    rules: Arc<Vec<CompiledRule>>,
}

#[derive(Debug)]
struct CompiledRule {
    index: usize,
    /// One matcher per language, in [`Language::ALL`] order.
    matchers: Vec<(Language, CompiledMatcher)>,
}

#[derive(Debug, Default)]
struct CompiledMatcher {
    modules: Vec<Glob>,
    references: Vec<Glob>,
    dynamic: Vec<String>,
    paths_outside: Option<Vec<String>>,
    unparseable: bool,
    /// The policy's allowlist, when the rule holds URL literals against it.
    allowlist: Option<Vec<crate::policy::allowlist::HostRule>>,
}

impl CompiledMatcher {
    /// One language's matcher: its own entries plus the rule's `any_language` ones.
    fn new(any_language: &Matcher, own: &Matcher) -> Self {
        let both = [any_language, own];
        let paths_outside =
            both.iter()
                .filter_map(|m| m.paths_outside.clone())
                .reduce(|mut a, b| {
                    a.extend(b);
                    a
                });
        CompiledMatcher {
            modules: both
                .iter()
                .flat_map(|m| &m.modules)
                .map(|p| Glob::new(p))
                .collect(),
            references: both
                .iter()
                .flat_map(|m| &m.references)
                .map(|p| Glob::new(p))
                .collect(),
            dynamic: both
                .iter()
                .flat_map(|m| &m.dynamic)
                .map(|k| k.0.clone())
                .collect(),
            paths_outside,
            unparseable: both.iter().any(|m| m.unparseable),
            allowlist: None,
        }
    }

    /// What in the fact made it match, for the finding's message; `None` if it does not.
    fn matches(&self, fact: &FactKind) -> Option<String> {
        // Under an allowlist, using the network is allowed (to the hosts listed): a rule
        // that holds URLs against the list judges by them alone.
        if self.allowlist.is_some() && !matches!(fact, FactKind::UrlLiteral { .. }) {
            return None;
        }
        match fact {
            FactKind::Import { module } => self
                .modules
                .iter()
                .any(|g| g.matches_module(module))
                .then(|| format!("import of `{module}`")),
            FactKind::Reference { name, module_value } => {
                if self.references.iter().any(|g| g.matches(name)) {
                    Some(format!("`{name}`"))
                } else if *module_value
                    && self
                        .references
                        .iter()
                        .any(|g| g.could_match_member_of(name))
                {
                    Some(format!(
                        "module `{name}` is passed where its uses cannot be followed"
                    ))
                } else if name.contains('.') && self.modules.iter().any(|g| g.matches(name)) {
                    // `from concurrent import interpreters` names a denied submodule
                    // without importing it by that name.
                    Some(format!("module `{name}`"))
                } else {
                    None
                }
            }
            FactKind::DynamicAccess { kind, detail } => self
                .dynamic
                .iter()
                .any(|k| k == kind)
                .then(|| format!("{kind}: {detail}")),
            FactKind::PathLiteral { op, path } => {
                let allowed = self.paths_outside.as_ref()?;
                (path_is_absolute(path) && !allowed.iter().any(|dir| path_is_under(path, dir)))
                    .then(|| format!("`{op}` {} `{path}`", path_access(op)))
            }
            FactKind::Unparseable { reason } => self.unparseable.then(|| reason.clone()),
            FactKind::UrlLiteral { host, port } => {
                let list = self.allowlist.as_ref()?;
                (!crate::policy::allowlist::allows(list, host, *port)).then(|| {
                    format!(
                        "a URL to `{host}:{port}`, which the policy's network.allow does not list"
                    )
                })
            }
        }
    }
}

/// Whether a filesystem call reads or writes its path, for the finding's words: a read
/// outside the sandbox sees the container's own files, a write there fails, and a
/// finding that called a read a write would send a model after the wrong fix.
fn path_access(op: &str) -> &'static str {
    const WRITES: &[&str] = &[
        "write_text",
        "write_bytes",
        "mkdir",
        "makedirs",
        "remove",
        "unlink",
        "rmdir",
        "removedirs",
        "rmtree",
        "rename",
        "renames",
        "replace",
        "touch",
        "chmod",
        "chown",
        "symlink",
        "symlink_to",
        "link",
        "hardlink_to",
        "copy",
        "copy2",
        "copyfile",
        "copytree",
        "move",
        "truncate",
        "mkfifo",
        "mknod",
        "utime",
        "writeFile",
        "writeFileSync",
        "appendFile",
        "appendFileSync",
        "mkdirSync",
        "rm",
        "rmSync",
        "rmdirSync",
        "unlinkSync",
        "renameSync",
        "copyFile",
        "copyFileSync",
        "cp",
        "cpSync",
        "symlinkSync",
        "linkSync",
        "truncateSync",
        "chmodSync",
        "chownSync",
        "utimes",
        "utimesSync",
        "createWriteStream",
        "mkdtemp",
        "mkdtempSync",
    ];
    if let Some(mode) = op.split_once("(mode='").map(|(_, mode)| mode) {
        return if mode.contains(['w', 'a', 'x', '+']) {
            "writes"
        } else {
            "reads"
        };
    }
    let name = op.rsplit(['.', '/']).next().unwrap_or(op);
    if WRITES.contains(&name) {
        "writes"
    } else if name.starts_with("open")
        || name.starts_with("read")
        || name.contains("Read")
        || name.contains("glob")
        || name.contains("stat")
        || matches!(
            name,
            "listdir"
                | "scandir"
                | "walk"
                | "exists"
                | "isfile"
                | "isdir"
                | "iterdir"
                | "access"
                | "existsSync"
        )
    {
        "reads"
    } else {
        "uses"
    }
}

fn path_is_absolute(path: &str) -> bool {
    path.starts_with('/')
        || path.starts_with('~')
        || path.starts_with('\\')
        || path.get(1..3) == Some(":\\")
}

/// True when `path` is `dir` or inside it, after folding `.`/`..` so that
/// `/tmp/../etc/passwd` is not mistaken for a path under `/tmp`.
fn path_is_under(path: &str, dir: &str) -> bool {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let dir_parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    path.starts_with('/')
        && parts.len() >= dir_parts.len()
        && parts[..dir_parts.len()] == dir_parts[..]
}

impl PolicyEngine {
    pub fn new(policy: Policy) -> Self {
        let rules = policy
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.action != Action::Off)
            .map(|(index, rule)| CompiledRule {
                index,
                matchers: Language::ALL
                    .into_iter()
                    .map(|l| {
                        let mut matcher = CompiledMatcher::new(&rule.any_language, rule.matcher(l));
                        // A mounted folder is part of the sandbox's filesystem.
                        if let Some(inside) = &mut matcher.paths_outside {
                            inside.extend(policy.mounts.iter().map(|m| m.target.clone()));
                        }
                        let wants_hosts = rule.any_language.hosts_outside_allowlist
                            || rule.matcher(l).hosts_outside_allowlist;
                        if wants_hosts {
                            matcher.allowlist = policy.allowed_hosts();
                        }
                        (l, matcher)
                    })
                    .collect(),
            })
            .collect();
        PolicyEngine {
            policy: Arc::new(policy),
            rules: Arc::new(rules),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Checks raw bytes: the size limit first (before any parsing), then UTF-8.
    pub fn check_bytes(&self, language: Language, code: &[u8]) -> Result<Report, InputError> {
        self.check_size(code.len())?;
        let source = std::str::from_utf8(code).map_err(|e| InputError::NotUtf8 {
            offset: e.valid_up_to(),
        })?;
        Ok(self.check_analysis(&analysis::analyze(language, source)))
    }

    /// Checks source text: the size limit, then the rules.
    pub fn check(&self, language: Language, source: &str) -> Result<Report, InputError> {
        self.check_size(source.len())?;
        Ok(self.check_analysis(&analysis::analyze(language, source)))
    }

    /// Checks `code` as the continuation of `before` (a session's earlier calls): the two
    /// are analysed as one program, so a name bound before is known where `code` uses
    /// it, and the findings of `code` alone come back, at its own line numbers. Only
    /// `code` counts against the size limit.
    pub fn check_continuation(
        &self,
        language: Language,
        before: &str,
        code: &str,
    ) -> Result<Report, InputError> {
        self.check_size(code.len())?;
        if before.is_empty() {
            return self.check(language, code);
        }
        let mut joined = String::with_capacity(before.len() + 1 + code.len());
        joined.push_str(before);
        // `before` ends its last line (a `\n` after a bare `\r` joins it as `\r\n`), so
        // that `code` starts a line of its own; its lines are counted as the
        // interpreter (and the line index) counts them.
        let ends_a_line = before.ends_with('\n')
            || (language == Language::JavaScript && before.ends_with(['\u{2028}', '\u{2029}']));
        if !ends_a_line {
            joined.push('\n');
        }
        let offset = analysis::lines::terminators(&joined, language).len() as u32;
        joined.push_str(code);
        let mut report = self.check_analysis(&analysis::analyze(language, &joined));
        report.findings.retain(|finding| finding.line > offset);
        for finding in &mut report.findings {
            finding.line -= offset;
            finding.end_line = finding.end_line.saturating_sub(offset);
        }
        Ok(report)
    }

    fn check_size(&self, size: usize) -> Result<(), InputError> {
        let limit = self.policy.limits.code.bytes();
        if size as u64 > limit {
            return Err(InputError::TooLarge { size, limit });
        }
        Ok(())
    }

    /// The blocking rule (`deny` or `ask`) that any of `facts` would meet in
    /// `language`, or `None`; where several would, the one whose id sorts first, as
    /// findings at one place are ordered.
    pub fn blocking_rule(&self, language: Language, facts: &[FactKind]) -> Option<&Rule> {
        self.rules
            .iter()
            .map(|compiled| (&self.policy.rules[compiled.index], compiled))
            .filter(|(rule, _)| rule.action.blocks())
            .filter(|(_, compiled)| {
                compiled
                    .matchers
                    .iter()
                    .filter(|(l, _)| *l == language)
                    .any(|(_, matcher)| facts.iter().any(|fact| matcher.matches(fact).is_some()))
            })
            .map(|(rule, _)| rule)
            .min_by(|a, b| a.id.cmp(&b.id))
    }

    /// Matches a frontend's facts; one finding per rule and fact.
    pub fn check_analysis(&self, analysis: &Analysis) -> Report {
        let language = analysis.kind.language();
        let mut findings = Vec::new();
        for fact in &analysis.facts {
            for compiled in self.rules.iter() {
                let Some((_, matcher)) = compiled.matchers.iter().find(|(l, _)| *l == language)
                else {
                    continue;
                };
                if let Some(what) = matcher.matches(&fact.kind) {
                    findings.push(finding(
                        &self.policy.rules[compiled.index],
                        fact.span,
                        &what,
                    ));
                }
            }
        }
        findings.sort_by(|a, b| (a.line, a.column, &a.rule).cmp(&(b.line, b.column, &b.rule)));
        findings.dedup();
        Report {
            findings,
            kind: analysis.kind,
        }
    }
}

fn finding(rule: &Rule, span: Span, what: &str) -> Finding {
    Finding {
        rule: rule.id.clone(),
        category: rule.category.clone(),
        action: rule.action,
        message: format!("{} ({what})", rule.message),
        line: span.line,
        column: span.column,
        end_line: span.end_line,
        end_column: span.end_column,
        layer: Layer::Static,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_folded_before_comparison() {
        assert!(path_is_under("/tmp/x", "/tmp"));
        assert!(path_is_under("/tmp", "/tmp"));
        assert!(path_is_under("/sandbox/a/../b", "/sandbox"));
        assert!(!path_is_under("/tmp/../etc/passwd", "/tmp"));
        assert!(!path_is_under("/tmpfoo", "/tmp"));
        assert!(!path_is_under("/etc/passwd", "/tmp"));
    }

    #[test]
    fn a_continuation_s_findings_are_at_its_own_lines_whatever_ends_the_earlier_ones() {
        let engine = PolicyEngine::new(Policy::preset("default").unwrap());
        let lines = |language, before: &str, code: &str| -> Vec<u32> {
            let report = engine.check_continuation(language, before, code).unwrap();
            report.findings.iter().map(|finding| finding.line).collect()
        };
        let python = Language::Python;
        assert_eq!(lines(python, "import os\n", "x = 1\ros.system('a')"), [2]);
        assert_eq!(lines(python, "import os\rx = 2\r", "os.system('a')"), [1]);
        assert_eq!(lines(python, "import os\rx = 2", "\nos.system('a')"), [2]);
        assert_eq!(lines(python, "import os\r\n", "os.system('a')"), [1]);
        let javascript = Language::JavaScript;
        assert_eq!(
            lines(
                javascript,
                "const cp = require('child_process')\u{2028}",
                "cp.execSync('a')"
            ),
            [1]
        );
    }
}
