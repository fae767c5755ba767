//! What the policy compiles into inside a box, for one language: the supervisor's
//! command line (the kernel's layers: no process under a rule that denies them, the
//! filesystem closed but for the sandbox's folders, reading limited under a
//! filesystem rule that denies) and, after its `--`, the interpreter's, with the
//! settings its bootstrap reads (the rules its hooks explain, what it preloads, whether
//! it serves a session).
//!
//! Only blocking rules install anything; a rule at `warn` or `off` is never enforced
//! here. A layer the policy needs but the image or build cannot provide (Node older
//! than 20 has no permission model; a host without the supervisor) refuses the run:
//! never a silent fallback to less. The kernel's layers are checked by the supervisor
//! itself when the box starts (a kernel without Landlock).

use super::{has_supervisor, Interpreters};
use super::{layout, SUPERVISOR_FILE};
use crate::analysis::{dynamic, Language};
use crate::policy::enforcement::{EnforcedRule, Enforcement, RuleRef};
use crate::policy::{NetworkMode, PolicyEngine};
use crate::sandbox::files_out::Collect;
use serde::Serialize;

/// A command line and the environment variables it needs.
pub type GuardedCommand = (Vec<String>, Vec<(String, String)>);

/// Folders a program of either language reads to run at all (its interpreter, its
/// libraries, its configuration, the box's own files): readable even when the
/// policy's filesystem rule limits reading.
const SYSTEM_FOLDERS: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc",
    "/sys", "/dev",
];

/// Devices a program may write (and read).
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/urandom",
    "/dev/random",
];

/// How the interpreter waits: for one program, or for a session's calls; and what it
/// imports before that.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mode {
    pub session: bool,
    pub preload: Vec<String>,
    /// `ask` rules a person approved for the one run this interpreter is for: not
    /// enforced in it.
    pub relaxed: Vec<String>,
    /// The package install step: no rules (the program is the server's own), the
    /// package storage writable, and the relay to the egress proxy, whose list for it
    /// is the package index.
    pub install: bool,
    /// The engine volume of installed packages the container mounts.
    pub packages: Option<String>,
}

/// The run-time enforcement one language gets under one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// What the policy asks: the rules, and the rules that stand for a whole layer
    /// (`no_processes`: the kernel floor, and for Node the permission model;
    /// `no_codegen`: Node's code-generation switch; `filesystem`: reading limited).
    enforcement: Enforcement,
    /// What the supervisor returns when the program ends.
    outputs: Collect,
    /// Places besides the scratch folders the program may write: `rw` mounts.
    writable: Vec<String>,
    /// Folders mounted into the box (readable even when reading is limited).
    mounted: Vec<String>,
    /// Under a network allowlist: the supervisor relays the loopback port to the proxy.
    relays: bool,
}

impl Guard {
    /// The guard of `language` under the policy `engine` holds.
    pub fn new(engine: &PolicyEngine, language: Language) -> Guard {
        let policy = engine.policy();
        Guard {
            enforcement: Enforcement::new(engine, language),
            outputs: Collect::new(&policy.outputs, &policy.mounts),
            writable: policy
                .mounts
                .iter()
                .filter(|mount| mount.rw)
                .map(|mount| mount.target.clone())
                .collect(),
            mounted: policy.mounts.iter().map(|m| m.target.clone()).collect(),
            relays: matches!(policy.network, NetworkMode::Allow(_)),
        }
    }

    /// This guard without the rules in `approved` (rule ids a person approved for one
    /// run), and without the layers that stand for them.
    pub fn relaxed(&self, approved: &[String]) -> Guard {
        Guard {
            enforcement: self.enforcement.without(approved),
            ..self.clone()
        }
    }

    /// The settings the bootstrap reads (JSON).
    pub fn settings(&self, mode: &Mode) -> String {
        #[derive(Serialize)]
        struct Settings<'a> {
            module_hooks: bool,
            session: bool,
            preload: &'a [String],
            rules: &'a [EnforcedRule],
            #[serde(skip_serializing_if = "Option::is_none")]
            permission_rule: Option<&'a RuleRef>,
            #[serde(skip_serializing_if = "Option::is_none")]
            codegen_rule: Option<&'a RuleRef>,
            /// Matplotlib figures are drawn off screen and saved for the supervisor.
            figures: bool,
            workdir: &'a str,
            /// Where the program may write: code from there is the program's own.
            writable: Vec<&'a str>,
        }
        serde_json::to_string(&Settings {
            // Started before the code is known, so on whenever the policy refuses code
            // from files: the hooks thread's start is paid before the call.
            module_hooks: self.refuses_code_from_files(),
            session: mode.session,
            preload: &mode.preload,
            rules: &self.enforcement.rules,
            permission_rule: self.permission(),
            codegen_rule: self.enforcement.no_codegen.as_ref(),
            figures: self.outputs.figures(),
            workdir: layout::WORKDIR,
            writable: self.writable_folders(mode),
        })
        .expect("guard settings serialize")
    }

    /// The supervisor's command line and, after its `--`, the interpreter that waits in
    /// a box for its program and runs it under this guard, with the environment it
    /// needs; or why the image or build cannot provide what the policy asks.
    pub fn command(
        &self,
        interpreters: &Interpreters,
        mode: &Mode,
    ) -> Result<GuardedCommand, String> {
        if !has_supervisor() {
            return Err(
                "this build of code-sandbox-mcp has no supervisor for this platform (Linux on \
                 x86-64 or aarch64 only), which every box needs, so the code is not run"
                    .into(),
            );
        }
        let mut argv = vec![layout::asset(SUPERVISOR_FILE)];
        argv.extend(self.supervisor_options(mode));
        argv.push("--".into());
        let (interpreter, env) = self.interpreter(interpreters, mode)?;
        argv.extend(interpreter);
        Ok((argv, env))
    }

    /// What the supervisor is told (see the supervisor's `settings`).
    fn supervisor_options(&self, mode: &Mode) -> Vec<String> {
        let mut options = Vec::new();
        let mut flag = |name: &str| options.push(name.to_string());
        if self.kernel_floor().is_some() {
            flag("--floor");
        }
        // Any rule enforced at all: the filesystem promise (writes only to the
        // sandbox's folders, nothing under /proc) is part of the floor.
        if !self.enforcement.rules.is_empty() {
            flag("--protect");
        }
        if mode.session {
            flag("--session");
        }
        let mut valued = |name: &str, value: &str| {
            options.push(name.to_string());
            options.push(value.to_string());
        };
        valued("--workdir", layout::WORKDIR);
        valued("--figures", layout::FIGURES);
        for dir in &self.writable_folders(mode) {
            valued("--write", dir);
        }
        for device in WRITABLE_DEVICES {
            valued("--write-file", device);
        }
        if let Some((_, inside)) = &self.enforcement.filesystem {
            let readable = SYSTEM_FOLDERS
                .iter()
                .copied()
                .chain(inside.iter().map(String::as_str))
                .chain(self.mounted.iter().map(String::as_str));
            for dir in readable {
                valued("--read", dir);
            }
        }
        // The install step reaches its package index through the relay too.
        if self.relays || mode.install {
            let relay = format!("{}:{}", layout::RELAY_PORT, layout::EGRESS_SOCKET);
            valued("--relay", &relay);
        }
        if self.outputs.files() {
            options.push("--files".into());
        }
        let caps = self.outputs.caps();
        for (name, value) in [
            ("--max-files", caps.0),
            ("--max-file-size", caps.1),
            ("--max-total-size", caps.2),
        ] {
            options.push(name.into());
            options.push(value.to_string());
        }
        for skip in self.outputs.skipped() {
            options.push("--skip".into());
            options.push(skip.clone());
        }
        options
    }

    /// The folders the program may write: the working directory, the scratch folders,
    /// `rw` mounts, and in the install step the package storage.
    fn writable_folders(&self, mode: &Mode) -> Vec<&str> {
        let mut writable: Vec<&str> = vec![layout::WORKDIR];
        writable.extend(layout::SCRATCH);
        writable.extend(self.writable.iter().map(String::as_str));
        if mode.install {
            writable.push(layout::PACKAGES);
        }
        writable
    }

    /// The interpreter's command line and environment.
    fn interpreter(
        &self,
        interpreters: &Interpreters,
        mode: &Mode,
    ) -> Result<GuardedCommand, String> {
        let mut argv = Vec::new();
        let mut env = Vec::new();
        match self.enforcement.language {
            Language::Python => {
                let python = interpreters
                    .python
                    .clone()
                    .ok_or("the image has no python3 on its PATH")?;
                // Imported rather than run as a script, so that the bytecode the setup
                // compiled is used. Isolated (`-I`: no PYTHON* variable, no user site)
                // and without `site` (`-S`): nothing of a package set runs before the
                // guard's hook; the bootstrap adds the site folders after it.
                argv.extend([
                    python,
                    "-I".into(),
                    "-S".into(),
                    "-u".into(),
                    "-B".into(),
                    "-c".into(),
                    format!(
                        "import sys; sys.path.insert(0, '{}'); import python_guard",
                        layout::ASSETS
                    ),
                    self.settings(mode),
                ]);
            }
            Language::JavaScript => {
                let (node, (major, minor)) = interpreters
                    .node
                    .clone()
                    .ok_or("the image has no node on its PATH")?;
                argv.push(node);
                if let Some(rule) = self.permission() {
                    // One path a flag: Node 20.19 no longer reads a comma list.
                    let writable = [layout::WORKDIR, "/tmp"]
                        .into_iter()
                        .chain(self.writable.iter().map(String::as_str))
                        .map(|path| format!("--allow-fs-write={path}"));
                    match major {
                        22.. => {
                            argv.extend(["--permission".into(), "--allow-fs-read=*".into()]);
                            argv.extend(writable);
                        }
                        20..=21 => {
                            argv.extend([
                                "--experimental-permission".into(),
                                // Node 20 warns on every start that the model is experimental.
                                "--disable-warning=ExperimentalWarning".into(),
                                "--allow-fs-read=*".into(),
                            ]);
                            argv.extend(writable);
                        }
                        _ => {
                            return Err(format!(
                                "the policy's rule `{}` is enforced at run time with Node's \
                                 permission model, which Node {major} lacks (it needs Node 20 \
                                 or later): point the policy's `images.javascript` at a newer \
                                 Node image",
                                rule.id
                            ))
                        }
                    }
                }
                if self.enforcement.no_codegen.is_some() {
                    argv.push("--disallow-code-generation-from-strings".into());
                }
                // ES modules from strings (`data:` URLs) or from files the snippet wrote
                // can only be reached through `import`: the module hooks that refuse
                // them run on a thread of Node's own. `require` of an ES module goes
                // through no hook, so it is switched off.
                if self.refuses_code_from_files() && self.permission().is_some() {
                    // The guard keeps the snippet's own `Worker` refused.
                    argv.push("--allow-worker".into());
                    argv.push("--disable-warning=SecurityWarning".into());
                }
                if self.refuses_code_from_files() && (major, minor) >= (20, 17) {
                    argv.push("--no-experimental-require-module".into());
                }
                // The guard is the main module: it takes the program, writes nothing
                // (the supervisor wrote the file) and starts it as the main module.
                env.push(("CODE_SANDBOX_GUARD".into(), self.settings(mode)));
                argv.push(layout::asset("node_guard.cjs"));
            }
        }
        Ok((argv, env))
    }

    /// The rule that denies starting processes (the kernel's refusals are its
    /// findings), if any.
    pub fn denies_processes(&self) -> Option<&RuleRef> {
        self.kernel_floor()
    }

    /// The rule that turns the kernel floor on (no fork, no exec), if any.
    fn kernel_floor(&self) -> Option<&RuleRef> {
        self.enforcement.no_processes.as_ref()
    }

    /// Node: the rule that needs the permission model, if any (the same one).
    fn permission(&self) -> Option<&RuleRef> {
        (self.enforcement.language == Language::JavaScript)
            .then_some(self.enforcement.no_processes.as_ref())
            .flatten()
    }

    /// True when a deny rule covers running code from strings: the Node guard then
    /// installs module hooks that refuse `data:` imports and files the snippet wrote.
    fn refuses_code_from_files(&self) -> bool {
        self.enforcement.no_codegen.is_some()
            || self.enforcement.rules.iter().any(|rule| {
                rule.dynamic
                    .iter()
                    .any(|kind| kind == dynamic::STRING_CODE || kind == dynamic::FILE_CODE)
            })
    }

    /// The layers this guard turns on, for `policy layers` and the logs.
    pub fn layers(&self) -> Vec<&'static str> {
        let mut layers = Vec::new();
        if !self.enforcement.rules.is_empty() {
            layers.push(match self.enforcement.language {
                Language::Python => "python-audit-hook",
                Language::JavaScript => "node-guard",
            });
        }
        if self.permission().is_some() {
            layers.push("node-permission");
        }
        if self.enforcement.no_codegen.is_some() {
            layers.push("node-codegen");
        }
        if self.kernel_floor().is_some() {
            layers.push("kernel");
        }
        if !self.enforcement.rules.is_empty() {
            layers.push("landlock");
        }
        layers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Action, Policy};

    #[test]
    fn the_default_policy_turns_on_every_layer() {
        let policy = Policy::preset("default").unwrap();
        let engine = PolicyEngine::new(policy);
        let python = Guard::new(&engine, Language::Python);
        assert_eq!(python.layers(), ["python-audit-hook", "kernel", "landlock"]);
        assert_eq!(python.kernel_floor().unwrap().id, "process-exec");
        let node = Guard::new(&engine, Language::JavaScript);
        assert_eq!(
            node.layers(),
            [
                "node-guard",
                "node-permission",
                "node-codegen",
                "kernel",
                "landlock"
            ]
        );
    }

    #[test]
    fn the_supervisor_starts_the_interpreter_under_the_policys_layers() {
        let engine = PolicyEngine::new(Policy::preset("strict").unwrap());
        let guard = Guard::new(&engine, Language::Python);
        let interpreters = Interpreters::parse("python3=/usr/bin/python3\n");
        let (argv, env) = guard.command(&interpreters, &Mode::default()).unwrap();
        assert_eq!(argv[0], "/opt/code-sandbox/supervisor");
        let split = argv.iter().position(|a| a == "--").unwrap();
        let options = &argv[1..split];
        for flag in ["--floor", "--protect", "--files"] {
            assert!(options.contains(&flag.to_string()), "{flag} in {options:?}");
        }
        let values = |name: &str| -> Vec<&str> {
            options
                .windows(2)
                .filter(|w| w[0] == name)
                .map(|w| w[1].as_str())
                .collect()
        };
        assert_eq!(values("--write"), ["/sandbox", "/tmp", "/dev/shm"]);
        // Strict's filesystem rule denies: reading is limited to the system and inside.
        let read = values("--read");
        assert!(read.contains(&"/usr") && read.contains(&"/sandbox") && !read.contains(&"/"));
        assert_eq!(argv[split + 1], "/usr/bin/python3");
        let settings: serde_json::Value = serde_json::from_str(argv.last().unwrap()).unwrap();
        assert!(settings["rules"].as_array().unwrap().len() > 3);
        assert!(env.is_empty());
    }

    #[test]
    fn rules_at_warn_or_off_install_nothing_but_the_waiting_bootstrap() {
        let mut policy = Policy::preset("default").unwrap();
        for rule in &mut policy.rules {
            rule.action = Action::Warn;
        }
        let guard = Guard::new(&PolicyEngine::new(policy), Language::Python);
        assert!(guard.layers().is_empty());
        let interpreters = Interpreters::parse("python3=/usr/bin/python3\n");
        let mode = Mode {
            session: true,
            preload: vec!["json".into()],
            ..Mode::default()
        };
        let (argv, env) = guard.command(&interpreters, &mode).unwrap();
        assert!(!argv.contains(&"--floor".to_string()));
        assert!(!argv.contains(&"--protect".to_string()));
        assert!(argv.contains(&"--session".to_string()));
        let settings: serde_json::Value = serde_json::from_str(argv.last().unwrap()).unwrap();
        assert_eq!(settings["rules"], serde_json::json!([]));
        assert_eq!(settings["session"], true);
        assert_eq!(settings["preload"], serde_json::json!(["json"]));
        assert!(env.is_empty());
    }

    #[test]
    fn node_flags_follow_the_version_and_old_node_is_refused() {
        let policy = Policy::preset("default").unwrap();
        let guard = Guard::new(&PolicyEngine::new(policy), Language::JavaScript);
        let node = |version: &str| {
            Interpreters::parse(&format!("node=/usr/bin/node\nnode-version={version}\n"))
        };
        let (argv, env) = guard.command(&node("v22.3.0"), &Mode::default()).unwrap();
        assert!(argv.contains(&"--permission".to_string()), "{argv:?}");
        assert!(argv.contains(&"--allow-worker".to_string()), "{argv:?}");
        assert!(argv.contains(&"--disallow-code-generation-from-strings".to_string()));
        assert_eq!(env[0].0, "CODE_SANDBOX_GUARD");
        assert!(env[0].1.contains("\"module_hooks\":true"), "{env:?}");
        let (argv, _) = guard.command(&node("v20.19.2"), &Mode::default()).unwrap();
        assert!(
            argv.contains(&"--experimental-permission".to_string()),
            "{argv:?}"
        );
        assert!(argv.contains(&"--no-experimental-require-module".to_string()));
        // The guard is the main module; the snippet's file is named when it arrives.
        assert_eq!(argv.last().unwrap(), "/opt/code-sandbox/node_guard.cjs");
        let refused = guard
            .command(&node("v18.19.0"), &Mode::default())
            .unwrap_err();
        assert!(refused.contains("Node 20 or later"), "{refused}");
    }

    #[test]
    fn an_approved_rule_is_left_out_of_that_runs_guard_only() {
        let mut policy = Policy::preset("default").unwrap();
        for rule in &mut policy.rules {
            if rule.id == "process-exec" {
                rule.action = Action::Ask;
            }
        }
        // `ask` is enforced at run time as a denial...
        let guard = Guard::new(&PolicyEngine::new(policy), Language::Python);
        assert_eq!(guard.kernel_floor().unwrap().id, "process-exec");
        // ...but not for a run whose code a person approved.
        let relaxed = guard.relaxed(&["process-exec".to_string()]);
        assert!(relaxed.kernel_floor().is_none());
        assert!(!relaxed
            .enforcement
            .rules
            .iter()
            .any(|rule| rule.id == "process-exec"));
        assert!(relaxed
            .enforcement
            .rules
            .iter()
            .any(|rule| rule.id == "dynamic-code"));
    }
}
