//! The policy as it is written in YAML ([`PolicyFile`]: every key optional, unknown
//! keys refused) and as it is used once `extends` is resolved ([`Policy`]: every value
//! present). The same file sets the checker's rules and the container's limits, so a
//! project commits one file that says both what code may do and what it may use.

use super::checked;
pub use super::network::NetworkMode;
use super::units::{ByteSize, HumanDuration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One policy file, exactly as written. `None` means "inherit from `extends`".
///
/// The doc comments of these structs are the policy reference (`docs/policy-reference.md`,
/// made by `policy::reference`): write them for a person writing a policy.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// The schema version; only `1` is read.
    #[serde(default, deserialize_with = "checked::version")]
    #[allow(dead_code)]
    pub version: Option<u32>,
    /// The policy this file changes: a preset name (`default`, `strict`, `permissive`)
    /// or a path relative to this file. A file without `extends` extends `default`.
    pub extends: Option<String>,
    /// Which container engine runs snippets: `auto` (`DOCKER_HOST`, then Docker's
    /// socket, then Podman's), `docker` or `podman`.
    pub engine: Option<EngineKind>,
    /// A container runtime registered with the engine, such as `runsc` (gVisor); a run
    /// is refused if the engine lacks it. Absent: the engine's default runtime.
    #[serde(default, deserialize_with = "checked::runtime")]
    pub runtime: Option<String>,
    /// What one run may use.
    pub limits: Option<LimitsFile>,
    /// `none` (no interface but loopback), `bridge` (the engine's default network:
    /// outbound wherever the host can reach), or `{ allow: [hosts] }`: only these hosts
    /// (`host`, `host:port`, `*.domain`, an IP address; without a port, 443 and 80),
    /// through the server's egress proxy.
    #[serde(default, deserialize_with = "checked::network")]
    pub network: Option<NetworkMode>,
    /// The image each language runs in.
    pub images: Option<ImagesFile>,
    /// What of the host's environment the sandbox sees.
    pub env: Option<EnvFile>,
    /// Containers started ahead of calls, and how many runs at once.
    pub pool: Option<PoolFile>,
    /// Named sessions: calls that share one container and one interpreter.
    pub sessions: Option<SessionsFile>,
    /// What comes back from a run besides stdout and stderr.
    pub outputs: Option<OutputsFile>,
    /// Host folders mounted into every sandbox container, read-only unless `rw: true`;
    /// replaces the inherited list.
    pub mounts: Option<Vec<MountFile>>,
    /// The audit log (opt-in): one JSON line per tool call, appended.
    pub audit: Option<AuditFile>,
    /// Packages a run may ask to have installed (the run tools' `packages` argument).
    pub packages: Option<PackagesFile>,
    /// A PEM file of the certificate authorities the sandbox trusts for TLS (package
    /// installs and the runs' own requests), in place of the image's own: for a network
    /// behind a TLS-inspecting proxy, the host's bundle with the proxy's CA added (on
    /// Debian, `/etc/ssl/certs/ca-certificates.crt` after `update-ca-certificates`). A
    /// host file, relative to this file unless absolute; `$CODE_SANDBOX_CA_BUNDLE`
    /// overrides it. Absent: the image's own.
    pub certificates: Option<String>,
    /// Secrets the code may use toward their hosts without holding them (placeholders
    /// the egress proxy swaps); replaces the inherited list.
    #[serde(default, deserialize_with = "super::secrets::deserialize")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, super::secrets::SecretFile>>")]
    pub secrets: Option<Vec<(String, super::secrets::SecretFile)>>,
    /// The checker's rules, merged by `id`: an entry whose id the parent has changes
    /// only the keys it gives (say, `action: off`); an entry with a new id adds a rule,
    /// and must give `category`, `message` and a matcher.
    pub rules: Option<Vec<RuleFile>>,
}

/// What one run may use.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Wall-clock time a run may take; its process and container are killed after it.
    #[serde(default, deserialize_with = "checked::timeout")]
    pub timeout: Option<HumanDuration>,
    /// Memory, and memory plus swap (no swap beyond it); at least 6MiB.
    #[serde(default, deserialize_with = "checked::memory")]
    pub memory: Option<ByteSize>,
    /// CPU quota, in cores; above 0 and no more than the machine has.
    #[serde(default, deserialize_with = "checked::cpus")]
    pub cpus: Option<f64>,
    /// Most processes and threads alive at once inside the container.
    #[serde(default, deserialize_with = "checked::at_least_one")]
    pub pids: Option<u32>,
    /// Most bytes of stdout plus stderr kept. Each stream keeps its beginning and end
    /// (one stream's flood cannot push out the other); the middle is cut with a marker
    /// and the result says `truncated`.
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub output: Option<ByteSize>,
    /// The largest snippet accepted, checked before it is parsed.
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub code: Option<ByteSize>,
    /// The size of each writable tmpfs: `/sandbox` (the working folder) and `/tmp`.
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub tmpfs: Option<ByteSize>,
}

/// The image each language runs in: one name, or a list of which the first the engine
/// has is used (when it has none, the last is pulled).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImagesFile {
    /// The image for Python; it needs `python3` on its PATH.
    #[serde(default, deserialize_with = "checked::images")]
    #[schemars(with = "Option<ImageNames>")]
    pub python: Option<Vec<String>>,
    /// The image for JavaScript; it needs `node` on its PATH.
    #[serde(default, deserialize_with = "checked::images")]
    #[schemars(with = "Option<ImageNames>")]
    pub javascript: Option<Vec<String>>,
}

/// What of the host's environment the sandbox sees.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvFile {
    /// Host environment variables handed to the sandbox, by name.
    #[serde(default, deserialize_with = "checked::variable_names")]
    pub pass_through: Option<Vec<String>>,
}

/// Containers started ahead of calls, and how many runs at once.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolFile {
    /// Started containers kept ready per language, each with its interpreter waiting
    /// (`0`: none). A burst of calls that finds none ready raises this, up to
    /// `max_concurrent`, until two minutes pass without such a miss.
    pub size: Option<usize>,
    /// Runs at once; further calls wait their turn.
    #[serde(default, deserialize_with = "checked::at_least_one")]
    pub max_concurrent: Option<usize>,
    /// Modules every warm interpreter imports before its call arrives.
    pub preload: Option<PreloadFile>,
}

/// Modules every warm interpreter imports before its call arrives, so their import
/// time is paid ahead. A module a deny rule names is refused: it would be handed to
/// every snippet.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreloadFile {
    /// Python modules (`[numpy, pandas]`); one the image lacks is said on stderr.
    #[serde(default, deserialize_with = "checked::module_names")]
    pub python: Option<Vec<String>>,
    /// Node modules, `require`d as the snippet would resolve them.
    #[serde(default, deserialize_with = "checked::module_names")]
    pub javascript: Option<Vec<String>>,
}

/// Named sessions: calls that share one container and one interpreter.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsFile {
    /// Whether the run tools take a `session`.
    pub allowed: Option<bool>,
    /// Sessions one client may have open at once.
    #[serde(default, deserialize_with = "checked::at_least_one")]
    pub max: Option<usize>,
    /// A session with no call for this long ends.
    #[serde(default, deserialize_with = "checked::timeout")]
    pub idle_timeout: Option<HumanDuration>,
    /// A session ends this long after it started, however busy.
    #[serde(default, deserialize_with = "checked::timeout")]
    pub max_lifetime: Option<HumanDuration>,
    /// How long a JavaScript session call waits, once its code has run, for the timers,
    /// requests and promise callbacks it started (as Node's REPL shows their output
    /// with the line that started them); what still runs then is said, and its output
    /// comes with a later call. Never past the call's own timeout. `0s`: no wait.
    pub settle: Option<HumanDuration>,
}

/// What comes back from a run besides stdout and stderr.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputsFile {
    /// Files a run creates or changes under `/sandbox` come back.
    pub files: Option<bool>,
    /// matplotlib figures (shown, or open at the end) come back as PNG.
    pub figures: Option<bool>,
    /// Most files (figures included) returned per run; the rest are listed by name.
    pub max_files: Option<usize>,
    /// A larger file is listed with its size, not returned.
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub max_file_size: Option<ByteSize>,
    /// Most bytes returned per run, all files together.
    #[serde(default, deserialize_with = "checked::nonzero_size")]
    pub max_total_size: Option<ByteSize>,
    /// A text file up to this size is shown in the result's text.
    pub inline_text: Option<ByteSize>,
    /// Returned files are also written to this host folder.
    pub export: Option<ExportFile>,
}

/// Returned files are also written to this host folder.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportFile {
    /// A host folder, relative to the policy file and inside its folder unless written
    /// as an absolute path. It need not exist yet.
    #[serde(deserialize_with = "checked::host_path")]
    pub path: String,
    /// An existing file there is replaced; otherwise it is left and the result says so.
    pub overwrite: Option<bool>,
    /// Protected names (dot-names, files tools run) this policy lets an export write.
    pub allow: Option<Vec<String>>,
}

/// Packages a run may ask to have installed, and where they come from.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackagesFile {
    /// Python packages a run may ask for: names, each with at most a version
    /// requirement (`"pandas>=2"`). A name not listed is refused before anything runs.
    #[serde(default, deserialize_with = "checked::package_specs")]
    pub python: Option<Vec<String>>,
    /// npm packages a run may ask for (`lodash`, `"dayjs@^1"`).
    #[serde(default, deserialize_with = "checked::package_specs")]
    pub javascript: Option<Vec<String>>,
    /// Where packages come from; the install step reaches only these.
    pub index: Option<PackageIndexFile>,
}

/// Where packages come from; the install step reaches only these.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageIndexFile {
    /// A PEP 503 simple index (an `http` or `https` URL).
    #[serde(default, deserialize_with = "checked::index_url")]
    pub python: Option<String>,
    /// An npm registry (an `http` or `https` URL).
    #[serde(default, deserialize_with = "checked::index_url")]
    pub javascript: Option<String>,
}

/// The audit log (opt-in): one JSON line per tool call, appended.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditFile {
    /// A host file, relative to the policy file and inside its folder unless written as
    /// an absolute path. It is made when a server starts.
    #[serde(deserialize_with = "checked::host_path")]
    pub path: String,
}

/// A host folder (or file) mounted into every sandbox container.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountFile {
    /// A host path that exists, relative to the policy file and inside its folder
    /// unless written as an absolute path.
    #[serde(deserialize_with = "checked::host_path")]
    pub source: String,
    /// Where it appears in the sandbox: an absolute path, not one the sandbox needs for
    /// itself (`/sandbox`, `/tmp`, `/etc`, `/usr`, …); say `/data`.
    #[serde(deserialize_with = "checked::mount_target")]
    pub target: String,
    /// Writable from the sandbox; read-only unless given.
    pub rw: Option<bool>,
}

/// One rule of the checker.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    /// The rule's id (lower-case letters, digits, `-`, `_`): an inherited rule's to
    /// change it, a new one to add a rule.
    #[serde(deserialize_with = "checked::rule_id")]
    pub id: String,
    /// A word that groups rules in findings (`process`, `network`, …).
    pub category: Option<String>,
    /// What happens when the rule matches: `deny`, `ask`, `warn` or `off`. A new rule
    /// without one denies.
    pub action: Option<Action>,
    /// What a finding says, followed by what exactly matched.
    pub message: Option<String>,
    /// What the rule matches in code of either language.
    pub any_language: Option<Matcher>,
    /// What the rule matches in Python.
    pub python: Option<Matcher>,
    /// What the rule matches in JavaScript.
    pub javascript: Option<Matcher>,
}

/// An image name, or a list of them (for the policy reference: the file takes both).
#[derive(JsonSchema)]
#[schemars(extend("x-type" = "image name, or a list of them"))]
#[allow(dead_code)]
struct ImageNames(Vec<String>);

/// What a rule does when it matches.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, JsonSchema,
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// `DOCKER_HOST`, then Docker's socket, then Podman's.
    #[default]
    Auto,
    /// Docker (or what answers at `DOCKER_HOST`).
    Docker,
    /// Podman, through its Docker-compatible socket.
    Podman,
}

/// What facts a rule matches, for one language (or for all, under `any_language`).
/// Every list entry is a glob where `*` matches any run of characters, dots included.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    /// Modules whose import matches; `m` also matches its submodules (`m.x`, `m/x`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    /// Qualified names whose use (call or not) matches: `os.system`, `subprocess.*`, `eval`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
    /// Kinds of dynamic access that match: code reaching for a module, a name or code
    /// that cannot be known before it runs (`getattr(os, name)`, `require(x)`, …).
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
    /// Library functions that evaluate a string the program hands them (`module.function`
    /// globs, as the run-time layers name the function doing the evaluating, such as
    /// `sympy.*` or `collections.namedtuple`), which this rule lets run: the code they
    /// evaluate then runs as the program's own and is judged like it. Any other
    /// library's evaluation of a string on the program's behalf is refused at run time
    /// by a rule that denies `exec` (in JavaScript: `Function` of a string, named
    /// `package.function` after the function that asks, such as `lodash.template`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evaluators: Vec<String>,
}

/// A dynamic-access kind, checked against the frontends' vocabulary when the file loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(transparent)]
#[schemars(extend("enum" = crate::analysis::dynamic::ALL))]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificates: Option<Certificates>,
    /// Secrets swapped in at the egress proxy, in the order written.
    #[serde(
        serialize_with = "super::secrets::serialize",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub secrets: Vec<super::secrets::Secret>,
    pub rules: Vec<Rule>,
    /// The policy files it was read from (real paths, the `extends` chain's included):
    /// what no export and no rw mount may reach.
    #[serde(skip)]
    pub files: Vec<std::path::PathBuf>,
}

/// The CA bundle handed to the sandbox (`certificates:`), written back as the file gave
/// it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Certificates {
    /// As the policy (or the variable) wrote it.
    pub source: String,
    /// The file on the host.
    #[serde(skip)]
    pub host: std::path::PathBuf,
    /// Its text, as read when the policy was loaded (PEM certificates only).
    #[serde(skip)]
    pub pem: String,
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

/// `Default` is all zeros: not a usable limit, only the start the root preset (which
/// must give every limit) is laid over.
#[derive(Debug, Clone, Default, Serialize)]
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
///
/// `Default` is no image: only the start the root preset (which must name both) is laid over.
#[derive(Debug, Clone, Default, Serialize)]
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

/// `Default` is zero: only the start the root preset (which must give both numbers) is
/// laid over.
#[derive(Debug, Clone, Default, Serialize)]
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
    /// How long a JavaScript call waits for the work it started to settle.
    pub settle: HumanDuration,
}

impl Default for SessionSettings {
    fn default() -> SessionSettings {
        SessionSettings {
            allowed: true,
            max: 4,
            idle_timeout: HumanDuration(Duration::from_secs(600)),
            max_lifetime: HumanDuration(Duration::from_secs(3600)),
            settle: HumanDuration(Duration::from_secs(1)),
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
    /// Globs of protected names (see `policy::protected_names`) exported anyway.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
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
