//! Network by name: under `network: { allow: [...] }` the sandbox's containers are on an
//! engine network of this instance's with no route out (an `internal` bridge), where
//! the only thing they can reach is the egress proxy this process serves on that
//! network's gateway address (`proxy`). `HTTP_PROXY` and `HTTPS_PROXY` name it. DNS
//! does not resolve on such a network, so nothing in the sandbox can find an address
//! by itself; the proxy resolves the names it allows.
//!
//! The network and the proxy are made on first use and removed at shutdown; a network
//! left by a process that is gone is removed by the next instance's sweep.

mod proxy;

pub use proxy::{Refusal, RefusalLog};

use super::container::{engine_error, short, LABEL};
use super::instance::Instance;
use super::SandboxError;
use crate::policy::allowlist::HostRule;
use bollard::models::NetworkCreateRequest;
use bollard::Docker;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OnceCell;

/// How a sandbox container reaches the allowed hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The engine network the container joins.
    pub network: String,
    /// `http://GATEWAY:PORT`, for the proxy variables.
    pub proxy_url: String,
}

impl Route {
    /// The variables that point HTTP clients at the proxy (both spellings: curl and
    /// Python read the lower-case ones, many others the upper-case).
    pub fn env(&self) -> Vec<(String, String)> {
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
            .into_iter()
            .map(|name| (name.to_string(), self.proxy_url.clone()))
            .collect()
    }
}

/// The egress of one instance: its network and its proxy, made on first use.
#[derive(Default)]
pub struct Egress {
    log: Arc<RefusalLog>,
    made: OnceCell<(Route, tokio::task::AbortHandle)>,
}

impl Egress {
    /// The route, making the network and starting the proxy the first time.
    pub async fn route(
        &self,
        docker: &Docker,
        instance: &Instance,
        allow: &[HostRule],
    ) -> Result<Route, SandboxError> {
        self.made
            .get_or_try_init(|| async {
                let name = format!("code-sandbox-mcp-egress-{}", instance.id);
                let request = NetworkCreateRequest {
                    name: name.clone(),
                    driver: Some("bridge".into()),
                    internal: Some(true),
                    labels: Some(instance.labels()),
                    ..Default::default()
                };
                docker
                    .create_network(request)
                    .await
                    .map_err(|error| engine_error("creating the egress network".into(), error))?;
                let gateway = match gateway(docker, &name).await {
                    Ok(gateway) => gateway,
                    Err(error) => {
                        remove_network(docker, &name).await;
                        return Err(error);
                    }
                };
                let listener =
                    tokio::net::TcpListener::bind((gateway, 0))
                        .await
                        .map_err(|error| {
                            SandboxError::Engine(format!(
                                "cannot listen on the egress network's gateway {gateway}: {error}"
                            ))
                        })?;
                let address = listener.local_addr().map_err(|e| {
                    SandboxError::Engine(format!("the egress proxy's address: {e}"))
                })?;
                let task = tokio::spawn(proxy::serve(
                    listener,
                    Arc::new(allow.to_vec()),
                    self.log.clone(),
                ));
                tracing::info!(network = %name, proxy = %address, "egress proxy ready");
                Ok((
                    Route {
                        network: name,
                        proxy_url: format!("http://{address}"),
                    },
                    task.abort_handle(),
                ))
            })
            .await
            .map(|(route, _)| route.clone())
    }

    /// The connections the proxy refused to `client` since `since` (taken once).
    pub fn refusals(&self, client: IpAddr, since: Instant) -> Vec<Refusal> {
        self.log.take(client, since)
    }

    /// Stops the proxy and removes the network (its containers must be gone first).
    pub async fn remove(&self, docker: &Docker) {
        if let Some((route, task)) = self.made.get() {
            task.abort();
            remove_network(docker, &route.network).await;
        }
    }
}

/// The gateway address of network `name`: the host's own address on it.
async fn gateway(docker: &Docker, name: &str) -> Result<IpAddr, SandboxError> {
    let info = docker
        .inspect_network(name, None)
        .await
        .map_err(|error| engine_error("inspecting the egress network".into(), error))?;
    info.ipam
        .and_then(|ipam| ipam.config)
        .into_iter()
        .flatten()
        .filter_map(|config| config.gateway)
        .find_map(|gateway| gateway.parse::<IpAddr>().ok())
        .ok_or_else(|| SandboxError::Engine(format!("the network {name} has no gateway address")))
}

/// The address container `id` has on network `network`.
pub async fn address(docker: &Docker, id: &str, network: &str) -> Option<IpAddr> {
    let info = docker.inspect_container(id, None).await.ok()?;
    let networks = info.network_settings?.networks?;
    networks.get(network)?.ip_address.as_deref()?.parse().ok()
}

async fn remove_network(docker: &Docker, name: &str) {
    match docker.remove_network(name).await {
        Ok(()) => tracing::debug!(network = name, "egress network removed"),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(error) => tracing::warn!(network = name, %error, "could not remove the egress network"),
    }
}

/// Removes the egress networks of processes that are gone; returns how many.
pub async fn sweep(docker: &Docker, instance: &Instance) -> usize {
    let options = bollard::query_parameters::ListNetworksOptionsBuilder::default()
        .filters(&HashMap::from([(
            "label".to_string(),
            vec![LABEL.to_string()],
        )]))
        .build();
    let networks = match docker.list_networks(Some(options)).await {
        Ok(networks) => networks,
        Err(error) => {
            tracing::warn!(%error, "listing egress networks");
            return 0;
        }
    };
    let mut removed = 0;
    for network in networks {
        let (Some(name), labels) = (network.name, network.labels.unwrap_or_default()) else {
            continue;
        };
        if instance.owner_is_gone(&labels, None) {
            tracing::info!(
                network = short(&name),
                "removing an egress network left by a process that is gone"
            );
            remove_network(docker, &name).await;
            removed += 1;
        }
    }
    removed
}
