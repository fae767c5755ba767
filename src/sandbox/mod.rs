//! The sandbox: allowed code in, a [`RunOutcome`] out.
//!
//! CONTRACT (the MCP server and the `run` command are written against it):
//! - `Sandbox::new` does no I/O and cannot fail; the engine is reached lazily, so a
//!   daemon that is down at start is an error on the first `run`, and a later `run`
//!   tries again.
//! - `warm_up` fills the warm pool (best effort, logs only) and returns once it is full;
//!   a caller that must not wait spawns it.
//! - `run` takes one fresh box (its interpreter already waiting under the guard), runs
//!   the code, removes the box, and returns the outcome; `cancel` kills the run and
//!   removes its box.
//! - `run_in_session` runs the code in a named session's box instead, which stays (see
//!   `session`) until the session ends.
//! - `shutdown` removes every box this instance created.
//!
//! Below the contract, an engine-agnostic core over a [`backend::Backend`] (Docker
//! today), split by concern: `submit` (the one check → ask → run path), `run`
//! (stateless runs) and `session` (named sessions) on top of `core` (admission,
//! starting boxes, sending programs, shutdown); `pool` (warm interpreters), `install`
//! (what a package install step is), `package_sets` (their last use, and pruning),
//! `protocol` (the program's bytes in, its records out) and `call` (one program sent
//! and collected), `capture` (the capped output), `files_in` (files handed in),
//! `modules_in` (those of them that are modules of the program),
//! `files_out` (files and figures back), `egress` (the allowlist proxy), `environment`
//! (what an image offers), `environment_cache` (that, kept on disk per image id),
//! `pass_through` (host variables), `layout` (every path and port inside a box),
//! `images` (the project's image definitions) and `assets` (what runs inside the box
//! besides the program: the guards and the kernel floor).

pub mod assets;
pub mod backend;
mod call;
mod capture;
mod core;
pub mod egress;
pub mod environment;
pub mod environment_cache;
mod export_writer;
pub mod files_in;
pub mod files_out;
pub mod images;
pub mod install;
pub mod layout;
pub mod modules_in;
pub mod package_sets;
mod pass_through;
mod pool;
mod protocol;
mod run;
mod session;
mod submit;

pub use assets::{Guard, Mode};
pub use backend::docker::LABEL;
pub use call::MAX_REPORTS;
pub use capture::Stream;
pub use pass_through::pass_through;
pub use session::SessionError;
pub use submit::{
    check_after, Answer, Approval, ApprovalRequest, Caller, NotRun, Ran, SessionName, Submission,
    Submitted,
};

use crate::analysis::{Language, SourceKind};
use crate::policy::Policy;
use backend::Backend;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One snippet to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The language, and how its interpreter must load the code (from the check).
    pub kind: SourceKind,
    pub code: String,
    /// Wall-clock limit from [`run_timeout`]; `None` is the policy's `limits.timeout`,
    /// which also caps any value given here.
    pub timeout: Option<Duration>,
    /// Variables set in the sandbox (already filtered by the caller).
    pub env: Vec<(String, String)>,
    /// Where output goes as it arrives, besides the outcome (progress notifications,
    /// a terminal). Best effort: a chunk the receiver has no room for is skipped there.
    pub tap: Option<OutputTap>,
    /// Files written under `/sandbox` before the code starts (checked with
    /// [`files_in::check`] by the caller).
    pub files: Vec<files_in::InputFile>,
    /// `ask` rules a person approved for this one run (this exact code): its container
    /// is started without them (not a warm one). In a session the session's
    /// interpreter, started before, still enforces them.
    pub approved: Vec<String>,
    /// Package specs to have installed for this run (resolved against the policy's
    /// `packages:` by the caller); the run gets a container of its own with them.
    pub packages: Vec<String>,
}

/// Chunks of output as the program writes them.
pub type OutputTap = tokio::sync::mpsc::Sender<(Stream, Vec<u8>)>;

impl RunRequest {
    pub fn language(&self) -> Language {
        self.kind.language()
    }
}

/// The wall-clock limit of one run: the caller's wish in seconds, capped by the
/// policy's `limit`. An unusable wish is refused rather than silently replaced, so the
/// caller (a model, or a person at the command line) learns what the argument means.
pub fn run_timeout(wanted_seconds: Option<f64>, limit: Duration) -> Result<Duration, String> {
    match wanted_seconds {
        None => Ok(limit),
        Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
            Ok(Duration::try_from_secs_f64(seconds)
                .unwrap_or(limit)
                .min(limit))
        }
        Some(seconds) => Err(format!(
            "timeout must be a positive number of seconds (at most {}), not {seconds}",
            limit.as_secs_f64()
        )),
    }
}

/// What happened when the snippet ran. Never lossy: both streams, always.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RunOutcome {
    /// The process's exit code (137 when killed by the OOM killer or a timeout).
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
    /// The wall-clock limit was reached and the run was killed.
    pub timed_out: bool,
    /// The memory limit was reached and the kernel killed the process.
    pub oom_killed: bool,
    /// The container was removed or killed by something other than the sandbox (another
    /// program on the machine): the run ended without the sandbox's word on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub killed_outside: bool,
    /// Output went past `limits.output` and was cut (a marker says where).
    pub truncated: bool,
    /// A run-time layer stopped the program: what it tried, under which rule.
    pub blocked: Vec<crate::policy::Finding>,
    pub duration_ms: u64,
    /// Files the program created or changed under /sandbox, and the figures it drew;
    /// those over a cap of the policy's `outputs:` are listed without their content.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<files_out::OutputFile>,
    /// More files than could be listed: how many more.
    #[serde(skip_serializing_if = "is_zero")]
    pub files_unlisted: u64,
    /// Connections the egress proxy refused (under a network allowlist).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_refused: Vec<egress::Refusal>,
    /// Requests the egress proxy refused because they carried a secret's placeholder
    /// where the secret does not go (which secret, which host; never a value).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_refused: Vec<egress::SecretRefusal>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a run could not happen at all (as opposed to a run that failed).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    #[error("{0}")]
    EngineUnreachable(String),
    #[error("{0}")]
    ImageUnavailable(String),
    #[error("container engine error: {0}")]
    Engine(String),
    /// Installing a run's packages failed: the installer's own words. The same call
    /// fails the same way until its cause (the index, the package, the version, the
    /// platform) changes.
    #[error("{0}")]
    InstallFailed(String),
    #[error("the run was cancelled")]
    Cancelled,
    /// The policy needs a run-time layer this image or build cannot provide; nothing
    /// ran (never a silent fallback to less enforcement).
    #[error("{0}")]
    LayerUnavailable(String),
    /// The server is stopping: no run starts any more, and calling again will not help.
    #[error("the sandbox is shutting down")]
    ShuttingDown,
    /// The session cannot take this call (nothing ran).
    #[error("{0}")]
    Session(#[from] SessionError),
}

/// One call of a session: what it did, its number in the session, and, when the
/// session is over because of it, why.
#[derive(Debug, Clone)]
pub struct SessionCall {
    pub outcome: RunOutcome,
    pub call: u64,
    pub ended: Option<String>,
}

/// The sandbox of one policy: a backend (the engine) and a warm pool per image.
/// Clones share everything (one `Arc`), so handing a clone to each task is cheap.
#[derive(Clone)]
pub struct Sandbox {
    core: Arc<core::Core>,
    sessions: Arc<session::Sessions>,
}

impl Sandbox {
    /// A sandbox on the engine the policy names (`engine:`). No I/O here: the engine
    /// is contacted on the first `warm_up` or `run`.
    pub fn new(policy: Arc<Policy>) -> Sandbox {
        let backend = backend::for_engine(policy.engine);
        Sandbox::with_backend(policy, backend)
    }

    /// A sandbox on `backend`.
    pub fn with_backend(policy: Arc<Policy>, backend: Arc<dyn Backend>) -> Sandbox {
        Sandbox {
            core: Arc::new(core::Core::new(policy, backend)),
            sessions: Arc::default(),
        }
    }

    pub fn policy(&self) -> &Policy {
        self.core.policy()
    }

    /// The policy compiled for checking code.
    pub fn engine(&self) -> &crate::policy::PolicyEngine {
        self.core.engine()
    }

    /// The value of the [`LABEL`] label on this instance's boxes:
    /// `docker ps -a --filter label=code-sandbox-mcp=<this>` lists exactly them.
    pub fn instance_id(&self) -> &str {
        self.core.instance_id()
    }

    /// Connects, makes the policy's images available (pulling a missing one) and fills
    /// the warm pool, returning once it is full. Failures are logged, not returned: the
    /// next `run` reports them.
    pub async fn warm_up(&self) {
        self.core.warm_up().await
    }

    /// What `language`'s image offers: its name, interpreter and packages. Connects,
    /// chooses and pulls the image and probes it the first time; kept afterwards.
    pub async fn environment(
        &self,
        language: Language,
    ) -> Result<environment::Environment, SandboxError> {
        self.core.environment(language).await
    }

    /// What `language`'s image offers if it is known now (probed by this instance, or
    /// kept on disk for the image's id): never waits for a container or a pull.
    pub async fn environment_known(&self, language: Language) -> Option<environment::Environment> {
        self.core.environment_known(language).await
    }

    /// Ready containers waiting for `language` right now.
    pub fn warm_containers(&self, language: Language) -> usize {
        self.core.warm_containers(language)
    }

    /// Runs one snippet in a fresh container and removes the container afterwards.
    /// Waits its turn when `pool.max_concurrent` runs are already going. When `cancel`
    /// fires, the run is killed and `Err(Cancelled)` returns promptly.
    pub async fn run(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        run::run(&self.core, request, cancel).await
    }

    /// Runs one call in the session `name` of the client `owner`, opening the session
    /// (and starting its interpreter) on its first call. Calls of one session run one
    /// at a time, in order.
    pub async fn run_in_session(
        &self,
        owner: &str,
        name: &str,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<SessionCall, SandboxError> {
        self.sessions
            .call(&self.core, owner, name, request, cancel)
            .await
    }

    /// The code of the calls the session has run, in order (`None`: no such session).
    pub fn session_history(&self, owner: &str, name: &str) -> Option<String> {
        self.sessions.history(owner, name)
    }

    /// How the program may name the modules handed in with a session's earlier calls.
    pub fn session_modules(&self, owner: &str, name: &str) -> Vec<String> {
        self.sessions.modules(owner, name).unwrap_or_default()
    }

    /// Ends the session and removes its container; false when there was none.
    pub async fn end_session(&self, owner: &str, name: &str) -> bool {
        self.sessions.end_session(&self.core, owner, name).await
    }

    /// Removes the containers and volumes of code-sandbox-mcp processes that are gone
    /// (each instance also does it when it first connects); returns how many of each.
    pub async fn cleanup(&self) -> Result<(usize, usize), SandboxError> {
        self.core.cleanup().await
    }

    /// Removes the package sets unused for longer than `unused_for` (see
    /// [`package_sets`]); a set a box still uses stays.
    pub async fn prune_packages(
        &self,
        unused_for: Duration,
    ) -> Result<package_sets::Pruned, SandboxError> {
        package_sets::prune(self.core.backend.as_ref(), unused_for).await
    }

    /// Removes every container this instance created (warm, running or being created)
    /// and refuses further runs. Safe to call more than once.
    pub async fn shutdown(&self) {
        drop(self.sessions.drain());
        self.core.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_caps_the_timeout() {
        let limit = Duration::from_secs(30);
        assert_eq!(run_timeout(None, limit), Ok(limit));
        assert_eq!(
            run_timeout(Some(2.5), limit),
            Ok(Duration::from_millis(2500))
        );
        assert_eq!(run_timeout(Some(999.0), limit), Ok(limit));
        assert!(run_timeout(Some(0.0), limit).is_err());
        assert!(run_timeout(Some(-1.0), limit).is_err());
        assert!(run_timeout(Some(f64::NAN), limit).is_err());
    }
}
