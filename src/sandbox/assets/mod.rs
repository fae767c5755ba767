//! The box's own assets: what runs inside a box besides the program, whatever the
//! backend. Put at [`layout::ASSETS`] once per image (by the backend's
//! [`setup`](super::backend::Backend::prepare)), read-only in every box:
//!
//! - the supervisor (the `sandbox-supervisor` crate, src/supervisor): the box's main
//!   process, outside the program's reach, which starts the interpreter under the
//!   kernel's layers (seccomp: no process under a policy that denies them; Landlock:
//!   writes only to the sandbox's folders, nothing under /proc) and alone talks to the
//!   server (`guard` writes its command line);
//! - `python_guard.py`: Python's bootstrap (isolated start-up, the program channel,
//!   figures, sessions), and `python_hook.py`, the audit hook it installs first, which
//!   explains early (rule and line) what the policy denies;
//! - `node_guard.cjs`: Node's bootstrap and guard, beside Node's permission model and
//!   `--disallow-code-generation-from-strings`, and `node_hooks.mjs`, the ES module
//!   hooks it registers (string sources, written files, denied built-ins by `import`).
//!
//! What the layers report becomes findings in [`findings`].

pub mod findings;
mod guard;
pub mod layers;

pub use guard::{Guard, GuardedCommand, Mode};

use super::backend::AssetSetup;
use super::layout;

/// The supervisor, built by `build.rs` beside this file; empty where the target has
/// none.
const SUPERVISOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sandbox-supervisor"));
const PYTHON_GUARD: &str = include_str!("python_guard.py");
const PYTHON_HOOK: &str = include_str!("python_hook.py");
const NODE_GUARD: &str = include_str!("node_guard.cjs");
const NODE_HOOKS: &str = include_str!("node_hooks.mjs");

/// The supervisor's file name in [`layout::ASSETS`].
pub const SUPERVISOR_FILE: &str = "supervisor";

/// The files installed into every box, by name under [`layout::ASSETS`], with
/// their modes.
pub fn files() -> [(&'static str, &'static [u8], u32); 5] {
    [
        (SUPERVISOR_FILE, SUPERVISOR, 0o555),
        ("python_guard.py", PYTHON_GUARD.as_bytes(), 0o444),
        ("python_hook.py", PYTHON_HOOK.as_bytes(), 0o444),
        ("node_guard.cjs", NODE_GUARD.as_bytes(), 0o444),
        ("node_hooks.mjs", NODE_HOOKS.as_bytes(), 0o444),
    ]
}

/// Whether this build has a supervisor (Linux on x86-64 or aarch64).
pub fn has_supervisor() -> bool {
    !SUPERVISOR.is_empty()
}

/// What an image offers, probed once per image by the setup that puts its assets in
/// place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interpreters {
    /// Absolute path of `python3`, if the image has one.
    pub python: Option<String>,
    /// Absolute path of `node`, and its (major, minor) version.
    pub node: Option<(String, (u32, u32))>,
    /// The Landlock ABI of the kernel the box runs on (0: none), and whether it has
    /// seccomp user notification, as the supervisor probed them.
    pub landlock_abi: u32,
    pub seccomp_notify: bool,
}

impl Interpreters {
    /// Reads the probe's output: `python3=PATH`, `node=PATH`, `node-version=vX.Y.Z`,
    /// `landlock-abi=N`, `seccomp-notify=yes|no`.
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
                Some(("landlock-abi", abi)) => found.landlock_abi = abi.trim().parse().unwrap_or(0),
                Some(("seccomp-notify", yes)) => found.seccomp_notify = yes.trim() == "yes",
                _ => {}
            }
        }
        found.node = node_path.zip(node_major);
        found
    }
}

/// The shell commands (run as root, in [`layout::ASSETS`]) that store the assets from
/// stdin, in order, compile the Python bootstrap, then print what
/// [`Interpreters::parse`] reads.
pub fn install_script() -> String {
    let mut script = format!("cd {}", layout::ASSETS);
    for (name, bytes, mode) in files() {
        script.push_str(&format!(
            " && head -c {} > {name} && chmod {mode:o} {name}",
            bytes.len()
        ));
    }
    // Python's bootstrap and hook are imported, so their bytecode is compiled once,
    // here, by root (the sandbox user could not write it, nor change it).
    script.push_str(&format!(
        "; if command -v python3 >/dev/null; then \
         python3 -c 'import py_compile; [py_compile.compile(f, doraise=True) for f in (\"python_guard.py\", \"python_hook.py\")]'; fi\
         ; echo python3=$(command -v python3); echo node=$(command -v node); \
         echo node-version=$(node --version 2>/dev/null); ./{SUPERVISOR_FILE} --probe 2>/dev/null || true"
    ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_output_is_read() {
        let found = Interpreters::parse(
            "python3=/usr/local/bin/python3\nnode=\nnode-version=\nlandlock-abi=7\nseccomp-notify=yes\n",
        );
        assert_eq!(found.python.as_deref(), Some("/usr/local/bin/python3"));
        assert_eq!(found.node, None);
        assert_eq!((found.landlock_abi, found.seccomp_notify), (7, true));
        assert!(install_script().contains("head -c"));
        assert!(install_script().contains("--probe"));
        assert_eq!(
            install_input().len(),
            files().iter().map(|(_, b, _)| b.len()).sum::<usize>()
        );
    }
}
