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
    /// An address from `DOCKER_HOST` / `CONTAINER_HOST` or a Docker context
    /// (`unix://`, `tcp://`, `ssh://`…).
    Host { address: String, from: String },
    /// A Unix socket found by convention.
    Socket { path: String, engine: &'static str },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Host { address, from } => write!(f, "{address} (from {from})"),
            Endpoint::Socket { path, engine } => write!(f, "unix://{path} ({engine})"),
        }
    }
}

/// What the discovery reads of the machine: environment variables and small files
/// (parameters, so that tests can give their own).
pub struct Machine<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub read: &'a dyn Fn(&Path) -> Option<String>,
}

impl Machine<'_> {
    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.is_empty())
    }
}

/// The endpoints to try, in this order (the README lists it):
///
/// - Docker: `$DOCKER_HOST` (then the only one tried: it is the user's choice); the
///   current Docker context (`$DOCKER_CONTEXT`, else the CLI config's
///   `currentContext`); the rootful socket; rootless Docker's; Docker Desktop's;
///   Colima's.
/// - Podman: `$CONTAINER_HOST` (then the only one); the rootless socket; the rootful one.
/// - `auto`: `$DOCKER_HOST` if set, else Docker's list, then Podman's.
pub fn candidates(kind: EngineKind, machine: &Machine) -> Vec<Endpoint> {
    let host = |name: &str| {
        machine.var(name).map(|address| Endpoint::Host {
            address,
            from: format!("${name}"),
        })
    };
    let socket = |path: String, engine| Endpoint::Socket { path, engine };
    let runtime_dirs = || {
        let mut dirs = Vec::new();
        if let Some(dir) = machine.var("XDG_RUNTIME_DIR") {
            dirs.push(dir);
        }
        if let Some(uid) = current_uid() {
            let dir = format!("/run/user/{uid}");
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    };
    let docker = || {
        let mut found: Vec<Endpoint> = docker_context(machine).into_iter().collect();
        found.push(socket(DOCKER_SOCKET.into(), "docker"));
        for dir in runtime_dirs() {
            found.push(socket(format!("{dir}/docker.sock"), "rootless docker"));
        }
        if let Some(home) = machine.var("HOME") {
            for (path, engine) in [
                (".docker/desktop/docker.sock", "Docker Desktop"),
                (".docker/run/docker.sock", "Docker Desktop"),
                (".colima/default/docker.sock", "Colima"),
                (".config/colima/default/docker.sock", "Colima"),
            ] {
                found.push(socket(format!("{home}/{path}"), engine));
            }
        }
        found
    };
    let podman = || {
        let mut found: Vec<Endpoint> = runtime_dirs()
            .into_iter()
            .map(|dir| socket(format!("{dir}/podman/podman.sock"), "rootless podman"))
            .collect();
        found.push(socket(PODMAN_SYSTEM_SOCKET.into(), "podman"));
        found
    };
    match kind {
        EngineKind::Docker => host("DOCKER_HOST").map_or_else(docker, |h| vec![h]),
        EngineKind::Podman => host("CONTAINER_HOST").map_or_else(podman, |h| vec![h]),
        EngineKind::Auto => match host("DOCKER_HOST") {
            Some(host) => vec![host],
            None => docker().into_iter().chain(podman()).collect(),
        },
    }
}

/// The endpoint of the Docker CLI's current context, when it is not `default`: the
/// context named by `$DOCKER_CONTEXT`, else the config's `currentContext`, whose
/// metadata lives under `contexts/meta/<sha256 of the name>/meta.json`.
fn docker_context(machine: &Machine) -> Option<Endpoint> {
    use sha2::Digest;
    let config_dir = machine
        .var("DOCKER_CONFIG")
        .or_else(|| machine.var("HOME").map(|home| format!("{home}/.docker")))?;
    let name = machine.var("DOCKER_CONTEXT").or_else(|| {
        let config = (machine.read)(&Path::new(&config_dir).join("config.json"))?;
        let config: serde_json::Value = serde_json::from_str(&config).ok()?;
        config["currentContext"].as_str().map(str::to_string)
    })?;
    if name == "default" {
        return None;
    }
    let digest: String = sha2::Sha256::digest(name.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let meta = (machine.read)(
        &Path::new(&config_dir)
            .join("contexts/meta")
            .join(digest)
            .join("meta.json"),
    )?;
    let meta: serde_json::Value = serde_json::from_str(&meta).ok()?;
    let address = meta["Endpoints"]["docker"]["Host"].as_str()?.to_string();
    Some(Endpoint::Host {
        address,
        from: format!("the Docker context `{name}`"),
    })
}

/// Connects to the first endpoint that answers, negotiating the API version down to
/// the daemon's.
pub async fn connect(kind: EngineKind) -> Result<Docker, SandboxError> {
    let endpoints = candidates(
        kind,
        &Machine {
            env: &|name| std::env::var(name).ok(),
            read: &|path| std::fs::read_to_string(path).ok(),
        },
    );
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

/// Said of a socket the user may not open; [`unreachable_message`] looks for it.
const PERMISSION_DENIED: &str = "permission denied";

fn unix(path: &str) -> Result<Docker, String> {
    if !Path::new(path).exists() {
        return Err("no such socket".into());
    }
    // A socket that exists but refuses this user is a different problem from an
    // engine that is down, with a different fix: found here, before the client's
    // error (which would bury it) is made.
    #[cfg(unix)]
    if let Err(error) = std::os::unix::net::UnixStream::connect(path) {
        if error.kind() == std::io::ErrorKind::PermissionDenied {
            return Err(format!("{PERMISSION_DENIED} (this user may not use it)"));
        }
    }
    Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
        .map_err(|e| e.to_string())
}

fn unreachable_message(kind: EngineKind, tried: &[String]) -> String {
    if tried.iter().any(|line| line.contains(PERMISSION_DENIED)) {
        return format!(
            "the container engine's socket refuses this user: tried {}. To fix: add the \
             user to the engine's group (`sudo usermod -aG docker $USER`, then log in again), \
             or use an engine of the user's own: rootless Docker \
             (`dockerd-rootless-setuptool.sh install`) or rootless Podman \
             (`systemctl --user start podman.socket`)",
            tried.join("; ")
        );
    }
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

    fn found(kind: EngineKind, vars: &[(&str, &str)], files: &[(&str, &str)]) -> Vec<String> {
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let read = |path: &Path| {
            files
                .iter()
                .find(|(p, _)| Path::new(p) == path)
                .map(|(_, text)| text.to_string())
        };
        candidates(
            kind,
            &Machine {
                env: &env,
                read: &read,
            },
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn docker_host_wins_for_docker_and_auto() {
        let vars = [("DOCKER_HOST", "tcp://10.0.0.1:2375"), ("HOME", "/home/u")];
        for kind in [EngineKind::Docker, EngineKind::Auto] {
            assert_eq!(
                found(kind, &vars, &[]),
                ["tcp://10.0.0.1:2375 (from $DOCKER_HOST)"]
            );
        }
    }

    #[test]
    fn auto_tries_every_docker_place_then_podman() {
        let vars = [("XDG_RUNTIME_DIR", "/run/user/1000"), ("HOME", "/home/u")];
        let found = found(EngineKind::Auto, &vars, &[]);
        assert_eq!(found[0], "unix:///var/run/docker.sock (docker)");
        assert_eq!(
            found[1],
            "unix:///run/user/1000/docker.sock (rootless docker)"
        );
        for place in [
            "unix:///home/u/.docker/desktop/docker.sock (Docker Desktop)",
            "unix:///home/u/.colima/default/docker.sock (Colima)",
            "unix:///run/user/1000/podman/podman.sock (rootless podman)",
        ] {
            assert!(found.iter().any(|f| f == place), "{place} in {found:?}");
        }
        assert_eq!(
            found.last().unwrap(),
            "unix:///run/podman/podman.sock (podman)"
        );
    }

    #[test]
    fn the_current_docker_context_comes_first() {
        use sha2::Digest;
        let digest: String = sha2::Sha256::digest(b"colima")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let meta = format!("/home/u/.docker/contexts/meta/{digest}/meta.json");
        let files = [
            (
                "/home/u/.docker/config.json",
                r#"{"currentContext": "colima"}"#,
            ),
            (
                meta.as_str(),
                r#"{"Name":"colima","Endpoints":{"docker":{"Host":"unix:///home/u/.colima/default/docker.sock"}}}"#,
            ),
        ];
        let found = found(EngineKind::Docker, &[("HOME", "/home/u")], &files);
        assert_eq!(
            found[0],
            "unix:///home/u/.colima/default/docker.sock (from the Docker context `colima`)"
        );
        // `default` is the rootful socket, tried next anyway.
        let default = [(
            "/home/u/.docker/config.json",
            r#"{"currentContext": "default"}"#,
        )];
        let found = self::found(EngineKind::Docker, &[("HOME", "/home/u")], &default);
        assert_eq!(found[0], "unix:///var/run/docker.sock (docker)");
    }

    #[test]
    fn podman_ignores_docker_host() {
        let vars = [("DOCKER_HOST", "tcp://x:1"), ("XDG_RUNTIME_DIR", "/r")];
        let found = found(EngineKind::Podman, &vars, &[]);
        assert!(found.iter().all(|e| e.contains("podman")));
        assert_eq!(found[0], "unix:///r/podman/podman.sock (rootless podman)");
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
