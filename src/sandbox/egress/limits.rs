//! Caps on what one box can hold of the server through its egress proxy, so that one
//! box cannot starve the server: at most [`PER_BOX`] connections open per box (each
//! costs the server two descriptors: the box's and the upstream's), and at most as
//! many in all as the process's descriptor limit leaves room for. A connection over a
//! cap is answered at once (503) and closed.
//!
//! The server raises its own descriptor limit to the hard limit at start
//! ([`raise_descriptor_limit`]): the default soft limit (1,024 on most systems) is
//! what a single box used up before these caps existed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Connections one box may have open through the proxy at once.
pub const PER_BOX: usize = 128;
/// Descriptors kept for the rest of the server (engine connections, files, stdio).
const RESERVED_DESCRIPTORS: u64 = 256;

/// Open connections, per box and in all.
#[derive(Debug)]
pub struct Caps {
    per_box: usize,
    total: usize,
    open: Mutex<(HashMap<String, usize>, usize)>,
}

/// One admitted connection; its count goes when this is dropped.
#[derive(Debug)]
pub struct Slot {
    caps: Arc<Caps>,
    client: String,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Over {
    Box(usize),
    Total(usize),
}

impl Caps {
    /// Caps of `per_box` per box and `total` in all.
    pub fn new(per_box: usize, total: usize) -> Arc<Caps> {
        Arc::new(Caps {
            per_box: per_box.max(1),
            total: total.max(1),
            open: Mutex::new((HashMap::new(), 0)),
        })
    }

    /// Caps for this process: [`PER_BOX`], and in all as many connections as the
    /// descriptor limit has room for at two descriptors each.
    pub fn for_this_process() -> Arc<Caps> {
        let limit = descriptor_limit().0;
        let total = usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS) / 2)
            .unwrap_or(usize::MAX)
            .max(16);
        Caps::new(PER_BOX.min(total), total)
    }

    /// A slot for a connection of box `client`, unless a cap is reached.
    pub fn admit(self: &Arc<Self>, client: &str) -> Result<Slot, Over> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.1 >= self.total {
            return Err(Over::Total(self.total));
        }
        let count = open.0.entry(client.to_string()).or_insert(0);
        if *count >= self.per_box {
            return Err(Over::Box(self.per_box));
        }
        *count += 1;
        open.1 += 1;
        Ok(Slot {
            caps: self.clone(),
            client: client.to_string(),
        })
    }

    /// Connections open now: of box `client`, and in all.
    pub fn open(&self, client: &str) -> (usize, usize) {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        (open.0.get(client).copied().unwrap_or(0), open.1)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.caps.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.0.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.0.remove(&self.client);
            }
        }
        open.1 -= 1;
    }
}

impl Over {
    /// The sentence a refused connection gets.
    pub fn reason(&self) -> String {
        match self {
            Over::Box(cap) => format!(
                "this sandbox has {cap} connections open through the egress proxy, its most; \
                 close some before opening more"
            ),
            Over::Total(cap) => format!(
                "the egress proxy has {cap} connections open, its most for this server; try \
                 again later"
            ),
        }
    }
}

/// The descriptor limit of this process: (soft, hard).
pub fn descriptor_limit() -> (u64, u64) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (
        limit.current.unwrap_or(u64::MAX),
        limit.maximum.unwrap_or(u64::MAX),
    )
}

/// Raises this process's soft descriptor limit to its hard limit; returns the limit
/// before and after (equal when it could not be raised, which is logged).
pub fn raise_descriptor_limit() -> (u64, u64) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let before = getrlimit(Resource::Nofile);
    if before.current == before.maximum {
        let same = before.current.unwrap_or(u64::MAX);
        return (same, same);
    }
    let raised = Rlimit {
        current: before.maximum,
        maximum: before.maximum,
    };
    if let Err(error) = setrlimit(Resource::Nofile, raised) {
        tracing::warn!(%error, "could not raise the descriptor limit");
    }
    (before.current.unwrap_or(u64::MAX), descriptor_limit().0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_box_has_its_cap_and_all_share_one() {
        let caps = Caps::new(2, 3);
        let a1 = caps.admit("a").unwrap();
        let _a2 = caps.admit("a").unwrap();
        assert_eq!(caps.admit("a").unwrap_err(), Over::Box(2));
        let _b1 = caps.admit("b").unwrap();
        assert_eq!(caps.admit("c").unwrap_err(), Over::Total(3));
        drop(a1);
        assert_eq!(caps.open("a"), (1, 2));
        assert!(caps.admit("a").is_ok());
    }

    #[test]
    fn the_limit_is_read() {
        let (soft, hard) = descriptor_limit();
        assert!(soft <= hard && soft > 0);
    }
}
