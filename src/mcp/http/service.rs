//! One HTTP request, from the socket to rmcp's streamable HTTP transport and back.
//!
//! In order: the Host and Origin (403, `origin`); the protected-resource metadata,
//! which is public; the credential (401/403, `auth`); the MCP session named, which
//! must be the caller's own (404 otherwise, as for a session that does not exist); the
//! protocol revision, which must be one with sessions (400); the body, read whole up to
//! [`MAX_BODY`] (413) within [`BODY_TIME`] (408). Then rmcp serves it, with a server
//! made for this principal from its policy's template (the factory learns whose
//! request it is from a task-local set around the call), and the answer's streams are
//! watched (`streams`): a call whose stream the client drops is cancelled.

use super::auth::{Authenticator, Outcome};
use super::connections::Connections;
use super::origin::{Gate, Refused};
use super::streams::Watched;
use super::tenants::Tenants;
use crate::mcp::{CodeSandboxServer, Principal, PrincipalLimits};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest request body read (the streamable HTTP transport's own cap).
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a request body may take to arrive.
pub const BODY_TIME: Duration = Duration::from_secs(30);
/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";
/// Where the protected-resource metadata is (RFC 9728): at the root and, as the
/// well-known URI of the `/mcp` resource, with the path appended.
pub const METADATA_PATHS: [&str; 2] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
];

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const META_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

pub type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

/// What the requests of one server share.
pub struct HttpService {
    pub gate: Gate,
    pub auth: Authenticator,
    pub tenants: Arc<Tenants>,
    pub limits: Arc<PrincipalLimits>,
    pub connections: Arc<Connections>,
    pub sessions: Arc<LocalSessionManager>,
    pub mcp: StreamableHttpService<CodeSandboxServer, LocalSessionManager>,
    /// The resource identifier: this server's `/mcp` URL.
    pub resource: String,
    /// The token file's directory, for the relative policy paths of its lines.
    pub tokens_dir: std::path::PathBuf,
}

tokio::task_local! {
    /// Whose request rmcp is serving now, for the server factory.
    static MAKING: Making;
}

/// The factory's side of one request: the template and caller to make a server of,
/// and the server made.
#[derive(Clone)]
struct Making {
    template: CodeSandboxServer,
    limits: Arc<PrincipalLimits>,
    principal: Principal,
    made: Arc<Mutex<Option<CodeSandboxServer>>>,
}

/// The factory rmcp calls for each new MCP session (and for `server/discover`).
pub fn make_server() -> Result<CodeSandboxServer, std::io::Error> {
    MAKING
        .try_with(|making| {
            let allowance = making.limits.allowance(making.principal.clone());
            let server = making.template.for_principal(allowance);
            *making.made.lock().unwrap_or_else(|e| e.into_inner()) = Some(server.clone());
            server
        })
        .map_err(|_| std::io::Error::other("a server was asked for outside a request"))
}

impl HttpService {
    pub async fn handle(self: Arc<Self>, request: Request<hyper::body::Incoming>) -> HttpResponse {
        if let Err(refused) = self.gate.check(request.headers()) {
            return match refused {
                Refused::BadHost(why) => text(StatusCode::BAD_REQUEST, why),
                Refused::Forbidden(why) => text(StatusCode::FORBIDDEN, why),
            };
        }
        // An Origin that passed the gate is one allowed: a page there may read answers.
        let origin = request.headers().get(http::header::ORIGIN).cloned();
        let mut response = match (&origin, request.method()) {
            (Some(_), &Method::OPTIONS) => preflight(),
            _ => self.route(request).await,
        };
        if let Some(origin) = origin {
            let headers = response.headers_mut();
            headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            headers.insert(http::header::VARY, http::HeaderValue::from_static("Origin"));
            headers.insert(
                http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
                http::HeaderValue::from_static("Mcp-Session-Id, WWW-Authenticate"),
            );
        }
        response
    }

    async fn route(self: Arc<Self>, request: Request<hyper::body::Incoming>) -> HttpResponse {
        let path = request.uri().path();
        if METADATA_PATHS.contains(&path) {
            return self.metadata(request.method());
        }
        if path != MCP_PATH {
            return text(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
        }
        let (principal, policy) = match self.auth.judge(request.headers()).await {
            Outcome::Allowed(principal, policy) => (principal, policy),
            Outcome::Refused {
                status,
                challenge,
                message,
            } => {
                let mut response = text(status, &message);
                if let Ok(value) = challenge.parse() {
                    response
                        .headers_mut()
                        .insert(http::header::WWW_AUTHENTICATE, value);
                }
                return response;
            }
        };
        let session = match request.headers().get(SESSION_HEADER) {
            Some(value) => match value.to_str() {
                Ok(id) if self.connections.is_of(id, &principal) => Some(id.to_string()),
                _ => return text(StatusCode::NOT_FOUND, "Not Found: Session not found"),
            },
            None => None,
        };
        if let Some(version) = request.headers().get(VERSION_HEADER) {
            let known = version
                .to_str()
                .is_ok_and(|v| super::PROTOCOL_VERSIONS.iter().any(|p| p.as_str() == v));
            if !known {
                return stateless_refused();
            }
        }
        let template = match self.tenants.template(policy.as_deref(), &self.tokens_dir) {
            Ok(template) => template,
            Err(error) => {
                tracing::error!(principal = %principal.name, %error, "the principal's policy cannot be loaded");
                return text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "this principal's policy cannot be loaded; the server's log says why",
                );
            }
        };
        let making = Making {
            template,
            limits: self.limits.clone(),
            principal: principal.clone(),
            made: Arc::new(Mutex::new(None)),
        };
        match *request.method() {
            Method::POST => self.post(request, session, making).await,
            Method::GET => {
                let response = MAKING.scope(making, self.mcp.handle(request)).await;
                match session {
                    Some(id) if response.status() == StatusCode::OK => {
                        self.watch(response, id, None)
                    }
                    _ => response,
                }
            }
            Method::DELETE => {
                let mut response = MAKING.scope(making, self.mcp.handle(request)).await;
                // The session is gone: "No Content" is what clients expect (the Python
                // SDK warns about the transport's 202).
                if response.status() == StatusCode::ACCEPTED {
                    *response.status_mut() = StatusCode::NO_CONTENT;
                }
                if let Some(id) = session {
                    let connections = self.connections.clone();
                    tokio::spawn(
                        async move { connections.close(&id, "the client ended it").await },
                    );
                }
                response
            }
            _ => MAKING.scope(making, self.mcp.handle(request)).await,
        }
    }

    async fn post(
        self: Arc<Self>,
        request: Request<hyper::body::Incoming>,
        session: Option<String>,
        making: Making,
    ) -> HttpResponse {
        let (parts, body) = request.into_parts();
        let bytes = match tokio::time::timeout(BODY_TIME, Limited::new(body, MAX_BODY).collect())
            .await
        {
            Err(_) => return text(StatusCode::REQUEST_TIMEOUT, "the request body was too slow"),
            Ok(Err(error)) => {
                return if error.is::<http_body_util::LengthLimitError>() {
                    text(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &format!("the request body is over {MAX_BODY} bytes"),
                    )
                } else {
                    text(
                        StatusCode::BAD_REQUEST,
                        "the request body could not be read",
                    )
                }
            }
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        // What the transport needs to know of the message: its id and method, and
        // whether it speaks the stateless revision.
        let message: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
        let method = message
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(|m| m.as_str())
            .map(str::to_string);
        let request_id = message
            .as_ref()
            .filter(|_| method.is_some())
            .and_then(|m| m.get("id"))
            .cloned();
        let modern = message
            .as_ref()
            .and_then(|m| m.pointer("/params/_meta"))
            .and_then(|meta| meta.get(META_VERSION_KEY))
            .is_some();
        if modern && method.as_deref() != Some("server/discover") {
            return stateless_refused();
        }
        let is_initialize = method.as_deref() == Some("initialize");
        if is_initialize
            && self.connections.count_of(&making.principal) >= super::connections::MAX_PER_PRINCIPAL
        {
            return text(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "this principal has {} MCP sessions open, the most one may: end one (DELETE) first",
                    super::connections::MAX_PER_PRINCIPAL
                ),
            );
        }
        let made = making.made.clone();
        let principal = making.principal.clone();
        let request = Request::from_parts(parts, Full::new(bytes));
        let response = MAKING.scope(making, self.mcp.handle(request)).await;
        if is_initialize && response.status() == StatusCode::OK {
            let id = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let server = made.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let (Some(id), Some(server)) = (id, server) {
                self.connections.register(&id, principal, server);
            }
            return response;
        }
        match (session, request_id) {
            (Some(id), Some(request_id)) if is_event_stream(&response) => {
                self.watch(response, id, Some(request_id))
            }
            _ => response,
        }
    }

    /// Watches a response stream of session `id` (for the call `request_id`, when it
    /// answers one).
    fn watch(
        self: &Arc<Self>,
        response: HttpResponse,
        id: String,
        request_id: Option<serde_json::Value>,
    ) -> HttpResponse {
        self.connections.stream_opened(&id);
        let service = self.clone();
        let (parts, body) = response.into_parts();
        let on_end = Box::new(move |completed: bool| {
            if !completed {
                if let Some(request_id) = request_id {
                    service.cancel_call(&id, request_id);
                }
            }
            service.connections.stream_closed(&id, completed);
        });
        Response::from_parts(parts, Watched::new(body, on_end).boxed())
    }

    /// Tells session `id` that nobody waits for the call `request_id` any more, as a
    /// client's `notifications/cancelled` would: its run is killed.
    fn cancel_call(self: &Arc<Self>, id: &str, request_id: serde_json::Value) {
        let cancelled = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the client's connection closed"},
        });
        let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(cancelled) else {
            return;
        };
        let sessions = self.sessions.clone();
        let id: Arc<str> = id.into();
        tokio::spawn(async move {
            if let Err(error) = sessions.accept_message(&id, message).await {
                tracing::debug!(%error, "the call's session is gone already");
            }
        });
    }

    /// The protected-resource metadata (RFC 9728), in OAuth mode.
    fn metadata(&self, method: &Method) -> HttpResponse {
        if *method != Method::GET {
            return text(StatusCode::METHOD_NOT_ALLOWED, "GET only");
        }
        match self.auth.resource_metadata_document(&self.resource) {
            Some(document) => Response::builder()
                .status(StatusCode::OK)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::CACHE_CONTROL, "max-age=300")
                .body(Full::new(Bytes::from(document.to_string())).boxed())
                .expect("a valid response"),
            None => text(
                StatusCode::NOT_FOUND,
                "this server is not an OAuth resource server (no --oauth-issuer)",
            ),
        }
    }
}

fn is_event_stream(response: &HttpResponse) -> bool {
    response.status() == StatusCode::OK
        && response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The answer to a CORS preflight from an allowed origin (the headers MCP uses).
fn preflight() -> HttpResponse {
    let mut response = text(StatusCode::NO_CONTENT, "");
    *response.body_mut() = Full::new(Bytes::new()).boxed();
    let headers = response.headers_mut();
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_METHODS,
        http::HeaderValue::from_static("GET, POST, DELETE"),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_HEADERS,
        http::HeaderValue::from_static(
            "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID",
        ),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_MAX_AGE,
        http::HeaderValue::from_static("600"),
    );
    response
}

/// A request of the stateless 2026 revision, which has no sessions to own a sandbox's.
fn stateless_refused() -> HttpResponse {
    text(
        StatusCode::BAD_REQUEST,
        "this server speaks MCP with sessions (protocol revisions up to 2025-11-25): \
         start with `initialize`",
    )
}

/// A plain-text answer.
pub fn text(status: StatusCode, message: &str) -> HttpResponse {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(format!("{message}\n"))).boxed())
        .expect("a valid response")
}
