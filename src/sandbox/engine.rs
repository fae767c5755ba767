//! Reaching the container engine: which sockets to try for `engine: docker|podman|auto`,
//! the API version handshake, and an error that says what was tried and how to fix it.
//!
//! Podman is spoken to through its Docker-compatible socket, so one client (bollard)
//! serves both. The client starts at bollard's newest API version and negotiates down
//! to the daemon's (1.41 for Docker 20.10, Podman's compat API): without that, a newer
//! client is refused by an older daemon.

use super::SandboxError;
use crate::policy::EngineKind;
use bollard::Docker;
use std::path::Path;
use std::time::Duration;

/// How long the first contact with the engine may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Per-request timeout of the client, in seconds. Long runs, and interpreters waiting
/// in the pool for minutes, are not affected: an attachment is an upgraded connection,
/// and the timeout covers only getting the response started.
const REQUEST_TIMEOUT_SECS: u64 = 120;

const DOCKER_SOCKET: &str = "/var/run/docker.sock";
const PODMAN_SYSTEM_SOCKET: &str = "/run/podman/podman.sock";

/// One place an engine may listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// An address from `DOCKER_HOST` / `CONTAINER_HOST` (`unix://`, `tcp://`, `ssh://`…).
    Host { address: String, from: &'static str },
    /// A Unix socket found by convention.
    Socket { path: String, engine: &'static str },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Host { address, from } => write!(f, "{address} (from ${from})"),
            Endpoint::Socket { path, engine } => write!(f, "unix://{path} ({engine})"),
        }
    }
}

/// The endpoints to try, in order. `env` is `std::env::var` (a parameter for tests).
pub fn candidates(kind: EngineKind, env: impl Fn(&str) -> Option<String>) -> Vec<Endpoint> {
    let var = |name: &'static str| {
        env(name)
            .filter(|v| !v.is_empty())
            .map(|address| Endpoint::Host {
                address,
                from: name,
            })
    };
    let docker = || Endpoint::Socket {
        path: DOCKER_SOCKET.into(),
        engine: "docker",
    };
    let podman = || {
        let mut sockets = Vec::new();
        if let Some(dir) = env("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            sockets.push(format!("{dir}/podman/podman.sock"));
        }
        if let Some(uid) = current_uid() {
            let path = format!("/run/user/{uid}/podman/podman.sock");
            if !sockets.contains(&path) {
                sockets.push(path);
            }
        }
        sockets.push(PODMAN_SYSTEM_SOCKET.into());
        sockets
            .into_iter()
            .map(|path| Endpoint::Socket {
                path,
                engine: "podman",
            })
            .collect::<Vec<_>>()
    };
    match kind {
        // An explicit DOCKER_HOST is the user's choice: it is the only one tried.
        EngineKind::Docker => var("DOCKER_HOST").map_or_else(|| vec![docker()], |h| vec![h]),
        EngineKind::Podman => var("CONTAINER_HOST").map_or_else(podman, |h| vec![h]),
        EngineKind::Auto => match var("DOCKER_HOST") {
            Some(host) => vec![host],
            None => std::iter::once(docker()).chain(podman()).collect(),
        },
    }
}

/// Connects to the first endpoint that answers, negotiating the API version down to
/// the daemon's.
pub async fn connect(kind: EngineKind) -> Result<Docker, SandboxError> {
    let endpoints = candidates(kind, |name| std::env::var(name).ok());
    let mut tried = Vec::new();
    for endpoint in &endpoints {
        match try_endpoint(endpoint).await {
            Ok(docker) => {
                let version = docker.client_version();
                tracing::debug!(%endpoint, api = %format!("{}.{}", version.major_version, version.minor_version), "connected to the container engine");
                return Ok(docker);
            }
            Err(reason) => tried.push(format!("{endpoint}: {reason}")),
        }
    }
    Err(SandboxError::EngineUnreachable(unreachable_message(
        kind, &tried,
    )))
}

async fn try_endpoint(endpoint: &Endpoint) -> Result<Docker, String> {
    let client = match endpoint {
        Endpoint::Host { address, .. } if address.starts_with("unix://") => {
            unix(address.trim_start_matches("unix://"))?
        }
        Endpoint::Host { address, .. } => {
            Docker::connect_with_host(address).map_err(|e| e.to_string())?
        }
        Endpoint::Socket { path, .. } => unix(path)?,
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, client.negotiate_version()).await {
        Ok(Ok(docker)) => Ok(docker),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs())),
    }
}

fn unix(path: &str) -> Result<Docker, String> {
    if !Path::new(path).exists() {
        return Err("no such socket".into());
    }
    Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
        .map_err(|e| e.to_string())
}

fn unreachable_message(kind: EngineKind, tried: &[String]) -> String {
    let how = match kind {
        EngineKind::Docker => {
            "start Docker (`sudo systemctl start docker`, or `sudo dockerd &`), or set DOCKER_HOST"
        }
        EngineKind::Podman => {
            "start Podman's API socket (`systemctl --user start podman.socket`, or \
             `podman system service --time=0 &`), or set CONTAINER_HOST"
        }
        EngineKind::Auto => {
            "start Docker (`sudo systemctl start docker`, or `sudo dockerd &`) or Podman's API \
             socket (`systemctl --user start podman.socket`), or set DOCKER_HOST; `engine:` in \
             the policy picks one"
        }
    };
    format!(
        "cannot reach a container engine (engine: {}); tried {}. To fix: {how}",
        match kind {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
            EngineKind::Auto => "auto",
        },
        tried.join("; ")
    )
}

/// The real user id, for the rootless Podman socket path (no libc needed: /proc/self is
/// owned by the process's user).
fn current_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").ok().map(|m| m.uid())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn docker_host_wins_for_docker_and_auto() {
        let vars = [("DOCKER_HOST", "tcp://10.0.0.1:2375")];
        for kind in [EngineKind::Docker, EngineKind::Auto] {
            assert_eq!(
                candidates(kind, env(&vars)),
                vec![Endpoint::Host {
                    address: "tcp://10.0.0.1:2375".into(),
                    from: "DOCKER_HOST"
                }]
            );
        }
    }

    #[test]
    fn auto_tries_docker_then_podman_sockets() {
        let vars = [("XDG_RUNTIME_DIR", "/run/user/1000")];
        let found: Vec<String> = candidates(EngineKind::Auto, env(&vars))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(found[0], "unix:///var/run/docker.sock (docker)");
        assert_eq!(
            found[1],
            "unix:///run/user/1000/podman/podman.sock (podman)"
        );
        assert_eq!(
            found.last().unwrap(),
            "unix:///run/podman/podman.sock (podman)"
        );
    }

    #[test]
    fn podman_ignores_docker_host() {
        let vars = [("DOCKER_HOST", "tcp://x:1"), ("XDG_RUNTIME_DIR", "/r")];
        let found = candidates(EngineKind::Podman, env(&vars));
        assert!(found.iter().all(|e| e.to_string().contains("podman")));
        assert_eq!(
            found[0].to_string(),
            "unix:///r/podman/podman.sock (podman)"
        );
    }

    #[tokio::test]
    async fn an_unreachable_engine_names_the_socket_and_the_fix() {
        let endpoint = Endpoint::Socket {
            path: "/nonexistent/docker.sock".into(),
            engine: "docker",
        };
        let reason = try_endpoint(&endpoint).await.unwrap_err();
        let message = unreachable_message(EngineKind::Docker, &[format!("{endpoint}: {reason}")]);
        assert!(
            message.contains("unix:///nonexistent/docker.sock"),
            "{message}"
        );
        assert!(message.contains("no such socket"), "{message}");
        assert!(message.contains("systemctl start docker"), "{message}");
    }
}
