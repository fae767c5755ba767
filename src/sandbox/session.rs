//! Named sessions: calls with the same name, from the same client, share one container
//! and one interpreter, so variables, imports and files last from one call to the next.
//! Here are the table of open sessions and how a call runs in one.
//!
//! A session's interpreter runs the guard's session loop (see `protocol`): calls go in over
//! its stdin one after another, and each ends at its end lines. The run-time layers stay
//! on for the whole life of the session, since it is the same guarded process. The
//! static check of a call sees the code of the calls accepted before it (`history`), so
//! a name bound in one call and misused in the next is judged as one program.
//!
//! A session ends when asked to, when it has been idle or alive too long (the policy's
//! `sessions:`), when a call times out, runs out of memory or the program exits, and
//! with its client (the server's shutdown removes every container).

use super::assets::Mode;
use super::backend::BoxIo;
use super::core::Core;
use super::protocol::Program;
use super::{RunRequest, SandboxError, SessionCall};
use crate::analysis::Language;
use crate::policy::SessionSettings;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One session: its interpreter (started by its first call) and what it has run.
pub struct Session {
    pub language: Language,
    opened: Instant,
    last_used: Mutex<Instant>,
    calls: AtomicU64,
    /// The code of every call sent to the interpreter, in order.
    history: Mutex<String>,
    /// How the program may name the modules handed in with earlier calls (checked
    /// then), so that a later call loading one is no finding.
    modules: Mutex<Vec<String>>,
    /// Held by the call running now: calls of one session run one at a time.
    pub interpreter: Arc<tokio::sync::Mutex<Option<BoxIo>>>,
    /// The interpreter's container, known without waiting for a running call.
    container: Mutex<Option<String>>,
    ended: AtomicBool,
}

impl Session {
    fn new(language: Language) -> Session {
        Session {
            language,
            opened: Instant::now(),
            last_used: Mutex::new(Instant::now()),
            calls: AtomicU64::new(0),
            history: Mutex::new(String::new()),
            modules: Mutex::new(Vec::new()),
            interpreter: Arc::new(tokio::sync::Mutex::new(None)),
            container: Mutex::new(None),
            ended: AtomicBool::new(false),
        }
    }

    pub fn set_container(&self, id: Option<String>) {
        *self.container.lock().unwrap_or_else(|e| e.into_inner()) = id;
    }

    pub fn container(&self) -> Option<String> {
        self.container
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The number of the next call (from 1), recording its code as part of the session.
    pub fn record_call(&self, code: &str) -> u64 {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        history.push_str(code);
        if !history.ends_with('\n') {
            history.push('\n');
        }
        self.calls.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Remembers the modules a call handed in (their specifiers).
    pub fn record_modules(&self, specifiers: Vec<String>) {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        for specifier in specifiers {
            if !modules.contains(&specifier) {
                modules.push(specifier);
            }
        }
    }

    /// The modules handed in with earlier calls (their specifiers).
    pub fn modules(&self) -> Vec<String> {
        self.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    pub fn history(&self) -> String {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

/// Why a session could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("sessions are turned off by this policy (`sessions: {{allowed: false}}`); run the code without `session`")]
    NotAllowed,
    #[error("{0} sessions are open already, the most this policy allows (`sessions.max`); end one with `end_session`, or run without `session`")]
    TooMany(usize),
    #[error("the session `{name}` runs {language}; use another session name for {wanted}")]
    OtherLanguage {
        name: String,
        language: Language,
        wanted: Language,
    },
    #[error("`{0}` is not a session name: use 1 to 64 letters, digits, `-`, `_` or `.`")]
    BadName(String),
}

/// The sessions of every client of one sandbox, by (client, name).
#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<(String, String), Arc<Session>>>,
    /// The task that ends idle and expired sessions runs once the first one opens.
    reaping: AtomicBool,
}

impl Sessions {
    /// The session `name` of `owner`, opened now if it is not open.
    pub fn get_or_open(
        &self,
        settings: &SessionSettings,
        owner: &str,
        name: &str,
        language: Language,
    ) -> Result<Arc<Session>, SessionError> {
        if !settings.allowed {
            return Err(SessionError::NotAllowed);
        }
        let valid = (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !valid {
            return Err(SessionError::BadName(name.chars().take(80).collect()));
        }
        let mut open = self.lock();
        let key = (owner.to_string(), name.to_string());
        if let Some(session) = open.get(&key) {
            if session.language != language {
                return Err(SessionError::OtherLanguage {
                    name: name.to_string(),
                    language: session.language,
                    wanted: language,
                });
            }
            return Ok(session.clone());
        }
        let owned = open.keys().filter(|(o, _)| o == owner).count();
        if owned >= settings.max {
            return Err(SessionError::TooMany(owned));
        }
        let session = Arc::new(Session::new(language));
        open.insert(key, session.clone());
        Ok(session)
    }

    /// The open session `name` of `owner`, if any.
    pub fn get(&self, owner: &str, name: &str) -> Option<Arc<Session>> {
        self.lock()
            .get(&(owner.to_string(), name.to_string()))
            .cloned()
    }

    /// Takes `session` out of the table (if it is still the one under its name) and marks
    /// it ended; the caller removes its container.
    pub fn close(&self, owner: &str, name: &str, session: &Arc<Session>) {
        session.ended.store(true, Ordering::SeqCst);
        let mut open = self.lock();
        let key = (owner.to_string(), name.to_string());
        if open.get(&key).is_some_and(|s| Arc::ptr_eq(s, session)) {
            open.remove(&key);
        }
    }

    /// Sessions past their idle time or lifetime and not running a call now, taken out
    /// of the table and marked ended; the caller removes their containers.
    pub fn expired(&self, settings: &SessionSettings) -> Vec<(String, Arc<Session>)> {
        let mut open = self.lock();
        let due: Vec<(String, String)> = open
            .iter()
            .filter(|(_, session)| {
                let idle = session
                    .last_used
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .elapsed();
                let busy = session.interpreter.try_lock().is_err();
                !busy
                    && (idle >= settings.idle_timeout.0
                        || session.opened.elapsed() >= settings.max_lifetime.0)
            })
            .map(|(key, _)| key.clone())
            .collect();
        due.into_iter()
            .filter_map(|key| {
                let session = open.remove(&key)?;
                session.ended.store(true, Ordering::SeqCst);
                Some((key.1, session))
            })
            .collect()
    }

    /// Every session, taken out of the table (at shutdown).
    pub fn drain(&self) -> Vec<Arc<Session>> {
        let mut open = self.lock();
        open.drain()
            .map(|(_, session)| {
                session.ended.store(true, Ordering::SeqCst);
                session
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Session>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The variable that tells a JavaScript session's guard how long this call may wait
/// for the work it started to settle; the guard takes it out of the environment.
const SETTLE_VARIABLE: &str = "CODE_SANDBOX_SETTLE";

/// How long before the call's time limit its wait ends: room for the result's way back.
const SETTLE_MARGIN: Duration = Duration::from_millis(250);

/// `<settle ms>/<deadline>`: the guard waits at most the policy's `sessions.settle`,
/// and not past the deadline (milliseconds since the Unix epoch: the box shares the
/// host's clock), which stops short of the call's own timeout, counted from now, as
/// the server counts it. Reaching the timeout would end the session.
fn settle_value(settle: Duration, timeout: Duration) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let deadline = now + timeout.saturating_sub(SETTLE_MARGIN);
    format!("{}/{}", settle.as_millis(), deadline.as_millis())
}

/// How a session's calls run, and how sessions end.
impl Sessions {
    /// Runs one call in the session `name` of `owner` (opening it, and starting its
    /// interpreter, on its first call). Calls of one session run one at a time, in
    /// order.
    pub async fn call(
        self: &Arc<Self>,
        core: &Arc<Core>,
        owner: &str,
        name: &str,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<SessionCall, SandboxError> {
        let language = request.language();
        let (permit, timeout) = core.admit(&request, &cancel).await?;
        // A session that ends while this call waits for it (idle, or asked to) is
        // replaced by a new one of the same name.
        let (session, mut slot) = loop {
            let session = self.get_or_open(&core.policy.sessions, owner, name, language)?;
            self.start_reaper(core);
            let slot = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
                slot = session.interpreter.clone().lock_owned() => slot,
            };
            if !session.has_ended() {
                break (session, slot);
            }
        };
        if slot.is_none() {
            let mode = Mode {
                session: true,
                ..Mode::default()
            };
            match core
                .start_cancellable(language, mode, &cancel, &permit)
                .await
            {
                Ok(io) => {
                    session.set_container(Some(io.id.clone()));
                    *slot = Some(io);
                }
                Err(error) => {
                    self.close(owner, name, &session);
                    return Err(error);
                }
            }
        }
        let call = session.record_call(&request.code);
        session.record_modules(super::modules_in::specifiers(language, &request.files));
        let (code, awaits) = match language {
            Language::Python => (request.code.clone(), false),
            Language::JavaScript => crate::analysis::javascript::session_script(&request.code),
        };
        let mut env = super::modules_in::with_digests(&request.env, language, &request.files);
        if language == Language::JavaScript {
            env.retain(|(name, _)| name != SETTLE_VARIABLE);
            env.push((
                SETTLE_VARIABLE.to_string(),
                settle_value(core.policy.sessions.settle.0, timeout),
            ));
        }
        let program = Program {
            file: "",
            code: code.into_bytes(),
            env,
            tap: request.tap.clone(),
            call: Some((call, awaits)),
            files: request.files.clone(),
        };
        let io = slot.as_mut().expect("the session's interpreter");
        let id = io.id.clone();
        let since = std::time::Instant::now();
        let result = core.send(io, &program, timeout, &cancel).await;
        session.touch();
        let ended = result.as_ref().map_or(true, |executed| executed.ended);
        // Read while the container is still there: the OOM evidence is in its cgroup.
        let outcome = core.outcome(language, &id, since, result).await;
        if ended {
            *slot = None;
            self.end(core, owner, name, &session).await;
        }
        drop(slot);
        let outcome = outcome?;
        let ended = ended.then(|| {
            if outcome.timed_out {
                "the call reached its time limit, so the session was ended".to_string()
            } else if outcome.oom_killed {
                "the program ran out of memory, so the session was ended".to_string()
            } else if outcome.killed_outside {
                format!("{}, which ends the session", super::call::KILLED_OUTSIDE)
            } else {
                format!(
                    "the program exited (exit code {}), which ends the session",
                    outcome.exit_code
                )
            }
        });
        Ok(SessionCall {
            outcome,
            call,
            ended,
        })
    }

    /// The code of the calls the session has run, in order (`None`: no such session).
    pub fn history(&self, owner: &str, name: &str) -> Option<String> {
        self.get(owner, name).map(|session| session.history())
    }

    /// The modules handed in with a session's earlier calls, if it exists.
    pub fn modules(&self, owner: &str, name: &str) -> Option<Vec<String>> {
        self.get(owner, name).map(|session| session.modules())
    }

    /// Ends the session and removes its box; false when there was none.
    pub async fn end_session(&self, core: &Core, owner: &str, name: &str) -> bool {
        let Some(session) = self.get(owner, name) else {
            return false;
        };
        self.end(core, owner, name, &session).await;
        true
    }

    /// Takes the session out of the table and removes its container (a call running in
    /// it ends as its interpreter goes).
    async fn end(&self, core: &Core, owner: &str, name: &str, session: &Arc<Session>) {
        self.close(owner, name, session);
        if let Some(id) = session.container() {
            session.set_container(None);
            core.discard(&id).await;
        }
    }

    /// Starts, once, the task that ends sessions idle or alive for too long.
    fn start_reaper(self: &Arc<Self>, core: &Arc<Core>) {
        if self.reaping.swap(true, Ordering::SeqCst) {
            return;
        }
        let settings = &core.policy.sessions;
        let tick = (settings.idle_timeout.0.min(settings.max_lifetime.0) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        let sessions = Arc::downgrade(self);
        let core = Arc::downgrade(core);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(tick).await;
                let (Some(core), Some(sessions)) = (core.upgrade(), sessions.upgrade()) else {
                    return;
                };
                if core.closing.is_cancelled() {
                    return;
                }
                for (name, session) in sessions.expired(&core.policy.sessions) {
                    tracing::debug!(session = %name, "session idle or too old: ending it");
                    if let Some(id) = session.container() {
                        session.set_container(None);
                        core.discard(&id).await;
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::HumanDuration;
    use std::time::Duration;

    fn settings(max: usize) -> SessionSettings {
        SessionSettings {
            allowed: true,
            max,
            idle_timeout: HumanDuration(Duration::from_secs(60)),
            max_lifetime: HumanDuration(Duration::from_secs(600)),
            settle: HumanDuration(Duration::from_secs(1)),
        }
    }

    #[test]
    fn sessions_are_per_client_capped_and_keep_their_language() {
        let sessions = Sessions::default();
        let s = settings(2);
        let a = sessions
            .get_or_open(&s, "client-1", "a", Language::Python)
            .unwrap();
        let again = sessions
            .get_or_open(&s, "client-1", "a", Language::Python)
            .unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        // Another client's `a` is its own.
        let other = sessions
            .get_or_open(&s, "client-2", "a", Language::Python)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &other));
        assert!(matches!(
            sessions.get_or_open(&s, "client-1", "a", Language::JavaScript),
            Err(SessionError::OtherLanguage { .. })
        ));
        sessions
            .get_or_open(&s, "client-1", "b", Language::JavaScript)
            .unwrap();
        assert_eq!(
            sessions
                .get_or_open(&s, "client-1", "c", Language::Python)
                .err(),
            Some(SessionError::TooMany(2))
        );
        sessions.close("client-1", "b", &sessions.get("client-1", "b").unwrap());
        sessions
            .get_or_open(&s, "client-1", "c", Language::Python)
            .unwrap();
        assert!(matches!(
            sessions.get_or_open(&s, "client-1", "no spaces", Language::Python),
            Err(SessionError::BadName(_))
        ));
        let off = SessionSettings {
            allowed: false,
            ..settings(2)
        };
        assert_eq!(
            sessions
                .get_or_open(&off, "client-1", "a", Language::Python)
                .err(),
            Some(SessionError::NotAllowed)
        );
    }

    #[test]
    fn calls_are_numbered_and_their_code_kept() {
        let session = Session::new(Language::Python);
        assert_eq!(session.record_call("import os as q"), 1);
        assert_eq!(session.record_call("q.getcwd()\n"), 2);
        assert_eq!(session.history(), "import os as q\nq.getcwd()\n");
    }

    #[test]
    fn idle_sessions_expire_and_busy_ones_wait() {
        let sessions = Sessions::default();
        let quick = SessionSettings {
            idle_timeout: HumanDuration(Duration::ZERO),
            ..settings(4)
        };
        let idle = sessions
            .get_or_open(&quick, "c", "idle", Language::Python)
            .unwrap();
        let busy = sessions
            .get_or_open(&quick, "c", "busy", Language::Python)
            .unwrap();
        let _running = busy.interpreter.try_lock().unwrap();
        let expired = sessions.expired(&quick);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].0, "idle");
        assert!(idle.has_ended());
        assert!(!busy.has_ended());
        assert!(sessions.get("c", "busy").is_some());
    }
}
