//! The policy as it is written in YAML ([`PolicyFile`]: every key optional, unknown
//! keys refused) and as it is used once `extends` is resolved ([`Policy`]: every value
//! present). The same file sets the checker's rules and the container's limits, so a
//! project commits one file that says both what code may do and what it may use.

use super::units::{ByteSize, HumanDuration};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One policy file, exactly as written. `None` means "inherit from `extends`".
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub version: Option<u32>,
    /// A preset name (`default`, `strict`, `permissive`) or a path relative to this file.
    pub extends: Option<String>,
    /// Which container engine runs snippets.
    pub engine: Option<EngineKind>,
    /// The engine's container runtime (`runsc` for gVisor); absent: the engine's default.
    pub runtime: Option<String>,
    pub limits: Option<LimitsFile>,
    pub network: Option<NetworkMode>,
    pub images: Option<ImagesFile>,
    pub env: Option<EnvFile>,
    pub pool: Option<PoolFile>,
    /// Rules are merged by `id`: an entry whose id the parent has changes only the keys
    /// it gives (say, `action: off`); an entry with a new id adds a rule.
    pub rules: Option<Vec<RuleFile>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    pub timeout: Option<HumanDuration>,
    pub memory: Option<ByteSize>,
    pub cpus: Option<f64>,
    pub pids: Option<u32>,
    pub output: Option<ByteSize>,
    pub code: Option<ByteSize>,
    pub tmpfs: Option<ByteSize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagesFile {
    pub python: Option<String>,
    pub javascript: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvFile {
    pub pass_through: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolFile {
    pub size: Option<usize>,
    pub max_concurrent: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    pub id: String,
    pub category: Option<String>,
    pub action: Option<Action>,
    pub message: Option<String>,
    pub any_language: Option<Matcher>,
    pub python: Option<Matcher>,
    pub javascript: Option<Matcher>,
}

/// What a rule does when it matches.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Nothing runs; the finding is returned so the code can be rewritten.
    Deny,
    /// The code runs; the finding rides along with the result.
    Warn,
    /// The rule is switched off.
    Off,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Warn => "warn",
            Action::Off => "off",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// `DOCKER_HOST`, then Docker's socket, then Podman's.
    Auto,
    Docker,
    Podman,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// No network interface but loopback.
    None,
    /// The engine's default bridge: outbound access to wherever the host can reach.
    Bridge,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Bridge => "bridge",
        }
    }
}

/// What facts a rule matches, for one language (or for all, under `any_language`).
/// Every list entry is a glob where `*` matches any run of characters, dots included.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    /// Modules whose import matches; `m` also matches its submodules (`m.x`, `m/x`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    /// Qualified names whose use (call or not) matches: `os.system`, `subprocess.*`, `eval`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
    /// Kinds of dynamic access that match (see `analysis::dynamic`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dynamic: Vec<DynamicKind>,
    /// A literal path given to a filesystem operation matches unless it is relative or
    /// lies under one of these directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths_outside: Option<Vec<String>>,
    /// Code that cannot be parsed (or decoded) matches.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unparseable: bool,
}

/// A dynamic-access kind, checked against the frontends' vocabulary when the file loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct DynamicKind(pub String);

impl<'de> Deserialize<'de> for DynamicKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let kind = String::deserialize(deserializer)?;
        if crate::analysis::dynamic::ALL.contains(&kind.as_str()) {
            Ok(DynamicKind(kind))
        } else {
            Err(serde::de::Error::custom(format!(
                "unknown dynamic kind `{kind}`, expected one of {}",
                crate::analysis::dynamic::ALL
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }
}

/// The effective policy: every value present, `extends` resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Policy {
    /// Where the policy came from: a preset name or the file's path.
    pub name: String,
    pub engine: EngineKind,
    /// The container runtime the engine must use (`runsc`), or its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    pub limits: Limits,
    pub network: NetworkMode,
    pub images: Images,
    pub env: EnvPolicy,
    pub pool: PoolSettings,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// Wall-clock time a run may take before its process and container are killed.
    pub timeout: HumanDuration,
    /// Memory, and memory plus swap (no swap beyond it).
    pub memory: ByteSize,
    /// CPU quota, in cores.
    pub cpus: f64,
    /// Most processes and threads alive at once inside the container.
    pub pids: u32,
    /// Most bytes of stdout plus stderr kept; past it output is cut with a marker.
    pub output: ByteSize,
    /// Largest snippet accepted, checked before parsing.
    pub code: ByteSize,
    /// Size of each writable tmpfs (`/sandbox`, `/tmp`).
    pub tmpfs: ByteSize,
}

impl Limits {
    pub fn timeout(&self) -> Duration {
        self.timeout.0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Images {
    pub python: String,
    pub javascript: String,
}

impl Images {
    pub fn for_language(&self, language: crate::analysis::Language) -> &str {
        match language {
            crate::analysis::Language::Python => &self.python,
            crate::analysis::Language::JavaScript => &self.javascript,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct EnvPolicy {
    /// Host environment variables handed to the sandbox, by name.
    pub pass_through: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolSettings {
    /// Started containers kept ready per image.
    pub size: usize,
    /// Runs executing at once; further calls wait their turn.
    pub max_concurrent: usize,
}

/// One effective rule.
#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    pub id: String,
    pub category: String,
    pub action: Action,
    pub message: String,
    #[serde(skip_serializing_if = "is_empty_matcher")]
    pub any_language: Matcher,
    #[serde(skip_serializing_if = "is_empty_matcher")]
    pub python: Matcher,
    #[serde(skip_serializing_if = "is_empty_matcher")]
    pub javascript: Matcher,
}

impl Rule {
    /// The rule's own matcher for `language` (`any_language` applies besides it).
    pub fn matcher(&self, language: crate::analysis::Language) -> &Matcher {
        match language {
            crate::analysis::Language::Python => &self.python,
            crate::analysis::Language::JavaScript => &self.javascript,
        }
    }
}

fn is_empty_matcher(matcher: &Matcher) -> bool {
    *matcher == Matcher::default()
}
