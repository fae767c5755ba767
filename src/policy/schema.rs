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

/// Checks made while the file is read, so that serde_yaml's error names the exact line
/// and column of the value at fault (and its key path), not a guess.
mod checked {
    use super::{ByteSize, HumanDuration, NetworkMode};
    use serde::de::{value, Deserializer, Error, IntoDeserializer, SeqAccess, Visitor};
    use serde::Deserialize;
    use std::fmt;
    use std::marker::PhantomData;

    /// Deserializes an optional `T` and checks it. The value is read and checked inside
    /// the deserializer's own call for the scalar (`deserialize_any`), which is what makes
    /// serde_yaml stamp an error with that scalar's line, column and key path.
    fn check<'de, D, T, F>(deserializer: D, valid: F) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
        F: FnOnce(&T) -> Result<(), String>,
    {
        struct Optional<T, F>(F, PhantomData<T>);
        impl<'de, T: Deserialize<'de>, F: FnOnce(&T) -> Result<(), String>> Visitor<'de>
            for Optional<T, F>
        {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value")
            }
            fn visit_none<E: Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
                d.deserialize_any(Scalar(self.0, PhantomData)).map(Some)
            }
        }
        deserializer.deserialize_option(Optional(valid, PhantomData))
    }

    /// A scalar turned into `T` and checked, within the visit of the scalar itself.
    struct Scalar<T, F>(F, PhantomData<T>);

    impl<T, F: FnOnce(&T) -> Result<(), String>> Scalar<T, F> {
        fn finish<E: Error>(self, read: Result<T, value::Error>) -> Result<T, E> {
            let value = read.map_err(E::custom)?;
            (self.0)(&value).map_err(E::custom)?;
            Ok(value)
        }
    }

    impl<'de, T: Deserialize<'de>, F: FnOnce(&T) -> Result<(), String>> Visitor<'de> for Scalar<T, F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number or a string")
        }
        fn visit_bool<E: Error>(self, v: bool) -> Result<T, E> {
            self.finish(T::deserialize(v.into_deserializer()))
        }
        fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
            self.finish(T::deserialize(v.into_deserializer()))
        }
        fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
            self.finish(T::deserialize(v.into_deserializer()))
        }
        fn visit_f64<E: Error>(self, v: f64) -> Result<T, E> {
            self.finish(T::deserialize(v.into_deserializer()))
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<T, E> {
            self.finish(T::deserialize(v.into_deserializer()))
        }
    }

    pub fn version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        check(d, |v: &u32| match v {
            1 => Ok(()),
            other => Err(format!(
                "unsupported version {other}; this build reads version 1"
            )),
        })
    }

    /// Above 0, and no more than this machine has: the engine would refuse every run
    /// of a container asking for more, so the policy is refused once, here, instead.
    pub fn cpus<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        check(d, |cpus: &f64| {
            let cores = std::thread::available_parallelism().map_or(1024, |n| n.get());
            if cpus.is_nan() || *cpus <= 0.0 {
                Err(format!("must be a number of cores above 0, got {cpus}"))
            } else if *cpus > cores as f64 {
                Err(format!(
                    "{cpus} cores asked, and this machine has {cores}: the engine would refuse \
                     every run; use at most {cores}"
                ))
            } else {
                Ok(())
            }
        })
    }

    pub fn at_least_one<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + PartialOrd + From<u8>,
    {
        check(d, |n: &T| {
            if *n >= T::from(1) {
                Ok(())
            } else {
                Err("must be at least 1".into())
            }
        })
    }

    pub fn nonzero_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
        check(d, |size: &ByteSize| {
            if size.bytes() > 0 {
                Ok(())
            } else {
                Err("must be above 0".into())
            }
        })
    }

    pub fn memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
        check(d, |size: &ByteSize| {
            if size.bytes() >= 6 << 20 {
                Ok(())
            } else {
                Err("must be at least 6MiB (the engine's own floor)".into())
            }
        })
    }

    pub fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HumanDuration>, D::Error> {
        check(d, |t: &HumanDuration| {
            if t.0.is_zero() {
                Err("must be above 0".into())
            } else {
                Ok(())
            }
        })
    }

    /// `none`, `bridge`, or `{ allow: [host, host:port, *.domain, ...] }`, each entry
    /// checked within the visit of its own scalar, so an error points at it.
    pub fn network<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NetworkMode>, D::Error> {
        use serde::de::MapAccess;
        struct Network;
        impl<'de> Visitor<'de> for Network {
            type Value = NetworkMode;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`none`, `bridge` or `{ allow: [hosts] }`")
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<NetworkMode, E> {
                match v {
                    "none" => Ok(NetworkMode::None),
                    "bridge" => Ok(NetworkMode::Bridge),
                    other => Err(E::custom(format!(
                        "unknown variant `{other}`, expected `none` or `bridge`, or `{{ allow: [hosts] }}`"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NetworkMode, A::Error> {
                let mut hosts = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "allow" {
                        return Err(A::Error::custom(format!(
                            "unknown field `{key}`, expected `allow`"
                        )));
                    }
                    hosts = Some(map.next_value_seed(Hosts)?);
                }
                let hosts = hosts.ok_or_else(|| A::Error::custom("`allow:` is missing"))?;
                Ok(NetworkMode::Allow(hosts))
            }
        }
        struct Hosts;
        impl<'de> serde::de::DeserializeSeed<'de> for Hosts {
            type Value = Vec<crate::policy::allowlist::HostRule>;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                let names = names(d, "a list of hosts", |host| {
                    crate::policy::allowlist::HostRule::parse(host).map(|_| ())
                })?
                .unwrap_or_default();
                Ok(names
                    .iter()
                    .filter_map(|host| crate::policy::allowlist::HostRule::parse(host).ok())
                    .collect())
            }
        }
        d.deserialize_any(Network).map(Some)
    }

    /// An image reference, or a non-empty list of them (the first present is used).
    pub fn images<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
        fn valid(image: &String) -> Result<(), String> {
            if image.trim().is_empty() || image.contains(char::is_whitespace) {
                Err(format!("`{image}` is not an image reference"))
            } else {
                Ok(())
            }
        }
        struct OneOrMany;
        impl<'de> Visitor<'de> for OneOrMany {
            type Value = Vec<String>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an image name, or a list of image names")
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<Vec<String>, E> {
                let image = v.to_string();
                valid(&image).map_err(E::custom)?;
                Ok(vec![image])
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
                let mut images = Vec::new();
                while let Some(image) = seq.next_element_seed(Checked(valid))? {
                    images.push(image);
                }
                if images.is_empty() {
                    return Err(A::Error::custom("the list of images is empty"));
                }
                Ok(images)
            }
        }
        d.deserialize_any(OneOrMany).map(Some)
    }

    pub fn runtime<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        check(d, |runtime: &String| {
            let valid = !runtime.is_empty()
                && runtime
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if valid {
                Ok(())
            } else {
                Err(format!(
                    "`{runtime}` is not a container runtime name (such as `runsc`)"
                ))
            }
        })
    }

    pub fn variable_names<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<String>>, D::Error> {
        names(d, "a list of environment variable names", |name| {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if valid {
                Ok(())
            } else {
                Err(format!("`{name}` is not an environment variable name"))
            }
        })
    }

    /// Python's dotted module names, or npm package names (`lodash`, `@scope/pkg`).
    pub fn module_names<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
        names(d, "a list of module names", |name| {
            let valid = !name.is_empty()
                && !name.starts_with('.')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-@/:".contains(c));
            if valid {
                Ok(())
            } else {
                Err(format!("`{name}` is not a module name"))
            }
        })
    }

    /// A list of strings, each checked within the visit of its own scalar (so an error
    /// points at the element at fault).
    fn names<'de, D: Deserializer<'de>>(
        d: D,
        expecting: &'static str,
        valid: fn(&String) -> Result<(), String>,
    ) -> Result<Option<Vec<String>>, D::Error> {
        struct Names(&'static str, fn(&String) -> Result<(), String>);
        impl<'de> Visitor<'de> for Names {
            type Value = Vec<String>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(self.0)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element_seed(Checked(self.1))? {
                    names.push(name);
                }
                Ok(names)
            }
        }
        d.deserialize_seq(Names(expecting, valid)).map(Some)
    }

    /// Package specs: a name, and at most a version requirement.
    pub fn package_specs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
        names(d, "a list of packages", |spec| {
            crate::policy::packages::valid_spec(spec)
        })
    }

    /// A package index: an `http` or `https` URL.
    pub fn index_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        check(d, |url: &String| {
            if crate::analysis::urls::host_and_port(url).is_some()
                && (url.starts_with("http://") || url.starts_with("https://"))
            {
                Ok(())
            } else {
                Err(format!("`{url}` is not an http(s) URL of a package index"))
            }
        })
    }

    /// A host path as a policy names it: not empty, no NUL.
    pub fn host_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let path = check(d, |path: &String| {
            if path.trim().is_empty() || path.contains('\0') {
                Err(format!("`{path}` is not a host path"))
            } else {
                Ok(())
            }
        })?;
        path.ok_or_else(|| D::Error::custom("a host path is needed"))
    }

    /// Where a mount appears: absolute, without `.` or `..`, and not a place the
    /// sandbox itself needs (its scratch folders, the guard's files, the kernel's).
    pub fn mount_target<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let target = check(d, |target: &String| {
            let parts: Vec<&str> = target.split('/').skip(1).collect();
            if !target.starts_with('/') || parts.iter().any(|p| matches!(*p, "." | "..")) {
                return Err(format!(
                    "`{target}` must be an absolute path in the sandbox, without `.` or `..`"
                ));
            }
            let clean = format!(
                "/{}",
                parts
                    .iter()
                    .filter(|p| !p.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join("/")
            );
            let reserved = ["/sandbox", "/tmp", "/"];
            let under = [
                "/proc",
                "/sys",
                "/dev",
                "/opt/code-sandbox",
                "/etc",
                "/usr",
                "/bin",
                "/lib",
            ];
            if reserved.contains(&clean.as_str())
                || under
                    .iter()
                    .any(|dir| clean == *dir || clean.starts_with(&format!("{dir}/")))
            {
                return Err(format!(
                    "`{target}` is a place the sandbox needs for itself; mount somewhere else \
                     (say /data, or a folder under /sandbox)"
                ));
            }
            Ok(())
        })?;
        target.ok_or_else(|| D::Error::custom("a mount needs a `target`"))
    }

    pub fn rule_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let id = check(d, |id: &String| {
            let valid = !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if valid {
                Ok(())
            } else {
                Err(format!(
                    "rule id `{id}` must be lower-case letters, digits, `-` or `_`"
                ))
            }
        })?;
        id.ok_or_else(|| D::Error::custom("a rule needs an `id`"))
    }

    /// A value deserialized and then checked, as one seed (for list elements).
    struct Checked<F>(F);

    impl<'de, F: FnOnce(&String) -> Result<(), String>> serde::de::DeserializeSeed<'de> for Checked<F> {
        type Value = String;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            d.deserialize_any(Scalar(self.0, PhantomData))
        }
    }
}
