//! The MCP server: `run_python_code`, `run_javascript_code` and `check_code` over rmcp.
//!
//! One [`CodeSandboxServer`] serves one client for the life of the process. Its tool
//! descriptions are built from the policy at startup (`describe`), every call is checked
//! by the policy before the sandbox sees it (`tools`), and results carry both structured
//! content and a text rendering (`types`, `render`). [`serve`] runs it over any byte
//! stream pair and removes every container when the stream ends or `stop` fires.

mod approval;
mod approval_message;
pub mod audit;
mod describe;
pub mod http;
mod principal;
mod progress;
mod render;
mod request_id;
mod resources;
mod sanitize;
mod schema;
mod stdio;
mod tools;
mod types;

pub use principal::{Allowance, Principal, PrincipalLimits, Via};
pub use stdio::{request_limit, stdio_lines};
pub use types::{CheckCodeArgs, CheckResult, RunCodeArgs, RunResult, RunStatus};

use crate::analysis::Language;
use crate::policy::{Policy, PolicyEngine};
use crate::sandbox::Sandbox;
use rmcp::handler::server::tool::ToolRouter;
use rmcp::model::{
    ErrorData, Implementation, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use rmcp::{tool_handler, ServerHandler, ServiceExt};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// The server's state, shared (cheaply cloned) by every request.
#[derive(Clone)]
pub struct CodeSandboxServer {
    engine: PolicyEngine,
    sandbox: Sandbox,
    /// Host variables handed to every run (already resolved and filtered).
    env: Arc<[(String, String)]>,
    /// Cancelled on shutdown: every run in flight is a child of it.
    stop: CancellationToken,
    tool_router: ToolRouter<Self>,
    /// The names of the variables in `env`, which the descriptions list.
    env_names: Arc<[String]>,
    instructions: Arc<str>,
    /// This client's name for the sandbox's sessions: its sessions are its own.
    connection: Arc<str>,
    /// The policy file's errors, when it has some: every call answers with them, and
    /// nothing is checked or run (see [`CodeSandboxServer::with_policy_error`]).
    policy_error: Option<Arc<str>>,
    /// The audit log, when the policy keeps one.
    audit: Option<Arc<audit::AuditLog>>,
    /// sha256 of the effective policy, for the audit log.
    policy_sha256: Arc<str>,
    /// Set when a tool list went out without an image's packages (not probed yet): the
    /// client is told the list changed once the warm-up has probed them.
    listed_unprobed: Arc<std::sync::atomic::AtomicBool>,
    /// Who calls through this connection, and what it may still start.
    allowance: Arc<Allowance>,
}

/// How long `tools/list` may spend learning what the images offer (asking the engine
/// for an image's id, reading the cache): a client's health check gives up after a
/// few seconds, and the answer must come well within 300 ms of spawn.
const LIST_BUDGET: std::time::Duration = std::time::Duration::from_millis(150);

impl CodeSandboxServer {
    /// A server for `policy`, handing `env` to every run. Does no I/O.
    pub fn new(policy: Policy, env: Vec<(String, String)>) -> CodeSandboxServer {
        // A secret without its value would be a run that cannot authenticate: say so
        // now, on every call, with the line that declares it.
        if let Err(error) = policy.check_secrets() {
            return CodeSandboxServer::with_policy_error(&error);
        }
        // A log that cannot be written is an error now, not calls missing from it.
        let audit = match &policy.audit {
            Some(audit) => match audit::AuditLog::open(&audit.file) {
                Ok(log) => Some(Arc::new(log)),
                Err(error) => {
                    return CodeSandboxServer::with_policy_error(&crate::policy::PolicyError {
                        file: policy.name.clone(),
                        line: None,
                        column: None,
                        message: format!(
                            "audit.path: cannot write the audit log `{}`: {error}",
                            audit.path
                        ),
                        more: Vec::new(),
                    })
                }
            },
            None => None,
        };
        let policy_sha256 = crate::digest::sha256_hex(
            serde_json::to_string(&policy)
                .expect("a policy serializes")
                .as_bytes(),
        );
        let policy = Arc::new(policy);
        let env_names: Vec<String> = env.iter().map(|(name, _)| name.clone()).collect();
        let mut tool_router = Self::tool_router();
        for (name, route) in tool_router.map.iter_mut() {
            // Every tool is named here: a new one without a description is a panic in
            // every test that starts a server, never a wrong description at run time.
            let (description, annotations) = match Language::from_run_tool(name) {
                Some(language) => (
                    describe::run_tool_description(&policy, language, &env_names, None),
                    describe::run_tool_annotations(&policy, language),
                ),
                None if name == "check_code" => (
                    describe::check_tool_description(&policy),
                    describe::check_tool_annotations(),
                ),
                None if name == "end_session" => (
                    describe::end_session_description(&policy),
                    describe::end_session_annotations(),
                ),
                None => unreachable!("the tool `{name}` has no description"),
            };
            route.attr.input_schema = Arc::new(schema::compact_input(&route.attr.input_schema));
            if let Some(output) = &route.attr.output_schema {
                route.attr.output_schema = Some(Arc::new(schema::compact_output(output)));
            }
            route.attr.description = Some(description.into());
            // The title once, on the tool (the annotations' copy is the older place
            // for it, and every byte here is in every agent's context).
            let mut annotations = annotations;
            route.attr.title = annotations.title.take();
            route.attr.annotations = Some(annotations);
        }
        CodeSandboxServer {
            engine: PolicyEngine::new(policy.as_ref().clone()),
            sandbox: Sandbox::new(policy.clone()),
            env: env.into(),
            stop: CancellationToken::new(),
            tool_router,
            env_names: env_names.into(),
            instructions: describe::server_instructions(&policy).into(),
            connection: next_connection_id().into(),
            policy_error: None,
            audit,
            policy_sha256: policy_sha256.into(),
            listed_unprobed: Arc::default(),
            allowance: Arc::new(Allowance::local()),
        }
    }

    /// This server for one more connection, of `caller`: the same policy, sandbox and
    /// tools; its own name for its sessions (which carries the principal's name, for
    /// the logs) and its own stop, which [`CodeSandboxServer::close_connection`] fires.
    pub fn for_principal(&self, allowance: Allowance) -> CodeSandboxServer {
        let connection = match allowance.principal() {
            Some(principal) => format!("{}/{}", principal.name, next_connection_id()),
            None => next_connection_id(),
        };
        CodeSandboxServer {
            connection: connection.into(),
            stop: self.stop.child_token(),
            allowance: Arc::new(allowance),
            // Its own: a list it was sent is its to be told of.
            listed_unprobed: Arc::default(),
            ..self.clone()
        }
    }

    /// Ends this connection: its runs in flight are killed and the sessions it opened
    /// end, their containers removed. Other connections are untouched.
    pub async fn close_connection(&self) {
        self.stop.cancel();
        let owner = &self.connection;
        self.allowance
            .session_calls_finished(owner, CLOSE_WAIT)
            .await;
        for name in self.allowance.sessions_of(owner) {
            self.sandbox.end_session(owner, &name).await;
            self.allowance.session_ended(owner, &name);
        }
    }

    /// Kills every run in flight of this server and of every connection made from it
    /// with [`CodeSandboxServer::for_principal`].
    pub fn cancel_runs(&self) {
        self.stop.cancel();
    }

    /// The policy file's errors, when the server only answers with them.
    pub fn policy_error(&self) -> Option<&str> {
        self.policy_error.as_deref()
    }

    /// A server for a policy that could not be loaded. A client shows a server that
    /// exits at start as "failed to connect", and the agent learns nothing; this one
    /// starts, and its instructions, its tool descriptions and every call say what is
    /// wrong with the file (every error, with file, line, column and key), so the agent
    /// can tell the user. Nothing is checked or run, and no container is made.
    pub fn with_policy_error(error: &crate::policy::PolicyError) -> CodeSandboxServer {
        let errors = error.to_string();
        let fallback = Policy::preset("default").expect("the default preset loads");
        let mut server = CodeSandboxServer::new(fallback, Vec::new());
        let message = tools::policy_error_message(&errors);
        for route in server.tool_router.map.values_mut() {
            route.attr.description = Some(message.clone().into());
        }
        server.instructions = message.into();
        server.policy_error = Some(errors.into());
        server
    }

    /// The runtime behind the run tools.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub fn policy(&self) -> &Policy {
        self.engine.policy()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeSandboxServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation =
            Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
        implementation.title = Some("Code Sandbox".to_string());
        implementation.description = Some(env!("CARGO_PKG_DESCRIPTION").to_string());
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .build(),
        )
        .with_server_info(implementation)
        .with_instructions(self.instructions.to_string())
    }

    /// Over HTTP only the versions with an `initialize` handshake, so that every client
    /// has an MCP session: its connection, which owns its sandbox sessions and whose end
    /// ends them (the stateless 2026 revision has none).
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.allowance.principal().is_some() {
            std::borrow::Cow::Borrowed(http::PROTOCOL_VERSIONS)
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    /// The tools, their run-tool descriptions naming what each image offers (its
    /// interpreter and packages), so that a model knows before it writes `import numpy`
    /// whether numpy is there. Answered at once: only what is known without a
    /// container (probed by this server, or kept on disk for the image's id) is named,
    /// within `LIST_BUDGET`; otherwise the policy's images, and the tool list is
    /// announced as changed once the warm-up has probed them.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tool_router.list_all();
        if self.policy_error.is_some() {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let known = Language::ALL.map(|language| async move {
            let found = tokio::time::timeout(LIST_BUDGET, self.sandbox.environment_known(language));
            (language, found.await.ok().flatten())
        });
        let environments = futures_util::future::join_all(known).await;
        if environments.iter().any(|(_, found)| found.is_none()) {
            self.listed_unprobed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        for tool in &mut tools {
            let Some(language) = Language::from_run_tool(&tool.name) else {
                continue;
            };
            let environment = environments
                .iter()
                .find(|(l, _)| *l == language)
                .and_then(|(_, found)| found.as_ref());
            if let Some(environment) = environment {
                let text = describe::run_tool_description(
                    self.policy(),
                    language,
                    &self.env_names,
                    Some(environment),
                );
                tool.description = Some(text.into());
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources::list()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match resources::read(&request.uri, self.policy(), &self.sandbox).await {
            Some(contents) => Ok(ReadResourceResult::new(vec![contents]).into()),
            None => Err(ErrorData::resource_not_found(
                format!(
                    "no resource `{}`: there are {} and {}",
                    request.uri,
                    resources::POLICY_URI,
                    resources::ENVIRONMENTS_URI
                ),
                None,
            )),
        }
    }
}

/// A name for one client connection, unique within the process.
fn next_connection_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "connection-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// How long a closing connection waits for its cancelled session calls to return
/// before it ends their sessions.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long the last messages may take to reach the client at the end.
const OUTPUT_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// How a [`serve`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeEnd {
    /// The client closed the input (stdin EOF).
    InputClosed,
    /// `stop` fired (a signal, in the binary).
    Stopped,
    /// The connection failed before or during the handshake; logged.
    Failed,
}

/// Serves `server` over `reader`/`writer` until the input ends or `stop` is cancelled,
/// then cancels every run in flight and removes every container (`Sandbox::shutdown`).
///
/// The warm pool fills in the background: `initialize` is answered at once, and a daemon
/// that is down does not keep the server from starting.
pub async fn serve<R, W>(
    server: CodeSandboxServer,
    reader: R,
    writer: W,
    stop: CancellationToken,
) -> ServeEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let sandbox = server.sandbox.clone();
    let server_stop = server.stop.clone();
    // A stop (a signal) cancels the runs in flight at once, so their calls answer
    // quickly and the transport's drain of pending responses does not wait on them.
    let forward_stop = {
        let (stop, server_stop) = (stop.clone(), server_stop.clone());
        tokio::spawn(async move {
            stop.cancelled().await;
            server_stop.cancel();
        })
        .abort_handle()
    };
    let (warmed, warm_done) = tokio::sync::oneshot::channel::<()>();
    let warm = {
        let sandbox = sandbox.clone();
        let usable = server.policy_error.is_none();
        tokio::spawn(async move {
            if usable {
                sandbox.warm_up().await;
                let _ = warmed.send(());
            }
        })
    };
    let listed_unprobed = server.listed_unprobed.clone();
    let limit = request_limit(server.policy());
    let (reader, writer, written) = stdio_lines(reader, writer, limit);
    // The transport takes what the line discipline passes on (a line and its end).
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(reader, writer)
        .with_max_line_length(limit.saturating_add(2));
    let end = match server.serve_with_ct(transport, stop.child_token()).await {
        Ok(running) => {
            let announce = tokio::spawn(announce_probed_images(
                running.peer().clone(),
                sandbox.clone(),
                listed_unprobed,
                warm_done,
            ))
            .abort_handle();
            let waited = running.waiting().await;
            announce.abort();
            match waited {
                Ok(reason) => {
                    tracing::info!(?reason, "MCP session ended");
                    if stop.is_cancelled() {
                        ServeEnd::Stopped
                    } else {
                        ServeEnd::InputClosed
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "the MCP session task failed");
                    ServeEnd::Failed
                }
            }
        }
        Err(error) if stop.is_cancelled() => {
            tracing::info!(%error, "stopped before the MCP handshake finished");
            ServeEnd::Stopped
        }
        Err(error) => {
            tracing::error!(%error, "the MCP handshake failed");
            ServeEnd::Failed
        }
    };
    server_stop.cancel();
    forward_stop.abort();
    // The last answers reach the client before anything else winds down.
    if tokio::time::timeout(OUTPUT_DRAIN, written).await.is_err() {
        tracing::warn!("the last messages could not all be written out");
    }
    // `shutdown` also removes what a warm-up still in progress is creating, and no
    // container is made after it; the warm-up task is then of no further use.
    sandbox.shutdown().await;
    warm.abort();
    tracing::info!("every container removed; bye");
    end
}

/// Once the warm-up has probed the images, tells a client that listed the tools before
/// (without the images' packages) that the list changed, so it lists them again.
async fn announce_probed_images(
    peer: rmcp::Peer<RoleServer>,
    sandbox: Sandbox,
    listed_unprobed: Arc<std::sync::atomic::AtomicBool>,
    warm_done: tokio::sync::oneshot::Receiver<()>,
) {
    if warm_done.await.is_err() || !listed_unprobed.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    for language in Language::ALL {
        if sandbox.environment_known(language).await.is_none() {
            return;
        }
    }
    if let Err(error) = peer.notify_tool_list_changed().await {
        tracing::debug!(%error, "could not announce the probed images");
    }
}
