//! Network by name: under `network: { allow: [...] }` a sandbox container still has no
//! network at all (`none`: loopback only). The one way out is a Unix socket mounted
//! into it, on which this process serves the egress proxy (`proxy`). Inside, the
//! bootstrap relays `127.0.0.1:3128` to that socket, and `HTTP_PROXY` / `HTTPS_PROXY`
//! name it: clients that honour them reach the listed hosts; nothing else reaches
//! anything (no interface, so no DNS, no other network, not the host's own services).
//!
//! One socket per instance, in a private folder of the host's temporary directory,
//! made on first use and removed at shutdown. The proxy knows which container a
//! connection comes from by the kernel's word (the peer's cgroup), so each run gets
//! its own refusals back.

mod proxy;

pub use proxy::{Refusal, RefusalLog};

use super::instance::Instance;
use super::SandboxError;
use crate::policy::allowlist::HostRule;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OnceCell;

/// Where the proxy's socket appears in a sandbox container.
pub const SOCKET_IN_SANDBOX: &str = "/run/code-sandbox/egress.sock";
/// The loopback port the bootstrap relays to the socket.
pub const RELAY_PORT: u16 = 3128;

/// How a sandbox container reaches the allowed hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The proxy's socket on the host, mounted at [`SOCKET_IN_SANDBOX`].
    pub socket: PathBuf,
}

impl Route {
    /// The variables that point HTTP clients at the relay (both spellings: curl and
    /// Python read the lower-case ones, many others the upper-case).
    pub fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{RELAY_PORT}");
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
            .into_iter()
            .map(|name| (name.to_string(), url.clone()))
            .collect()
    }
}

/// The folders of the instances' sockets, in the host's temporary directory.
const FOLDER_PREFIX: &str = "code-sandbox-mcp-egress-";
/// The labels of the instance a folder is for.
const OWNER_FILE: &str = "owner.json";

/// Removes the socket folders of processes that are gone (a server killed with
/// SIGKILL cannot remove its own); returns how many.
pub fn sweep(instance: &Instance) -> usize {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(FOLDER_PREFIX) {
            continue;
        }
        let owner: Option<HashMap<String, String>> =
            std::fs::read_to_string(entry.path().join(OWNER_FILE))
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok());
        if owner.is_some_and(|labels| instance.owner_is_gone(&labels, None))
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// The egress of one instance: its proxy and socket, made on first use.
pub struct Egress {
    /// Which of the instance's proxies (`run`, `install`): part of the folder's name.
    purpose: &'static str,
    log: Arc<RefusalLog>,
    made: OnceCell<(Route, tokio::task::AbortHandle)>,
}

impl Egress {
    pub fn new(purpose: &'static str) -> Egress {
        Egress {
            purpose,
            log: Arc::default(),
            made: OnceCell::new(),
        }
    }

    /// The route, starting the proxy the first time.
    pub async fn route(
        &self,
        instance: &Instance,
        allow: &[HostRule],
    ) -> Result<Route, SandboxError> {
        self.made
            .get_or_try_init(|| async {
                let failed = |doing: &str, error: std::io::Error| {
                    SandboxError::Engine(format!("{doing} for the egress proxy: {error}"))
                };
                let dir = std::env::temp_dir()
                    .join(format!("{FOLDER_PREFIX}{}-{}", self.purpose, instance.id));
                std::fs::create_dir_all(&dir).map_err(|e| failed("making a folder", e))?;
                // Whose folder it is, for the sweep of a process that is gone.
                let owner = serde_json::to_string(&instance.labels()).expect("labels serialize");
                std::fs::write(dir.join(OWNER_FILE), owner)
                    .map_err(|e| failed("writing the owner", e))?;
                let socket = dir.join("egress.sock");
                let _ = std::fs::remove_file(&socket);
                let listener = tokio::net::UnixListener::bind(&socket)
                    .map_err(|e| failed("making the socket", e))?;
                // The sandbox runs as an unprivileged user of its own, which must be able
                // to connect; the folder keeps everyone else on the host from finding it
                // by listing (it is only traversable).
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
                        .map_err(|e| failed("opening the socket", e))?;
                    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
                        .map_err(|e| failed("closing the folder", e))?;
                }
                let task = tokio::spawn(proxy::serve(
                    listener,
                    Arc::new(allow.to_vec()),
                    self.log.clone(),
                ));
                tracing::info!(socket = %socket.display(), "egress proxy ready");
                Ok((Route { socket }, task.abort_handle()))
            })
            .await
            .map(|(route, _)| route.clone())
    }

    /// The connections the proxy refused to container `id` since `since` (taken once).
    pub fn refusals(&self, id: &str, since: Instant) -> Vec<Refusal> {
        self.log.take(id, since)
    }

    /// Stops the proxy and removes its socket and folder.
    pub fn remove(&self) {
        if let Some((route, task)) = self.made.get() {
            task.abort();
            if let Some(dir) = route.socket.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}
