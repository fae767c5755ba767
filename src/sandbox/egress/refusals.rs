//! What the egress proxy refused, by the box that asked, so that each run gets its own
//! refusals back in its result: connections (`network_refused`) and placeholders of
//! secrets sent where they do not belong (`secret_refused`).
//!
//! Bounded: old entries go first once the log is full, and a refusal repeated by the
//! same box within a moment (a flood of connections over its cap, a retry loop) is
//! recorded once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most entries kept; past it the oldest half goes.
const MOST: usize = 10_000;
/// The same refusal of the same box within this long is recorded once.
const REPEAT: Duration = Duration::from_secs(2);

/// One connection (or request) the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Refusal {
    /// The host as the program named it.
    pub host: String,
    pub port: u16,
    /// Why, in a sentence.
    pub reason: String,
}

/// A request that carried a secret's placeholder toward a host the secret does not
/// list: refused, never forwarded. Names the secret, never its value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SecretRefusal {
    /// The secret's name (the variable the sandbox sees).
    pub secret: String,
    /// Where the request was going.
    pub host: String,
    pub port: u16,
    /// Why, in a sentence.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Network(Refusal),
    Secret(SecretRefusal),
}

/// What the proxy refused, by the box that asked, and when.
#[derive(Debug, Default)]
pub struct RefusalLog {
    entries: Mutex<Vec<(String, Instant, Entry)>>,
}

impl RefusalLog {
    pub fn record(&self, client: &str, refusal: Refusal) {
        tracing::info!(client, host = %refusal.host, port = refusal.port, reason = %refusal.reason, "egress refused");
        self.push(client, Entry::Network(refusal));
    }

    pub fn record_secret(&self, client: &str, refusal: SecretRefusal) {
        tracing::warn!(client, secret = %refusal.secret, host = %refusal.host, port = refusal.port, reason = %refusal.reason, "egress refused a secret's placeholder");
        self.push(client, Entry::Secret(refusal));
    }

    fn push(&self, client: &str, entry: Entry) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let repeated = entries.iter().rev().take(32).any(|(from, at, seen)| {
            from == client && *seen == entry && now.duration_since(*at) < REPEAT
        });
        if repeated {
            return;
        }
        if entries.len() >= MOST {
            entries.drain(..MOST / 2);
        }
        entries.push((client.to_string(), now, entry));
    }

    /// The refused connections of box `client` since `since`, taken out of the log.
    pub fn take(&self, client: &str, since: Instant) -> Vec<Refusal> {
        self.take_where(client, since, |entry| match entry {
            Entry::Network(refusal) => Some(refusal.clone()),
            Entry::Secret(_) => None,
        })
    }

    /// The refused placeholders of box `client` since `since`, taken out of the log.
    pub fn take_secrets(&self, client: &str, since: Instant) -> Vec<SecretRefusal> {
        self.take_where(client, since, |entry| match entry {
            Entry::Secret(refusal) => Some(refusal.clone()),
            Entry::Network(_) => None,
        })
    }

    fn take_where<T>(
        &self,
        client: &str,
        since: Instant,
        pick: impl Fn(&Entry) -> Option<T>,
    ) -> Vec<T> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        entries.retain(|(from, at, entry)| {
            if from != client || *at < since {
                return true;
            }
            match pick(entry) {
                Some(picked) => {
                    taken.push(picked);
                    false
                }
                None => true,
            }
        });
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(host: &str) -> Refusal {
        Refusal {
            host: host.into(),
            port: 443,
            reason: "no".into(),
        }
    }

    #[test]
    fn each_box_takes_its_own_once_and_repeats_count_once() {
        let log = RefusalLog::default();
        let start = Instant::now();
        log.record("a", refusal("x"));
        log.record("a", refusal("x"));
        log.record("a", refusal("y"));
        log.record("b", refusal("x"));
        log.record_secret(
            "a",
            SecretRefusal {
                secret: "KEY".into(),
                host: "z".into(),
                port: 443,
                reason: "not its host".into(),
            },
        );
        let hosts: Vec<String> = log.take("a", start).into_iter().map(|r| r.host).collect();
        assert_eq!(hosts, ["x", "y"]);
        assert!(log.take("a", start).is_empty(), "taken once");
        assert_eq!(log.take_secrets("a", start).len(), 1);
        assert_eq!(log.take("b", start).len(), 1);
    }
}
