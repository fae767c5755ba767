//! The box's own assets: what the policy compiles into inside a box, the run-time
//! layers that stop what the static check missed, whatever the backend. Installed
//! before the snippet's first line:
//!
//! - Python: `python_guard.py`, a standard-library bootstrap that adds audit hooks
//!   mapping CPython's audit events to the policy's deny rules, then runs the snippet;
//! - Node: the permission model (no child processes, workers, addons, WASI; writes only
//!   to the scratch directories), `--disallow-code-generation-from-strings`, and
//!   `node_guard.cjs`, the main module (it starts the snippet), which refuses denied built-in modules and internals;
//! - both: `exec-guard` (the crate in `src/exec-guard`), a seccomp filter stacked on the engine's own
//!   profile: always without io_uring, userfaultfd, bpf, ptrace and the like, and, as
//!   the kernel floor under a rule that denies starting processes, without fork or exec.
//!
//! Only deny rules install anything; a rule at `warn` or `off` is never enforced here.
//! A layer the policy needs but the image cannot provide (Node older than 20 has no
//! permission model; a host without the helper) refuses the run: never a silent
//! fallback to less. A run stopped here writes one marker line to stderr, which the
//! runtime turns into a finding ([`take_blocks`]).

use super::backend::AssetSetup;
use super::files_out::Collect;
use super::layout;
use crate::analysis::{dynamic, Language};
use crate::policy::enforcement::{EnforcedRule, Enforcement, RuleRef};
use crate::policy::{Action, Finding, Layer, Policy, PolicyEngine, Rule};
use serde::{Deserialize, Serialize};

/// The kernel-floor helper, built by `build.rs` beside this file from the `exec-guard`
/// crate; empty where the target has none.
const EXEC_GUARD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/exec-guard"));
const PYTHON_GUARD: &str = include_str!("python_guard.py");
const NODE_GUARD: &str = include_str!("node_guard.cjs");

/// Starts the one stderr line a run-time layer writes when it stops a run.
pub const MARKER: &str = "\u{1e}code-sandbox-mcp:blocked ";

/// The files installed into every box, by name under [`layout::ASSETS`], with
/// their modes.
pub fn files() -> [(&'static str, &'static [u8], u32); 3] {
    [
        ("exec-guard", EXEC_GUARD, 0o555),
        ("python_guard.py", PYTHON_GUARD.as_bytes(), 0o444),
        ("node_guard.cjs", NODE_GUARD.as_bytes(), 0o444),
    ]
}

/// What an image offers, probed once per image by the container that fills its guard
/// volume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interpreters {
    /// Absolute path of `python3`, if the image has one.
    pub python: Option<String>,
    /// Absolute path of `node`, and its (major, minor) version.
    pub node: Option<(String, (u32, u32))>,
}

impl Interpreters {
    /// Reads the probe's output: `python3=PATH`, `node=PATH`, `node-version=vX.Y.Z`.
    pub fn parse(text: &str) -> Interpreters {
        let mut found = Interpreters::default();
        let mut node_path = None;
        let mut node_major = None;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("python3", path)) if path.starts_with('/') => {
                    found.python = Some(path.to_string())
                }
                Some(("node", path)) if path.starts_with('/') => node_path = Some(path.to_string()),
                Some(("node-version", version)) => {
                    let mut numbers = version
                        .trim_start_matches('v')
                        .split('.')
                        .map(|n| n.parse::<u32>().ok());
                    node_major = numbers.next().flatten().zip(numbers.next().flatten());
                }
                _ => {}
            }
        }
        found.node = node_path.zip(node_major);
        found
    }
}

/// The shell commands (run as root, in [`layout::ASSETS`]) that store
/// the guard files from stdin, in order, compile the Python bootstrap, then print what
/// [`Interpreters::parse`] reads.
pub fn install_script() -> String {
    let mut script = format!("cd {}", layout::ASSETS);
    for (name, bytes, mode) in files() {
        script.push_str(&format!(
            " && head -c {} > {name} && chmod {mode:o} {name}",
            bytes.len()
        ));
    }
    // Python's bootstrap is imported, so its bytecode is compiled once, here, by root
    // (the sandbox user could not write it, nor change it).
    script.push_str(
        "; if command -v python3 >/dev/null; then \
         python3 -c 'import py_compile; py_compile.compile(\"python_guard.py\", doraise=True)'; fi\
         ; echo python3=$(command -v python3); echo node=$(command -v node); \
         echo node-version=$(node --version 2>/dev/null)",
    );
    script
}

/// The bytes [`install_script`] reads from stdin.
pub fn install_input() -> Vec<u8> {
    files()
        .iter()
        .flat_map(|(_, bytes, _)| bytes.iter().copied())
        .collect()
}

/// What a backend runs once per image to put the assets in place (see
/// [`super::backend::Backend::prepare`]): [`install_script`], then the probe of what
/// the image offers ([`super::environment::PROBE_SCRIPT`]).
pub fn setup() -> AssetSetup {
    AssetSetup {
        script: format!("{}; {}", install_script(), super::environment::PROBE_SCRIPT),
        input: install_input(),
    }
}

/// A command line and the environment variables it needs.
pub type GuardedCommand = (Vec<String>, Vec<(String, String)>);

/// How the interpreter waits: for one program, or for a session's calls; and what it
/// imports before that.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mode {
    pub session: bool,
    pub preload: Vec<String>,
    /// `ask` rules a person approved for the one run this interpreter is for: not
    /// enforced in it.
    pub relaxed: Vec<String>,
    /// The package install step: no rules (the program is the server's own), and the
    /// relay to the egress proxy, whose list for it is the package index.
    pub install: bool,
    /// The engine volume of installed packages the container mounts.
    pub packages: Option<String>,
}

/// The run-time enforcement one language gets under one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// What the policy asks: the rules, and the rules that stand for a whole layer
    /// (`no_processes`: the kernel floor, and for Node the permission model;
    /// `no_codegen`: Node's code-generation switch).
    enforcement: Enforcement,
    /// What the bootstrap collects when the program ends.
    outputs: Collect,
    /// Places besides the scratch folders the program may write: `rw` mounts.
    writable: Vec<String>,
    /// Under a network allowlist: the bootstrap runs the loopback relay ([`RELAY`]).
    relays: bool,
}

/// Where the bootstrap listens, and where it relays to: the egress proxy's socket.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Relay {
    port: u16,
    socket: &'static str,
}

const RELAY: Relay = Relay {
    port: layout::RELAY_PORT,
    socket: layout::EGRESS_SOCKET,
};

impl Guard {
    /// The guard of `language` under the policy `engine` holds.
    pub fn new(engine: &PolicyEngine, language: Language) -> Guard {
        let policy = engine.policy();
        let allowlist = matches!(policy.network, crate::policy::NetworkMode::Allow(_));
        Guard {
            enforcement: Enforcement::new(engine, language),
            outputs: Collect::new(&policy.outputs, &policy.mounts),
            writable: policy
                .mounts
                .iter()
                .filter(|mount| mount.rw)
                .map(|mount| mount.target.clone())
                // Connecting to the proxy's socket is a write to it, for Node.
                .chain(allowlist.then(|| layout::EGRESS_SOCKET.to_string()))
                .collect(),
            relays: allowlist,
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
    pub fn settings(&self, main: &str, mode: &Mode) -> String {
        #[derive(Serialize)]
        struct Settings<'a> {
            marker: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            main: &'a str,
            module_hooks: bool,
            /// The program arrives on stdin.
            wait: bool,
            session: bool,
            preload: &'a [String],
            rules: &'a [EnforcedRule],
            #[serde(skip_serializing_if = "Option::is_none")]
            permission_rule: Option<&'a RuleRef>,
            #[serde(skip_serializing_if = "Option::is_none")]
            codegen_rule: Option<&'a RuleRef>,
            outputs: &'a Collect,
            #[serde(skip_serializing_if = "Option::is_none")]
            relay: Option<&'a Relay>,
        }
        serde_json::to_string(&Settings {
            marker: MARKER,
            main,
            // Started before the code is known, so on whenever the policy refuses code
            // from files: the hooks thread's start is paid before the call.
            module_hooks: self.refuses_code_from_files(),
            wait: true,
            session: mode.session,
            preload: &mode.preload,
            rules: &self.enforcement.rules,
            permission_rule: self.permission(),
            codegen_rule: self.enforcement.no_codegen.as_ref(),
            outputs: &self.outputs,
            // The install step reaches its package index through the relay too.
            relay: (self.relays || mode.install).then_some(&RELAY),
        })
        .expect("guard settings serialize")
    }

    /// The command line of the interpreter that waits in a container for its program
    /// (on stdin) and runs it under this guard, with the environment it needs; or why
    /// the image cannot provide what the policy asks.
    pub fn command(
        &self,
        interpreters: &Interpreters,
        mode: &Mode,
    ) -> Result<GuardedCommand, String> {
        let mut argv = Vec::new();
        let mut env = Vec::new();
        // The helper always wraps the interpreter where it exists: its hardening filter
        // (no io_uring, userfaultfd, bpf, ptrace…) is on whatever the rules say; the
        // floor (no fork, no exec) only under a rule that denies starting processes.
        if !EXEC_GUARD.is_empty() {
            argv.push(layout::asset("exec-guard"));
            if self.kernel_floor().is_some() {
                argv.push("--floor".into());
            }
        } else if let Some(rule) = self.kernel_floor() {
            return Err(format!(
                "the policy's rule `{}` denies starting processes, and this build of \
                 code-sandbox-mcp has no kernel-level guard for this platform (Linux on \
                 x86-64 or aarch64 only), so the code is not run",
                rule.id
            ));
        }
        match self.enforcement.language {
            Language::Python => {
                let python = interpreters
                    .python
                    .clone()
                    .ok_or("the image has no python3 on its PATH")?;
                let main = layout::in_workdir("main.py");
                // Imported rather than run as a script, so that the bytecode the setup
                // compiled is used.
                argv.extend([
                    python,
                    "-u".into(),
                    "-B".into(),
                    "-c".into(),
                    format!(
                        "import sys; sys.path[0] = '{}'; import python_guard",
                        layout::ASSETS
                    ),
                    self.settings(&main, mode),
                    main,
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
                // The guard is the main module: it reads the program, writes the
                // snippet's file and starts it as the main module in its place.
                env.push(("CODE_SANDBOX_GUARD".into(), self.settings("", mode)));
                argv.push(layout::asset("node_guard.cjs"));
            }
        }
        Ok((argv, env))
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

    /// The layers this guard turns on, for the README's table and the logs.
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
        layers
    }
}

/// The line a run-time layer writes (after [`MARKER`]) when it stops a run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct BlockLine {
    rule: String,
    #[serde(default)]
    message: String,
    layer: String,
    #[serde(default)]
    attempted: String,
    #[serde(default)]
    line: Option<u32>,
}

/// Takes the block lines out of `stderr` and turns them into findings of `policy`'s
/// rules. A line naming a rule the policy does not have, or one that does not parse,
/// is left in stderr as the program wrote it.
pub fn take_blocks(stderr: &mut String, policy: &Policy) -> Vec<Finding> {
    if !stderr.contains(MARKER) {
        return Vec::new();
    }
    let mut findings = Vec::new();
    let mut kept = String::with_capacity(stderr.len());
    for line in stderr.split_inclusive('\n') {
        let parsed = line
            .strip_prefix(MARKER)
            .and_then(|json| serde_json::from_str::<BlockLine>(json.trim_end()).ok())
            .and_then(|block| {
                let rule = policy.rules.iter().find(|r| r.id == block.rule)?;
                Some(block_finding(rule, block))
            });
        match parsed {
            Some(finding) => findings.push(finding),
            None => kept.push_str(line),
        }
    }
    *stderr = kept;
    findings
}

fn block_finding(rule: &Rule, block: BlockLine) -> Finding {
    let layer = [
        Layer::PythonAuditHook,
        Layer::NodePermission,
        Layer::NodeCodegen,
    ]
    .into_iter()
    .find(|layer| layer.as_str() == block.layer)
    .unwrap_or(Layer::NodeGuard);
    let message = if block.message.is_empty() {
        rule.message.clone()
    } else {
        block.message
    };
    let attempted: String = block.attempted.chars().take(200).collect();
    let line = block.line.unwrap_or(0);
    Finding {
        rule: rule.id.clone(),
        category: rule.category.clone(),
        action: Action::Deny,
        message: format!("{message} (stopped while running: {attempted})"),
        line,
        column: u32::from(line > 0),
        end_line: line,
        end_column: u32::from(line > 0),
        layer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_turns_on_every_layer() {
        let policy = Policy::preset("default").unwrap();
        let engine = PolicyEngine::new(policy);
        let python = Guard::new(&engine, Language::Python);
        assert_eq!(python.layers(), ["python-audit-hook", "kernel"]);
        assert_eq!(python.kernel_floor().unwrap().id, "process-exec");
        let node = Guard::new(&engine, Language::JavaScript);
        assert_eq!(
            node.layers(),
            ["node-guard", "node-permission", "node-codegen", "kernel"]
        );
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
        assert_eq!(
            argv[..5],
            [
                "/opt/code-sandbox/exec-guard",
                "/usr/bin/python3",
                "-u",
                "-B",
                "-c"
            ]
        );
        assert_eq!(argv.last().unwrap(), "/sandbox/main.py");
        let settings: serde_json::Value = serde_json::from_str(&argv[argv.len() - 2]).unwrap();
        assert_eq!(settings["rules"], serde_json::json!([]));
        assert_eq!(
            (settings["wait"].as_bool(), settings["session"].as_bool()),
            (Some(true), Some(true))
        );
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
    fn block_lines_become_findings_and_leave_stderr() {
        let policy = Policy::preset("default").unwrap();
        let mut stderr = format!(
            "warming up\n{MARKER}{{\"rule\":\"process-exec\",\"layer\":\"python-audit-hook\",\"attempted\":\"os.system 'id'\",\"line\":3}}\n"
        );
        let findings = take_blocks(&mut stderr, &policy);
        assert_eq!(stderr, "warming up\n");
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule, "process-exec");
        assert_eq!(findings[0].layer, Layer::PythonAuditHook);
        assert_eq!(findings[0].line, 3);
        assert!(findings[0].message.contains("os.system 'id'"));
        // A forged line naming no rule of the policy stays as written.
        let mut forged = format!("{MARKER}{{\"rule\":\"nope\",\"layer\":\"x\"}}\n");
        assert!(take_blocks(&mut forged, &policy).is_empty());
        assert!(forged.starts_with(MARKER));
    }

    #[test]
    fn the_probe_output_is_read() {
        let found = Interpreters::parse("python3=/usr/local/bin/python3\nnode=\nnode-version=\n");
        assert_eq!(found.python.as_deref(), Some("/usr/local/bin/python3"));
        assert_eq!(found.node, None);
        assert!(install_script().contains("head -c"));
        assert_eq!(
            install_input().len(),
            files().iter().map(|(_, b, _)| b.len()).sum::<usize>()
        );
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
        assert!(guard
            .enforcement
            .rules
            .iter()
            .any(|rule| rule.id == "process-exec"));
        // ...but not for a run whose code a person approved.
        let relaxed = guard.relaxed(&["process-exec".to_string()]);
        assert!(relaxed.kernel_floor().is_none());
        assert!(!relaxed
            .enforcement
            .rules
            .iter()
            .any(|rule| rule.id == "process-exec"));
        assert!(
            relaxed
                .enforcement
                .rules
                .iter()
                .any(|rule| rule.id == "dynamic-code"),
            "the others stay"
        );
    }
}
