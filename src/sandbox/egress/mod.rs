//! Network by name: under `network: { allow: [...] }` a box still has no network at
//! all (loopback only). Its one way out is the backend's egress route (for Docker, a
//! Unix socket mounted into the container), on which this process serves the egress
//! proxy (`proxy`). Inside, the supervisor relays `127.0.0.1:`[`layout::RELAY_PORT`] to the
//! route, and `HTTP_PROXY` / `HTTPS_PROXY` name it: clients that honour them reach the
//! listed hosts; nothing else reaches anything (no interface, so no DNS, no other
//! network, not the host's own services).
//!
//! The proxy, by concern: reading requests strictly (`head`, `incoming`) and
//! relaying them one by one (`relay`); judging the address it connects to
//! (`address`, `dial`); what a tunnel may carry (`tunnel`); per-box caps
//! (`limits`); what it refused, per box (`refusals`); the policy's secrets, as
//! placeholders swapped at the proxy (`secrets`), inside TLS it ends with a CA of
//! this instance (`authority`, `intercept`); its own TLS to real hosts
//! (`upstream_tls`).
//!
//! One proxy per purpose and instance, started on first use and stopped at shutdown.
//! Each connection arrives with the box it came from, so each run gets its own
//! refusals back.
//!
//! [`layout::RELAY_PORT`]: super::layout::RELAY_PORT

mod address;
mod authority;
mod dial;
mod head;
mod incoming;
mod intercept;
pub mod limits;
mod proxy;
mod refusals;
mod relay;
mod secrets;
mod tunnel;
mod upstream_tls;

pub use refusals::{Refusal, RefusalLog, SecretRefusal};
pub use secrets::Ticket;

use super::backend::{Backend, EgressPurpose};
use super::SandboxError;
use crate::policy::allowlist::HostRule;
use crate::policy::secrets::Secret;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// How often the engine's networks are asked for again.
const NETWORKS_REFRESH: Duration = Duration::from_secs(60);

/// One egress proxy of an instance: started on first use.
pub struct Egress {
    purpose: EgressPurpose,
    /// The policy's secrets (runs only).
    declared: Vec<Secret>,
    /// The policy's CA bundle (`certificates:`), PEM: trusted by the proxy's own TLS
    /// and handed to boxes whose TLS it terminates, with the system's roots.
    trusted: String,
    log: Arc<RefusalLog>,
    serving: OnceCell<Serving>,
}

/// The certificates of `pem` alone, each as PEM (anything else in the file is left out).
fn extra_pem(pem: &str) -> String {
    upstream_tls::certificates_from_pem(pem)
        .iter()
        .map(|der| upstream_tls::pem_certificate(der))
        .collect()
}

/// A proxy that runs.
struct Serving {
    tasks: Vec<tokio::task::AbortHandle>,
    secrets: Option<Arc<secrets::Secrets>>,
}

impl Egress {
    /// A proxy without secrets.
    pub fn new(purpose: EgressPurpose) -> Egress {
        Egress::with_secrets(purpose, &[])
    }

    /// A proxy that swaps the placeholders of `secrets` (whose hosts join the list).
    pub fn with_secrets(purpose: EgressPurpose, secrets: &[Secret]) -> Egress {
        Egress {
            purpose,
            declared: secrets.to_vec(),
            trusted: String::new(),
            log: Arc::default(),
            serving: OnceCell::new(),
        }
    }

    /// This proxy, trusting the certificates of `pem` too (the policy's bundle).
    pub fn trusting(self, pem: Option<&str>) -> Egress {
        Egress {
            trusted: pem.unwrap_or_default().to_string(),
            ..self
        }
    }

    /// Makes sure the proxy runs, with `allow` as its list, on the backend's route for
    /// this purpose; boxes started with that route reach it from then on.
    pub async fn open(
        &self,
        backend: &Arc<dyn Backend>,
        allow: &[HostRule],
    ) -> Result<(), SandboxError> {
        self.serving
            .get_or_try_init(|| self.start(backend, allow))
            .await
            .map(|_| ())
    }

    async fn start(
        &self,
        backend: &Arc<dyn Backend>,
        allow: &[HostRule],
    ) -> Result<Serving, SandboxError> {
        let secret_hosts: Vec<HostRule> = self
            .declared
            .iter()
            .flat_map(|secret| secret.hosts.iter().cloned())
            .collect();
        let listener = backend.open_egress(self.purpose).await?;
        let (secrets, interceptor) = if self.declared.is_empty() {
            (None, None)
        } else {
            let secrets =
                secrets::Secrets::new(&self.declared).map_err(SandboxError::LayerUnavailable)?;
            let authority = authority::Authority::new(backend.instance_id(), &secret_hosts)
                .map_err(SandboxError::LayerUnavailable)?;
            let trust = format!(
                "{}{}{}",
                upstream_tls::Roots::get().pem(),
                extra_pem(&self.trusted),
                authority.certificate_pem()
            );
            backend.publish_egress_trust(self.purpose, &trust).await?;
            (
                Some(Arc::new(secrets)),
                Some(Arc::new(intercept::Interceptor::new(authority))),
            )
        };
        let surroundings = Arc::new(address::Surroundings::default());
        surroundings.set_engine_networks(backend.engine_networks().await);
        let refresh = tokio::spawn({
            let (backend, surroundings) = (backend.clone(), surroundings.clone());
            async move {
                loop {
                    tokio::time::sleep(NETWORKS_REFRESH).await;
                    surroundings.set_engine_networks(backend.engine_networks().await);
                }
            }
        });
        let proxy = proxy::Proxy {
            allow: allow.iter().cloned().chain(secret_hosts).collect(),
            surroundings,
            log: self.log.clone(),
            caps: limits::Caps::for_this_process(),
            secrets: secrets.clone(),
            interceptor,
            upstream_tls: upstream_tls::UpstreamTls::system_and(
                upstream_tls::certificates_from_pem(&self.trusted),
            ),
            resolve: None,
        };
        let serve = tokio::spawn(proxy::serve(listener, Arc::new(proxy)));
        Ok(Serving {
            tasks: vec![serve.abort_handle(), refresh.abort_handle()],
            secrets,
        })
    }

    /// What a box of this proxy gets in its environment besides the proxy variables:
    /// under secrets, a new placeholder for each and the trust of the proxy's CA; and
    /// the ticket that keeps the placeholders valid (see [`Egress::bind`]).
    pub fn box_env(&self) -> (Vec<(String, String)>, Option<Ticket>) {
        match self
            .serving
            .get()
            .and_then(|serving| serving.secrets.as_ref())
        {
            Some(secrets) => {
                let (mut env, ticket) = secrets.issue();
                env.extend(super::layout::trust_env());
                (env, Some(ticket))
            }
            None => (Vec::new(), None),
        }
    }

    /// The placeholders of `ticket` are box `id`'s until it is [`Egress::forget`]-ten.
    pub fn bind(&self, ticket: Ticket, id: &str) {
        if let Some(secrets) = self.serving.get().and_then(|s| s.secrets.as_ref()) {
            secrets.bind(ticket, id);
        }
    }

    /// Box `id` is gone: its placeholders mean nothing any more.
    pub fn forget(&self, id: &str) {
        if let Some(secrets) = self.serving.get().and_then(|s| s.secrets.as_ref()) {
            secrets.forget(id);
        }
    }

    /// The connections the proxy refused to box `id` since `since` (taken once).
    pub fn refusals(&self, id: &str, since: Instant) -> Vec<Refusal> {
        self.log.take(id, since)
    }

    /// The placeholders the proxy refused to box `id` since `since` (taken once).
    pub fn secret_refusals(&self, id: &str, since: Instant) -> Vec<SecretRefusal> {
        self.log.take_secrets(id, since)
    }

    /// Stops the proxy (the backend removes its route).
    pub fn stop(&self) {
        if let Some(serving) = self.serving.get() {
            for task in &serving.tasks {
                task.abort();
            }
        }
    }
}
