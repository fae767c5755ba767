//! Who owns a container: every `Sandbox` is an instance with its own id, and every
//! container it creates carries that id plus the owning process's pid, start time and
//! host name in its labels. That is what lets `shutdown` find all of its own containers,
//! and lets a later process remove the ones a crashed (SIGKILLed, OOM-killed, …)
//! process could not.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The label every sandbox container and volume carries; its value is the owning
/// instance's id.
pub const LABEL: &str = "code-sandbox-mcp";
/// The owning process's pid, to find containers left behind by a process that died.
pub const LABEL_PID: &str = "code-sandbox-mcp.pid";
/// The owning process's start time (clock ticks since boot), so a reused pid is not
/// mistaken for the owner still being alive.
pub const LABEL_PID_START: &str = "code-sandbox-mcp.pid-start";
/// The owning process's PID namespace (`pid:[inode]`): a pid only names the owner when
/// read in the same namespace, so two containers of one host (same host name, same
/// daemon socket) cannot mistake each other's live owner for a dead one.
pub const LABEL_PIDNS: &str = "code-sandbox-mcp.pidns";
/// The owning process's host name: pids only mean something on the same host.
pub const LABEL_HOST: &str = "code-sandbox-mcp.host";
/// The label a package set's volume carries (its full key). Such a volume belongs to
/// no instance: it outlives the server that installed it.
pub const LABEL_PACKAGES: &str = "code-sandbox-mcp.packages";

/// A container whose owner cannot be judged from here (another host or PID namespace,
/// no pid label) is left alone until it is this old: no run, nor any session, lives
/// that long, so by then it is surely abandoned.
pub const UNJUDGEABLE_AGE: Duration = Duration::from_secs(24 * 3600);

/// The identity stamped on the containers of one `Sandbox`.
#[derive(Debug, Clone)]
pub struct Instance {
    pub id: String,
    pid: u32,
    pid_start: Option<u64>,
    host: String,
    pid_namespace: Option<String>,
}

impl Instance {
    /// A new identity for this process: unique across processes (pid, time) and within
    /// one (a counter), without a random number crate.
    pub fn new() -> Instance {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        Instance {
            id: format!("{pid:x}-{nanos:x}-{count}"),
            pid,
            pid_start: process_start_time(pid),
            host: host_name(),
            pid_namespace: pid_namespace(),
        }
    }

    #[cfg(test)]
    pub fn for_tests(id: &str) -> Instance {
        Instance {
            id: id.to_string(),
            pid: 1,
            pid_start: None,
            host: "test".into(),
            pid_namespace: None,
        }
    }

    pub fn labels(&self) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (LABEL.to_string(), self.id.clone()),
            (LABEL_PID.to_string(), self.pid.to_string()),
            (LABEL_HOST.to_string(), self.host.clone()),
        ]);
        if let Some(start) = self.pid_start {
            labels.insert(LABEL_PID_START.to_string(), start.to_string());
        }
        if let Some(namespace) = &self.pid_namespace {
            labels.insert(LABEL_PIDNS.to_string(), namespace.clone());
        }
        labels
    }

    /// True when the labels say the container belongs to a process of this host and PID
    /// namespace that no longer exists. Anything that cannot be judged (another host or
    /// namespace, no pid, no /proc) is kept until it is [`UNJUDGEABLE_AGE`] old:
    /// removing a live instance's container would break its run.
    pub fn owner_is_gone(&self, labels: &HashMap<String, String>, age: Option<Duration>) -> bool {
        if labels.get(LABEL).is_some_and(|id| *id == self.id) {
            return false;
        }
        let pid = labels.get(LABEL_PID).and_then(|p| p.parse::<u32>().ok());
        let judgeable = labels.get(LABEL_HOST) == Some(&self.host)
            && self.pid_namespace.is_some()
            && labels.get(LABEL_PIDNS) == self.pid_namespace.as_ref()
            && std::path::Path::new("/proc/self/stat").exists();
        let Some(pid) = pid.filter(|_| judgeable) else {
            return age.is_some_and(|age| age > UNJUDGEABLE_AGE);
        };
        match process_start_time(pid) {
            None => true,
            Some(start) => labels
                .get(LABEL_PID_START)
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|recorded| recorded != start),
        }
    }
}

/// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
/// `None` when there is no such process (or no /proc).
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: skip past it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// This process's PID namespace, as the kernel names it (`pid:[4026531836]`).
fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|link| link.to_string_lossy().into_owned())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_differ_within_one_process() {
        assert_ne!(Instance::new().id, Instance::new().id);
    }

    #[test]
    fn this_process_is_alive_and_a_dead_pid_is_not() {
        let me = Instance::new();
        let other = Instance::new();
        // A sibling instance of the same, living process: never stale.
        assert!(!me.owner_is_gone(&other.labels(), None));
        // Our own containers: never stale.
        assert!(!me.owner_is_gone(&me.labels(), None));
        if std::path::Path::new("/proc/self/stat").exists() {
            let mut dead = other.labels();
            // pid_max is at most 2^22 on Linux.
            dead.insert(LABEL_PID.into(), "4194304".into());
            assert!(me.owner_is_gone(&dead, None));
            // Same pid, different start time: the pid was reused by another process.
            let mut reused = other.labels();
            reused.insert(LABEL_PID_START.into(), "1".into());
            assert!(me.owner_is_gone(&reused, None));
        }
    }

    #[test]
    fn other_hosts_and_unlabelled_pids_are_left_alone() {
        let me = Instance::new();
        let mut labels = Instance::new().labels();
        labels.insert(LABEL_PID.into(), "4194304".into());
        labels.insert(LABEL_HOST.into(), "some-other-host".into());
        assert!(!me.owner_is_gone(&labels, None));
        let mut labels = Instance::new().labels();
        labels.remove(LABEL_PID);
        assert!(!me.owner_is_gone(&labels, None));
    }

    #[test]
    fn another_pid_namespace_is_left_alone_until_the_age_limit() {
        let me = Instance::new();
        if me.pid_namespace.is_none() {
            return;
        }
        // A live instance in another container on this host: same host name, same
        // daemon, and its pid means nothing here.
        let mut labels = Instance::new().labels();
        labels.insert(LABEL_PID.into(), "4194304".into());
        labels.insert(LABEL_PIDNS.into(), "pid:[1]".into());
        assert!(!me.owner_is_gone(&labels, None));
        assert!(!me.owner_is_gone(&labels, Some(Duration::from_secs(3600))));
        assert!(me.owner_is_gone(&labels, Some(UNJUDGEABLE_AGE + Duration::from_secs(1))));
        // Labels from before namespaces were recorded cannot be judged either.
        labels.remove(LABEL_PIDNS);
        assert!(!me.owner_is_gone(&labels, Some(Duration::from_secs(60))));
    }
}
