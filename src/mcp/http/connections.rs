//! The MCP sessions of HTTP clients (the `Mcp-Session-Id` each `initialize` gets):
//! whose each one is, and when each one is over.
//!
//! An MCP session belongs to the principal that opened it: a request naming it with
//! anybody else's credentials is answered as if it did not exist (404), so a session
//! id that leaks is worth nothing to another principal. Its sandbox sessions belong to
//! it in turn (the sandbox keeps them under this connection's own name).
//!
//! It is over when the client says so (DELETE), when rmcp ends it (idle past its keep-
//! alive; found by [`Connections::sweep`]), or when the client is gone: every response
//! stream it held open was dropped before its end (its process died, its network went)
//! and no request came within [`GRACE`], which covers a client reconnecting its
//! stream. Then its runs are killed and its sessions' containers removed at once,
//! rather than at their idle timeouts.

use crate::mcp::{CodeSandboxServer, Principal};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// MCP sessions one principal may have open at once (each holds a little memory and a
/// task until it ends).
pub const MAX_PER_PRINCIPAL: usize = 64;
/// How long a client whose streams all dropped has to come back.
pub const GRACE: Duration = Duration::from_secs(10);
/// How often ended sessions are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

struct Entry {
    principal: Principal,
    server: CodeSandboxServer,
    /// Response streams of this session open now.
    open_streams: usize,
    /// Bumped by every request and stream of the session.
    activity: u64,
}

pub struct Connections {
    entries: Mutex<HashMap<String, Entry>>,
    sessions: Arc<LocalSessionManager>,
}

impl Connections {
    pub fn new(sessions: Arc<LocalSessionManager>) -> Arc<Connections> {
        Arc::new(Connections {
            entries: Mutex::new(HashMap::new()),
            sessions,
        })
    }

    /// The MCP session `id` was opened by `principal`, served by `server`.
    pub fn register(&self, id: &str, principal: Principal, server: CodeSandboxServer) {
        tracing::info!(principal = %principal.name, "MCP session opened over HTTP");
        self.lock().insert(
            id.to_string(),
            Entry {
                principal,
                server,
                open_streams: 0,
                activity: 0,
            },
        );
    }

    /// Whether `id` is an open session of `principal` (and, if so, a sign of life).
    pub fn is_of(&self, id: &str, principal: &Principal) -> bool {
        match self.lock().get_mut(id) {
            Some(entry) if entry.principal == *principal => {
                entry.activity += 1;
                true
            }
            _ => false,
        }
    }

    /// How many sessions `principal` has open.
    pub fn count_of(&self, principal: &Principal) -> usize {
        self.lock()
            .values()
            .filter(|entry| entry.principal == *principal)
            .count()
    }

    /// Ends every session of a principal for which `revoked` holds (its token was
    /// taken out of the token file).
    pub async fn close_revoked(&self, revoked: impl Fn(&Principal) -> bool) {
        let ids: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, entry)| revoked(&entry.principal))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.close(&id, "its principal's token was taken out of the token file")
                .await;
        }
    }

    /// A response stream of session `id` opened.
    pub fn stream_opened(&self, id: &str) {
        if let Some(entry) = self.lock().get_mut(id) {
            entry.open_streams += 1;
            entry.activity += 1;
        }
    }

    /// A response stream of session `id` closed: at its end (`completed`), or dropped
    /// by the client. When that leaves none open, the client has [`GRACE`] to return.
    pub fn stream_closed(self: &Arc<Self>, id: &str, completed: bool) {
        let seen = {
            let mut entries = self.lock();
            let Some(entry) = entries.get_mut(id) else {
                return;
            };
            entry.open_streams = entry.open_streams.saturating_sub(1);
            if completed || entry.open_streams > 0 {
                return;
            }
            entry.activity
        };
        let connections = Arc::downgrade(self);
        let id = id.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(GRACE).await;
            let Some(connections) = connections.upgrade() else {
                return;
            };
            let gone = connections
                .lock()
                .get(&id)
                .is_some_and(|entry| entry.open_streams == 0 && entry.activity == seen);
            if gone {
                connections
                    .close(
                        &id,
                        "the client's connection dropped and it did not come back",
                    )
                    .await;
            }
        });
    }

    /// Ends the session `id`: rmcp's side, then its runs and sandbox sessions.
    pub async fn close(&self, id: &str, why: &str) {
        let Some(entry) = self.lock().remove(id) else {
            return;
        };
        tracing::info!(principal = %entry.principal.name, why, "MCP session over: killing its runs, removing its sessions");
        if let Err(error) = self.sessions.close_session(&id.to_string().into()).await {
            tracing::debug!(%error, "rmcp's session was already gone");
        }
        entry.server.close_connection().await;
    }

    /// Looks every [`SWEEP_EVERY`] for sessions rmcp ended on its own (idle) and ends
    /// their connections too, until the returned task is aborted.
    pub fn sweep(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let connections = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(connections) = connections.upgrade() else {
                    return;
                };
                let ids: Vec<String> = connections.lock().keys().cloned().collect();
                for id in ids {
                    let alive = connections
                        .sessions
                        .has_session(&id.clone().into())
                        .await
                        .unwrap_or(false);
                    if !alive {
                        connections
                            .close(&id, "idle past the session keep-alive")
                            .await;
                    }
                }
            }
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
