//! Network by name: under `network: { allow: [...] }` a box still has no network at
//! all (loopback only). Its one way out is the backend's egress route (for Docker, a
//! Unix socket mounted into the container), on which this process serves the egress
//! proxy (`proxy`). Inside, the supervisor relays `127.0.0.1:`[`layout::RELAY_PORT`]
//! to the route, and `HTTP_PROXY` / `HTTPS_PROXY` name it: clients that honour them
//! reach the listed hosts; nothing else reaches anything (no interface, so no DNS, no
//! other network, not the host's own services).
//!
//! One proxy per purpose and instance, started on first use and stopped at shutdown.
//! Each connection arrives with the box it came from, so each run gets its own
//! refusals back.
//!
//! [`layout::RELAY_PORT`]: super::layout::RELAY_PORT

mod proxy;

pub use proxy::{Refusal, RefusalLog};

use super::backend::{Backend, EgressPurpose};
use super::SandboxError;
use crate::policy::allowlist::HostRule;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OnceCell;

/// One egress proxy of an instance: started on first use.
pub struct Egress {
    purpose: EgressPurpose,
    log: Arc<RefusalLog>,
    serving: OnceCell<tokio::task::AbortHandle>,
}

impl Egress {
    pub fn new(purpose: EgressPurpose) -> Egress {
        Egress {
            purpose,
            log: Arc::default(),
            serving: OnceCell::new(),
        }
    }

    /// Makes sure the proxy runs, with `allow` as its list, on the backend's route for
    /// this purpose; boxes started with that route reach it from then on.
    pub async fn open(
        &self,
        backend: &dyn Backend,
        allow: &[HostRule],
    ) -> Result<(), SandboxError> {
        self.serving
            .get_or_try_init(|| async {
                let listener = backend.open_egress(self.purpose).await?;
                let task = tokio::spawn(proxy::serve(
                    listener,
                    Arc::new(allow.to_vec()),
                    self.log.clone(),
                ));
                Ok(task.abort_handle())
            })
            .await
            .map(|_| ())
    }

    /// The connections the proxy refused to box `id` since `since` (taken once).
    pub fn refusals(&self, id: &str, since: Instant) -> Vec<Refusal> {
        self.log.take(id, since)
    }

    /// Stops the proxy (the backend removes its route).
    pub fn stop(&self) {
        if let Some(task) = self.serving.get() {
            task.abort();
        }
    }
}
