//! The policy as it is written in YAML ([`PolicyFile`]: every key optional, unknown
//! keys refused) and as it is used once `extends` is resolved ([`Policy`]: every value
//! present). The same file sets the checker's rules and the container's limits, so a
//! project commits one file that says both what code may do and what it may use.

use super::checked;
use super::units::{ByteSize, HumanDuration};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One policy file, exactly as written. `None` means "inherit from `extends`".
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Only `1` is read; checked while the file is parsed, so nothing else reads it.
    #[serde(default, deserialize_with = "checked::version")]
    #[allow(dead_code)]
    pub version: Option<u32>,
    /// A preset name (`default`, `strict`, `permissive`) or a path relative to this file.
    pub extends: Option<String>,
    /// Which container engine runs snippets.
    pub engine: Option<EngineKind>,
    /// The engine's container runtime (`runsc` for gVisor); absent: the engine's default.
    #[serde(default, deserialize_with = "checked::runtime")]
    pub runtime: Option<String>,
    pub limits: Option<LimitsFile>,
    #[serde(default, deserialize_with = "checked::network")]
    pub network: Option<NetworkMode>,
    pub images: Option<ImagesFile>,
    pub env: Option<EnvFile>,
    pub pool: Option<PoolFile>,
    pub sessions: Option<SessionsFile>,
    pub outputs: Option<OutputsFile>,
    /// Host folders mounted into every sandbox container; replaces the inherited list.
    pub mounts: Option<Vec<MountFile>>,
    /// The audit log: one JSON line per tool call (opt-in).
    pub audit: Option<AuditFile>,
    /// Packages a run may ask to have installed.
    pub packages: Option<PackagesFile>,
    /// Secrets the code may use toward their hosts without holding them (placeholders
    /// the egress proxy swaps); replaces the inherited list.
    #[serde(default, deserialize_with = "super::secrets::deserialize")]
    pub secrets: Option<Vec<(String, super::secrets::SecretFile)>>,
    /// Rules are merged by `id`: an entry whose id the parent has changes only the keys
    /// it gives (say, `action: off`); an entry with a new id adds a rule.
    pub rules: Option<Vec<RuleFile>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    #[serde(default, deserialize_with = "checked::timeout")]
    pub timeout: Option<HumanDuration>,
    #[serde(default, deserialize_with = "checked::memory")]
    pub memory: Option<ByteSize>,
    #[serde(default, deserialize_with = "checked::cpus")]
    pub cpus: Option<f64>,
    #[serde(default, deserialize_with = "checked::at_least_one")]
    pub pids: Option<u32>,
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub output: Option<ByteSize>,
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub code: Option<ByteSize>,
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub tmpfs: Option<ByteSize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagesFile {
    #[serde(default, deserialize_with = "checked::images")]
    pub python: Option<Vec<String>>,
    #[serde(default, deserialize_with = "checked::images")]
    pub javascript: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvFile {
    #[serde(default, deserialize_with = "checked::variable_names")]
    pub pass_through: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolFile {
    pub size: Option<usize>,
    #[serde(default, deserialize_with = "checked::at_least_one")]
    pub max_concurrent: Option<usize>,
    pub preload: Option<PreloadFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreloadFile {
    #[serde(default, deserialize_with = "checked::module_names")]
    pub python: Option<Vec<String>>,
    #[serde(default, deserialize_with = "checked::module_names")]
    pub javascript: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsFile {
    pub allowed: Option<bool>,
    #[serde(default, deserialize_with = "checked::at_least_one")]
    pub max: Option<usize>,
    #[serde(default, deserialize_with = "checked::timeout")]
    pub idle_timeout: Option<HumanDuration>,
    #[serde(default, deserialize_with = "checked::timeout")]
    pub max_lifetime: Option<HumanDuration>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputsFile {
    pub files: Option<bool>,
    pub figures: Option<bool>,
    pub max_files: Option<usize>,
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub max_file_size: Option<ByteSize>,
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub max_total_size: Option<ByteSize>,
    pub inline_text: Option<ByteSize>,
    pub export: Option<ExportFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportFile {
    /// A host folder, relative to the policy file.
    #[serde(deserialize_with = "checked::host_path")]
    pub path: String,
    pub overwrite: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagesFile {
    #[serde(default, deserialize_with = "checked::package_specs")]
    pub python: Option<Vec<String>>,
    #[serde(default, deserialize_with = "checked::package_specs")]
    pub javascript: Option<Vec<String>>,
    pub index: Option<PackageIndexFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageIndexFile {
    #[serde(default, deserialize_with = "checked::index_url")]
    pub python: Option<String>,
    #[serde(default, deserialize_with = "checked::index_url")]
    pub javascript: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFile {
    /// A host file, relative to the policy file.
    #[serde(deserialize_with = "checked::host_path")]
    pub path: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountFile {
    /// A host path, relative to the policy file (or absolute).
    #[serde(deserialize_with = "checked::host_path")]
    pub source: String,
    /// Where it appears in the sandbox: an absolute path.
    #[serde(deserialize_with = "checked::mount_target")]
    pub target: String,
    /// Writable from the sandbox; read-only unless given.
    pub rw: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    #[serde(deserialize_with = "checked::rule_id")]
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
    /// A person is asked to approve this exact code (MCP elicitation); without a yes,
    /// it is a denial. Enforced at run time as a denial too, except for the rules a
    /// person approved for that one run.
    Ask,
    /// The code runs; the finding rides along with the result.
    Warn,
    /// The rule is switched off.
    Off,
}

impl Action {
    /// Whether the code stops here without a person's yes: `deny`, and `ask`.
    pub fn blocks(self) -> bool {
        matches!(self, Action::Deny | Action::Ask)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Ask => "ask",
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkMode {
    /// No network interface but loopback.
    None,
    /// The engine's default bridge: outbound access to wherever the host can reach.
    Bridge,
    /// Only these hosts, through the server's egress proxy (`network: { allow: [...] }`).
    Allow(Vec<super::allowlist::HostRule>),
}

impl NetworkMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Bridge => "bridge",
            NetworkMode::Allow(_) => "allowlist",
        }
    }

    /// Whether code may reach `host:port` at all under this mode.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        match self {
            NetworkMode::None => false,
            NetworkMode::Bridge => true,
            NetworkMode::Allow(list) => super::allowlist::allows(list, host, port),
        }
    }
}

impl Serialize for NetworkMode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            NetworkMode::Allow(list) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("allow", list)?;
                map.end()
            }
            other => serializer.serialize_str(other.as_str()),
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
    /// Under `network: { allow: [...] }`: a URL literal to a host (or port) the list
    /// does not name matches, and nothing else of the rule does (using the network is
    /// allowed then, to the hosts listed). Under `none` and `bridge` it changes nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hosts_outside_allowlist: bool,
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
    pub sessions: SessionSettings,
    pub outputs: Outputs,
    pub mounts: Vec<Mount>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<Audit>,
    pub packages: Packages,
    /// Secrets swapped in at the egress proxy, in the order written.
    #[serde(
        serialize_with = "super::secrets::serialize",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub secrets: Vec<super::secrets::Secret>,
    pub rules: Vec<Rule>,
}

/// The packages a run may ask for, and where they come from.
#[derive(Debug, Clone, Serialize)]
pub struct Packages {
    pub python: Vec<String>,
    pub javascript: Vec<String>,
    /// A PEP 503 simple index.
    pub python_index: String,
    /// An npm registry.
    pub javascript_registry: String,
}

impl Default for Packages {
    fn default() -> Packages {
        Packages {
            python: Vec::new(),
            javascript: Vec::new(),
            python_index: "https://pypi.org/simple".into(),
            javascript_registry: "https://registry.npmjs.org".into(),
        }
    }
}

impl Packages {
    pub fn for_language(&self, language: crate::analysis::Language) -> (&[String], &str) {
        match language {
            crate::analysis::Language::Python => (&self.python, &self.python_index),
            crate::analysis::Language::JavaScript => (&self.javascript, &self.javascript_registry),
        }
    }
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

/// The image each language runs in: one name, or a list of choices, of which the
/// first the engine has is used (when it has none, the last is pulled). The default
/// policy lists the images `code-sandbox-mcp image build` makes, then the slim ones.
#[derive(Debug, Clone, Serialize)]
pub struct Images {
    pub python: Vec<String>,
    pub javascript: Vec<String>,
}

impl Images {
    /// Never empty: the schema refuses an empty list.
    pub fn for_language(&self, language: crate::analysis::Language) -> &[String] {
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
    /// Modules imported by every warm interpreter before its call arrives.
    pub preload: Preload,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Preload {
    pub python: Vec<String>,
    pub javascript: Vec<String>,
}

impl Preload {
    pub fn for_language(&self, language: crate::analysis::Language) -> &[String] {
        match language {
            crate::analysis::Language::Python => &self.python,
            crate::analysis::Language::JavaScript => &self.javascript,
        }
    }
}

/// Named sessions: calls that share one container and one interpreter.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSettings {
    pub allowed: bool,
    /// Sessions open at once, per client.
    pub max: usize,
    /// A session with no call for this long ends.
    pub idle_timeout: HumanDuration,
    /// A session ends this long after it started, however busy.
    pub max_lifetime: HumanDuration,
}

impl Default for SessionSettings {
    fn default() -> SessionSettings {
        SessionSettings {
            allowed: true,
            max: 4,
            idle_timeout: HumanDuration(Duration::from_secs(600)),
            max_lifetime: HumanDuration(Duration::from_secs(3600)),
        }
    }
}

/// What comes back from a run besides its output: the files it wrote under
/// `/sandbox`, and the matplotlib figures it drew (as PNG).
#[derive(Debug, Clone, Serialize)]
pub struct Outputs {
    pub files: bool,
    pub figures: bool,
    /// Most files (figures included) returned per run; the rest are listed by name.
    pub max_files: usize,
    /// A larger file is listed with its size, not returned.
    pub max_file_size: ByteSize,
    /// Most bytes returned per run, all files together.
    pub max_total_size: ByteSize,
    /// A text file up to this size is shown inline in the result's text.
    pub inline_text: ByteSize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<Export>,
}

impl Default for Outputs {
    fn default() -> Outputs {
        Outputs {
            files: true,
            figures: true,
            max_files: 10,
            max_file_size: ByteSize(1 << 20),
            max_total_size: ByteSize(4 << 20),
            inline_text: ByteSize(4 << 10),
            export: None,
        }
    }
}

/// Returned files are also written to this host folder.
#[derive(Debug, Clone, Serialize)]
pub struct Export {
    /// As the policy wrote it (what results show: never the absolute host path).
    pub path: String,
    #[serde(skip)]
    pub dir: std::path::PathBuf,
    /// An existing file is replaced; otherwise it is left and the result says so.
    pub overwrite: bool,
}

/// Where the audit log goes.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    /// As the policy wrote it (what results show: never the absolute host path).
    pub path: String,
    #[serde(skip)]
    pub file: std::path::PathBuf,
}

/// A host path mounted into every sandbox container.
#[derive(Debug, Clone, Serialize)]
pub struct Mount {
    /// As the policy wrote it (what results show: never the absolute host path).
    pub source: String,
    #[serde(skip)]
    pub host: std::path::PathBuf,
    pub target: String,
    pub rw: bool,
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
