//! Where each of a policy's rules is kept: *enforced* by something the program cannot
//! switch off (the kernel, the container, the egress proxy, the box's supervisor), or
//! only *checked* (the static check before the run, and the run-time hooks inside the
//! interpreter, which explain early with a rule and a line but run in the program's own
//! process). `policy layers` prints this, and docs/security.md describes the layers.

use crate::analysis::Language;
use crate::policy::enforcement::Enforcement;
use crate::policy::{Action, NetworkMode, PolicyEngine};
use serde::Serialize;

/// How one rule is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleLayers {
    pub rule: String,
    pub action: Action,
    /// Kept by something outside the program's reach.
    pub enforced: bool,
    /// What keeps it, most decisive first.
    pub layers: Vec<&'static str>,
}

/// How each rule of `engine`'s policy is kept, in the policy's order.
pub fn rule_layers(engine: &PolicyEngine) -> Vec<RuleLayers> {
    let policy = engine.policy();
    let per_language: Vec<Enforcement> = Language::ALL
        .into_iter()
        .map(|language| Enforcement::new(engine, language))
        .collect();
    let is = |pick: fn(&Enforcement) -> Option<&str>, id: &str| {
        per_language.iter().any(|e| pick(e) == Some(id))
    };
    policy
        .rules
        .iter()
        .map(|rule| {
            let id = rule.id.as_str();
            let mut layers = Vec::new();
            let blocks = rule.action.blocks();
            let processes = is(|e| e.no_processes.as_ref().map(|r| r.id.as_str()), id);
            let filesystem = is(|e| e.filesystem.as_ref().map(|(r, _)| r.id.as_str()), id);
            let network = rule.category == "network";
            if processes {
                layers.push("kernel: seccomp, no new process or program, each attempt reported");
            }
            if filesystem {
                layers.push(
                    "kernel: Landlock, reading and writing only in the folders the rule allows",
                );
            }
            if network {
                layers.push(match policy.network {
                    NetworkMode::None => "container: no network interface",
                    NetworkMode::Bridge => {
                        "container: the engine's network (the rule only explains)"
                    }
                    NetworkMode::Allow(_) => "egress proxy: only the hosts network.allow lists",
                });
            }
            let enforced = (processes || filesystem)
                || (network && !matches!(policy.network, NetworkMode::Bridge));
            if blocks {
                layers.push("static check");
                layers.push("run-time hooks in the interpreter (explain)");
            } else if rule.action == Action::Warn {
                layers.push("static check (warns)");
            }
            RuleLayers {
                rule: rule.id.clone(),
                action: rule.action,
                enforced,
                layers,
            }
        })
        .collect()
}

/// What every box holds whatever the rules say.
pub const ALWAYS: &[&str] = &[
    "container: limits (memory, CPU, processes, time, output), read-only root, no capabilities, an unprivileged user",
    "kernel: Landlock writes only to /sandbox, /tmp, /dev/shm and rw mounts, nothing under /proc (where any rule is enforced)",
    "kernel: seccomp refuses ptrace, io_uring, bpf, userfaultfd, another process's memory, and any signal to the supervisor",
    "supervisor: the run's output, end, files and the kernel's refusals reach the server from it alone",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn processes_are_enforced_and_code_from_strings_is_checked() {
        let engine = PolicyEngine::new(Policy::preset("default").unwrap());
        let layers = rule_layers(&engine);
        let find = |id: &str| layers.iter().find(|l| l.rule == id).unwrap();
        assert!(find("process-exec").enforced);
        assert!(find("process-exec").layers[0].starts_with("kernel: seccomp"));
        assert!(!find("dynamic-code").enforced);
        // Without an interface the network rule is kept by the container.
        assert!(find("network").enforced);
        // The filesystem rule warns by default; strict's is kept by Landlock.
        assert!(!find("filesystem-outside-sandbox").enforced);
        let strict = PolicyEngine::new(Policy::preset("strict").unwrap());
        let strict = rule_layers(&strict);
        let filesystem = strict
            .iter()
            .find(|l| l.rule == "filesystem-outside-sandbox")
            .unwrap();
        assert!(filesystem.enforced, "{filesystem:?}");
    }
}
