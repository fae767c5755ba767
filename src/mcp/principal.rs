//! Who is calling, and what it may still start: the principal of a call (a
//! token's name or a JWT's subject over HTTP; nobody in particular over stdio), its
//! limits on concurrent runs and on open sessions, and the sessions each of its
//! connections opened, so that they end when the connection does.
//!
//! Over stdio there is one client and nothing to share, so a [`Allowance`] there admits
//! everything. Over HTTP several connections of one principal share one
//! [`PrincipalLimits`] entry: a principal that opens ten connections still has its one
//! allowance, and one principal's runs never wait behind another's beyond the
//! sandbox's own pool. The sandbox keeps its sessions by owner (one connection); this
//! layer counts them per principal and knows which connection opened which, without
//! reaching into the sandbox: a session is open while a call of it is in flight or the
//! sandbox still has its history.

use crate::sandbox::Sandbox;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How a principal proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// A line of the token file.
    Token,
    /// A JWT from the OAuth issuer.
    OAuth,
    /// Nothing: a loopback server started without authentication.
    Loopback,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Token => "token",
            Via::OAuth => "oauth",
            Via::Loopback => "none",
        }
    }
}

/// The one a call is made for. Two principals are the same only when both the name
/// and the way it was proven agree: a token named `alice` and a JWT whose subject is
/// `alice` share nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub name: Arc<str>,
    pub via: Via,
}

impl Principal {
    pub fn new(name: &str, via: Via) -> Principal {
        Principal {
            name: name.into(),
            via,
        }
    }
}

/// Runs a principal may have going or waiting, per run it may have going.
pub const ADMITTED_PER_RUN: usize = 4;

/// The limits every principal gets, and the state of each principal now.
pub struct PrincipalLimits {
    max_runs: usize,
    max_sessions: usize,
    /// Held weakly: a principal's entry lives while one of its connections does.
    states: Mutex<HashMap<Principal, Weak<PrincipalState>>>,
}

impl PrincipalLimits {
    /// At most `max_runs` runs at once and `max_sessions` open sessions per principal.
    pub fn new(max_runs: usize, max_sessions: usize) -> Arc<PrincipalLimits> {
        Arc::new(PrincipalLimits {
            max_runs: max_runs.max(1),
            max_sessions,
            states: Mutex::new(HashMap::new()),
        })
    }

    /// The allowance of one connection of `principal`.
    pub fn allowance(self: &Arc<Self>, principal: Principal) -> Allowance {
        let mut states = lock(&self.states);
        states.retain(|_, state| state.strong_count() > 0);
        let state = match states.get(&principal).and_then(Weak::upgrade) {
            Some(state) => state,
            None => {
                let state = Arc::new(PrincipalState {
                    runs: Arc::new(Semaphore::new(self.max_runs)),
                    admitted: Arc::new(Semaphore::new(self.max_runs * ADMITTED_PER_RUN)),
                    max_admitted: self.max_runs * ADMITTED_PER_RUN,
                    max_sessions: self.max_sessions,
                    sessions: Mutex::new(HashMap::new()),
                });
                states.insert(principal.clone(), Arc::downgrade(&state));
                state
            }
        };
        Allowance {
            principal: Some(principal),
            state: Some(state),
        }
    }
}

/// One principal's runs and sessions, shared by its connections.
struct PrincipalState {
    runs: Arc<Semaphore>,
    /// Runs going or waiting: a principal cannot pile up waiting calls without end
    /// (each holds an HTTP connection of the server's).
    admitted: Arc<Semaphore>,
    max_admitted: usize,
    max_sessions: usize,
    /// (owner, session name) of every session this principal has or is opening.
    sessions: Mutex<HashMap<(String, String), SessionEntry>>,
}

struct SessionEntry {
    /// Calls of the session in flight now.
    in_flight: usize,
    /// The sandbox that holds it (a principal's connections may hold different ones
    /// when its policy changed in between).
    sandbox: Sandbox,
}

impl SessionEntry {
    fn is_open(&self, owner: &str, name: &str) -> bool {
        self.in_flight > 0 || self.sandbox.session_history(owner, name).is_some()
    }
}

/// The calling side of one connection: its principal, and what it may still start.
pub struct Allowance {
    principal: Option<Principal>,
    state: Option<Arc<PrincipalState>>,
}

/// Why a call was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The principal has as many sessions open as it may.
    Sessions(String),
    /// The principal has as many runs going and waiting as it may.
    Busy(String),
    /// The call was cancelled while it waited for one of its principal's run slots.
    Cancelled,
}

impl Allowance {
    /// The one client of a stdio server: no principal, no limits of its own.
    pub fn local() -> Allowance {
        Allowance {
            principal: None,
            state: None,
        }
    }

    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// Admits one run of `owner` (in the session `session`, if any): refuses a new
    /// session past the principal's allowance, then waits for one of its run slots
    /// (or for `cancel`). What it returns holds both until dropped.
    pub async fn admit(
        &self,
        owner: &str,
        session: Option<&str>,
        sandbox: &Sandbox,
        cancel: &CancellationToken,
    ) -> Result<Admission, Refusal> {
        let Some(state) = &self.state else {
            return Ok(Admission::default());
        };
        let Ok(admitted) = state.admitted.clone().try_acquire_owned() else {
            return Err(Refusal::Busy(format!(
                "{} runs of this principal are going or waiting already, the most this server \
                 allows one principal ({ADMITTED_PER_RUN} × `--principal-runs`); wait for some \
                 to finish",
                state.max_admitted
            )));
        };
        let slot = match session {
            Some(name) => Some(SessionSlot::claim(state, owner, name, sandbox)?),
            None => None,
        };
        let permit = tokio::select! {
            permit = state.runs.clone().acquire_owned() => permit.ok(),
            _ = cancel.cancelled() => return Err(Refusal::Cancelled),
        };
        Ok(Admission {
            _admitted: Some(admitted),
            _run: permit,
            _session: slot,
        })
    }

    /// `owner`'s session `name` has ended (by `end_session`).
    pub fn session_ended(&self, owner: &str, name: &str) {
        if let Some(state) = &self.state {
            let mut sessions = lock(&state.sessions);
            let key = (owner.to_string(), name.to_string());
            if sessions.get(&key).is_some_and(|entry| entry.in_flight == 0) {
                sessions.remove(&key);
            }
        }
    }

    /// The names of the sessions `owner` has open or is opening.
    pub fn sessions_of(&self, owner: &str) -> Vec<String> {
        let Some(state) = &self.state else {
            return Vec::new();
        };
        lock(&state.sessions)
            .keys()
            .filter(|(o, _)| o == owner)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// Waits (up to `limit`) until no call of a session of `owner` is in flight.
    pub async fn session_calls_finished(&self, owner: &str, limit: Duration) {
        let Some(state) = &self.state else {
            return;
        };
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let busy = lock(&state.sessions)
                .iter()
                .any(|((o, _), entry)| o == owner && entry.in_flight > 0);
            if !busy || tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What an admitted call holds while it runs.
#[derive(Default)]
pub struct Admission {
    _admitted: Option<OwnedSemaphorePermit>,
    _run: Option<OwnedSemaphorePermit>,
    _session: Option<SessionSlot>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("session", &self._session.as_ref().map(|slot| &slot.key))
            .finish()
    }
}

/// One call's claim on a session of its principal.
struct SessionSlot {
    state: Arc<PrincipalState>,
    key: (String, String),
}

impl SessionSlot {
    fn claim(
        state: &Arc<PrincipalState>,
        owner: &str,
        name: &str,
        sandbox: &Sandbox,
    ) -> Result<SessionSlot, Refusal> {
        let key = (owner.to_string(), name.to_string());
        let mut sessions = lock(&state.sessions);
        if let Some(entry) = sessions.get_mut(&key) {
            entry.in_flight += 1;
        } else {
            // Sessions the sandbox ended on its own (idle, too old) no longer count.
            sessions.retain(|(o, n), entry| entry.is_open(o, n));
            if sessions.len() >= state.max_sessions {
                return Err(Refusal::Sessions(format!(
                    "{} sessions of this principal are open already, the most this server \
                     allows one principal (`--principal-sessions`); end one with \
                     `end_session`, or run without `session`",
                    sessions.len()
                )));
            }
            sessions.insert(
                key.clone(),
                SessionEntry {
                    in_flight: 1,
                    sandbox: sandbox.clone(),
                },
            );
        }
        Ok(SessionSlot {
            state: state.clone(),
            key,
        })
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut sessions = lock(&self.state.sessions);
        let (owner, name) = &self.key;
        if let Some(entry) = sessions.get_mut(&self.key) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            if !entry.is_open(owner, name) {
                sessions.remove(&self.key);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn sandbox() -> Sandbox {
        Sandbox::new(Arc::new(Policy::preset("default").unwrap()))
    }

    #[tokio::test]
    async fn a_principal_shares_its_allowance_across_connections() {
        let limits = PrincipalLimits::new(1, 2);
        let alice = Principal::new("alice", Via::Token);
        let first = limits.allowance(alice.clone());
        let second = limits.allowance(alice);
        let cancel = CancellationToken::new();
        let sandbox = sandbox();
        let running = first.admit("c1", None, &sandbox, &cancel).await.unwrap();
        // The second connection's run waits for the first one's slot.
        let waiting = second.admit("c2", None, &sandbox, &cancel);
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut waiting)
                .await
                .is_err()
        );
        drop(running);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test]
    async fn a_principal_cannot_pile_up_waiting_runs() {
        let limits = PrincipalLimits::new(1, 2);
        let alice = limits.allowance(Principal::new("alice", Via::Token));
        let cancel = CancellationToken::new();
        let sandbox = sandbox();
        let running = alice.admit("a", None, &sandbox, &cancel).await.unwrap();
        let mut waiting = Vec::new();
        for _ in 1..ADMITTED_PER_RUN {
            let (alice, sandbox, cancel) = (&alice, sandbox.clone(), cancel.clone());
            waiting.push(Box::pin(async move {
                alice.admit("a", None, &sandbox, &cancel).await
            }));
        }
        for wait in &mut waiting {
            // Each is admitted to wait (and waits).
            assert!(tokio::time::timeout(Duration::from_millis(20), wait)
                .await
                .is_err());
        }
        let refused = alice.admit("a", None, &sandbox, &cancel).await;
        assert!(matches!(refused, Err(Refusal::Busy(_))), "{refused:?}");
        drop(running);
        drop(waiting);
        assert!(alice.admit("a", None, &sandbox, &cancel).await.is_ok());
    }

    #[tokio::test]
    async fn principals_do_not_wait_for_each_other_and_a_wait_can_be_cancelled() {
        let limits = PrincipalLimits::new(1, 2);
        let alice = limits.allowance(Principal::new("alice", Via::Token));
        let bob = limits.allowance(Principal::new("alice", Via::OAuth));
        let cancel = CancellationToken::new();
        let sandbox = sandbox();
        let _running = alice.admit("a", None, &sandbox, &cancel).await.unwrap();
        // Same name, other proof: another principal, with a slot of its own.
        let _other = tokio::time::timeout(
            Duration::from_secs(5),
            bob.admit("b", None, &sandbox, &cancel),
        )
        .await
        .expect("bob does not wait for alice")
        .unwrap();
        let stop = CancellationToken::new();
        stop.cancel();
        assert_eq!(
            alice.admit("a", None, &sandbox, &stop).await.err(),
            Some(Refusal::Cancelled)
        );
    }

    #[tokio::test]
    async fn sessions_are_counted_per_principal_and_known_per_connection() {
        let limits = PrincipalLimits::new(4, 2);
        let alice = Principal::new("alice", Via::Token);
        let first = limits.allowance(alice.clone());
        let second = limits.allowance(alice);
        let cancel = CancellationToken::new();
        let sandbox = sandbox();
        let one = first
            .admit("c1", Some("s"), &sandbox, &cancel)
            .await
            .unwrap();
        let two = second
            .admit("c2", Some("s"), &sandbox, &cancel)
            .await
            .unwrap();
        let refused = second.admit("c2", Some("t"), &sandbox, &cancel).await;
        assert!(matches!(refused, Err(Refusal::Sessions(_))), "{refused:?}");
        // A second call of an open session is not a new session.
        let again = first.admit("c1", Some("s"), &sandbox, &cancel).await;
        assert!(again.is_ok());
        assert_eq!(first.sessions_of("c1"), vec!["s".to_string()]);
        assert_eq!(first.sessions_of("c2"), vec!["s".to_string()]);
        // No sandbox holds these sessions, so once their calls end they are gone.
        drop((one, two, again));
        assert!(first.sessions_of("c1").is_empty());
        assert!(second
            .admit("c2", Some("t"), &sandbox, &cancel)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn over_stdio_everything_is_admitted() {
        let caller = Allowance::local();
        let cancel = CancellationToken::new();
        let sandbox = sandbox();
        let mut held = Vec::new();
        for n in 0..20 {
            held.push(
                caller
                    .admit("stdio", Some(&format!("s{n}")), &sandbox, &cancel)
                    .await
                    .unwrap(),
            );
        }
        assert!(caller.principal().is_none());
        assert!(caller.sessions_of("stdio").is_empty());
    }
}
