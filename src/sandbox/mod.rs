//! The container runtime: allowed code in, a [`RunOutcome`] out.
//!
//! CONTRACT (the MCP server and the `run` command are written against it; the
//! runtime work fills in the bodies and may add modules below this one):
//! - `Sandbox::new` does no I/O and cannot fail; the engine is reached lazily, so a
//!   daemon that is down at start is an error on the first `run`, and a later `run`
//!   tries again.
//! - `warm_up` starts filling the warm pool in the background (best effort, logs only).
//! - `run` takes one fresh container, runs the code, removes the container, and returns
//!   the outcome; `cancel` kills the run and removes its container.
//! - `shutdown` removes every container this instance created.

use crate::analysis::Language;
use crate::policy::Policy;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One snippet to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub language: Language,
    pub code: String,
    /// Wanted wall-clock limit; the policy's `limits.timeout` caps it.
    pub timeout: Option<Duration>,
    /// Variables set in the sandbox (already filtered by the caller).
    pub env: Vec<(String, String)>,
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
    /// Output went past `limits.output` and was cut (a marker says where).
    pub truncated: bool,
    pub duration_ms: u64,
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
    #[error("the run was cancelled")]
    Cancelled,
}

/// The runtime for one policy: a connection to the engine and a warm pool per image.
#[derive(Clone)]
pub struct Sandbox {
    policy: Arc<Policy>,
}

impl Sandbox {
    pub fn new(policy: Arc<Policy>) -> Sandbox {
        Sandbox { policy }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub async fn warm_up(&self) {
        unimplemented!("container runtime not built yet")
    }

    pub async fn run(&self, _request: RunRequest, _cancel: CancellationToken) -> Result<RunOutcome, SandboxError> {
        unimplemented!("container runtime not built yet")
    }

    pub async fn shutdown(&self) {
        unimplemented!("container runtime not built yet")
    }
}
