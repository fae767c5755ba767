//! `serve --http HOST:PORT`: MCP over streamable HTTP at `/mcp`, for a team.
//!
//! One server, many clients: each request is authenticated (`auth`: the token file,
//! `tokens`, or an OAuth issuer's JWTs, `jwt`), its Host and Origin checked (`origin`),
//! and served by rmcp's streamable HTTP transport with a [`CodeSandboxServer`] made
//! for its principal (`service`, `tenants`). Every MCP session is its principal's and
//! ends, its runs killed and its containers removed, when the client ends it or goes
//! (`connections`, `streams`). `listen` is the socket, `tls` the optional TLS, `fetch`
//! the HTTPS client for the issuer's keys.
//!
//! A server on a non-loopback address without authentication is refused at start:
//! whoever can call it runs code with the engine this server holds.

mod auth;
mod connections;
mod fetch;
mod jwt;
mod listen;
mod origin;
mod service;
mod streams;
mod tenants;
mod tls;
mod tokens;

pub use jwt::OAuthSettings;
pub use tokens::{TokenTable, MIN_TOKEN_LEN};

use crate::mcp::{CodeSandboxServer, PrincipalLimits};
use origin::{Authority, Gate, Origin};
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The protocol revisions served over HTTP: those with an `initialize` handshake and
/// sessions (see `CodeSandboxServer::supported_protocol_versions`).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

/// How long an MCP session may go without a message before rmcp ends it.
const SESSION_KEEP_ALIVE: Duration = Duration::from_secs(30 * 60);

/// What `serve --http` was given.
pub struct HttpSettings {
    /// `HOST:PORT` to listen on.
    pub listen: String,
    /// The URL clients reach the server by (its origin and, with a path, its prefix),
    /// when it is not the address listened on (a reverse proxy, a DNS name).
    pub public_url: Option<url::Url>,
    /// Web origins, besides the server's own, whose pages may call it.
    pub allowed_origins: Vec<String>,
    pub token_file: Option<PathBuf>,
    pub oauth: Option<OAuthArgs>,
    /// Certificate chain and key, PEM.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Runs at once per principal.
    pub principal_runs: usize,
    /// Open sessions per principal; `None`: the policy's `sessions.max`.
    pub principal_sessions: Option<usize>,
    /// `--pass-through-env` names, for the policies token lines name.
    pub pass_through_env: Vec<String>,
}

/// The OAuth settings as given (the audience defaults to the resource URL).
pub struct OAuthArgs {
    pub issuer: String,
    pub jwks_url: Option<url::Url>,
    pub audience: Option<String>,
    pub scopes: Vec<String>,
}

/// Serves `server` (the template of the server's own policy) over HTTP until `stop`;
/// `reload` (SIGHUP) re-reads the token file and the TLS files. An error (a bad
/// setting, a port in use, an issuer that cannot be reached) is returned before
/// anything is served.
pub async fn run(
    settings: HttpSettings,
    server: CodeSandboxServer,
    stop: CancellationToken,
    reload: Arc<Notify>,
) -> Result<(), String> {
    if let Some(error) = server.policy_error() {
        return Err(error.to_string());
    }
    let address = listen::resolve(&settings.listen).await?;
    let loopback = listen::is_loopback(&address);
    if !loopback && settings.token_file.is_none() && settings.oauth.is_none() {
        return Err(format!(
            "--http {} listens beyond this machine and no authentication is set: anyone \
             who reaches the port could run code here. Add --token-file FILE (lines of \
             `NAME TOKEN`; make a token with `openssl rand -hex 32`) or --oauth-issuer URL, \
             or listen on 127.0.0.1",
            settings.listen
        ));
    }
    let tokens = match &settings.token_file {
        Some(path) => Some(Arc::new(
            tokens::TokenFile::open(path).map_err(|errors| errors.join("\n"))?,
        )),
        None => None,
    };
    let tokens_dir = tokens
        .as_ref()
        .map(|t| t.table().dir.clone())
        .unwrap_or_else(|| PathBuf::from("."));
    let sessions_per_principal = settings
        .principal_sessions
        .unwrap_or(server.policy().sessions.max);
    let tenants = Arc::new(tenants::Tenants::new(
        server.clone(),
        settings.pass_through_env.clone(),
    ));
    if let Some(tokens) = &tokens {
        check_policies(&tokens.table(), &tenants).map_err(|errors| errors.join("\n"))?;
    }
    let tls = match &settings.tls {
        Some((cert, key)) => Some(Arc::new(tls::Tls::load(cert, key)?)),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| {
        format!(
            "--http {}: cannot listen on {address}: {e}",
            settings.listen
        )
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--http {}: {e}", settings.listen))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let own_url = url::Url::parse(&format!("{scheme}://{bound}"))
        .map_err(|e| format!("--http {}: {e}", settings.listen))?;
    let base = settings.public_url.clone().unwrap_or(own_url.clone());
    let resource = join(&base, "mcp");
    let metadata_url = join(&base, ".well-known/oauth-protected-resource/mcp");
    let oauth = match &settings.oauth {
        Some(args) => {
            let verifier = jwt::JwtVerifier::start(OAuthSettings {
                issuer: args.issuer.clone(),
                jwks_url: args.jwks_url.clone(),
                audience: args.audience.clone().unwrap_or_else(|| resource.clone()),
                scopes: args.scopes.clone(),
            })
            .await
            .map_err(|e| format!("--oauth-issuer: {e}"))?;
            Some(verifier)
        }
        None => None,
    };
    let gate = gate(
        &bound,
        loopback,
        tls.is_some(),
        settings.public_url.as_ref(),
        &settings.allowed_origins,
    )?;
    let mut session_manager = LocalSessionManager::default();
    session_manager.session_config.keep_alive = Some(SESSION_KEEP_ALIVE);
    let session_manager = Arc::new(session_manager);
    let transport_stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked before rmcp sees the request (`origin`).
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_cancellation_token(transport_stop.clone())
        .with_max_request_body_bytes(service::MAX_BODY);
    let mcp = StreamableHttpService::new(service::make_server, session_manager.clone(), config);
    let connections = connections::Connections::new(session_manager.clone());
    let auth = auth::Authenticator {
        tokens: tokens.clone(),
        resource_metadata: oauth.as_ref().map(|_| metadata_url.clone()),
        oauth: oauth.clone(),
    };
    let service = Arc::new(service::HttpService {
        gate,
        auth,
        tenants: tenants.clone(),
        limits: PrincipalLimits::new(settings.principal_runs, sessions_per_principal),
        connections: connections.clone(),
        sessions: session_manager,
        mcp,
        resource: resource.clone(),
        tokens_dir,
    });
    let sweep = connections.sweep();
    let fresh_keys = oauth.as_ref().map(|verifier| verifier.keep_fresh());
    let reloads = {
        let (tokens, tls, tenants, stop) =
            (tokens.clone(), tls.clone(), tenants.clone(), stop.clone());
        let connections = connections.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = reload.notified() => {}
                    _ = stop.cancelled() => return,
                }
                if let Some(table) = reread(tokens.as_deref(), tls.as_deref(), &tenants) {
                    // A name no longer in the file loses its sessions now, not at their
                    // idle end.
                    connections
                        .close_revoked(|principal| {
                            principal.via == crate::mcp::Via::Token
                                && !table.entries().iter().any(|e| e.name == principal.name)
                        })
                        .await;
                }
            }
        })
    };
    {
        let sandbox = server.sandbox().clone();
        tokio::spawn(async move { sandbox.warm_up().await });
    }
    tracing::info!(
        policy = %server.policy().name,
        auth = describe_auth(tokens.is_some(), oauth.is_some()),
        "listening on {resource}{}",
        if settings.public_url.is_some() { format!(" (bound to {bound})") } else { String::new() }
    );
    if !loopback && tls.is_none() {
        tracing::warn!("no TLS: bearer tokens cross the network in clear unless a reverse proxy in front terminates TLS");
    }
    listen::serve(listener, tls, service, stop.clone()).await;

    tracing::info!("stopping: killing runs, ending sessions, removing containers");
    reloads.abort();
    sweep.abort();
    if let Some(task) = fresh_keys {
        task.abort();
    }
    for template in tenants.all() {
        template.cancel_runs();
    }
    transport_stop.cancel();
    // Each sandbox's shutdown removes every container it made, sessions' included.
    for template in tenants.all() {
        template.sandbox().shutdown().await;
    }
    tracing::info!("every container removed; bye");
    Ok(())
}

/// The policies the token lines name, each loaded (or its errors, by line).
fn check_policies(
    table: &tokens::TokenTable,
    tenants: &tenants::Tenants,
) -> Result<(), Vec<String>> {
    let errors: Vec<String> = table
        .entries()
        .iter()
        .filter_map(|entry| {
            let policy = entry.policy.as_deref()?;
            tenants
                .template(Some(policy), &table.dir)
                .err()
                .map(|error| format!("token file line {}: policy `{policy}`: {error}", entry.line))
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// SIGHUP: the token file and the TLS files again; what fails is logged and the old
/// stays in force. The token table now in force, when a new one was read.
fn reread(
    tokens: Option<&tokens::TokenFile>,
    tls: Option<&tls::Tls>,
    tenants: &tenants::Tenants,
) -> Option<Arc<tokens::TokenTable>> {
    if let Some(tls) = tls {
        match tls.reload() {
            Ok(()) => tracing::info!("SIGHUP: TLS certificate read again"),
            Err(error) => {
                tracing::error!("SIGHUP: {error}; the certificate read before stays in force")
            }
        }
    }
    let tokens = tokens?;
    match tokens.reload(|table| check_policies(table, tenants)) {
        Ok(table) => {
            tracing::info!(
                file = %tokens.path().display(),
                tokens = table.entries().len(),
                "SIGHUP: token file read again"
            );
            Some(table)
        }
        Err(errors) => {
            for error in errors {
                tracing::error!("SIGHUP: {error}");
            }
            tracing::error!(
                "SIGHUP: the token file has errors; the tokens read before stay in force"
            );
            None
        }
    }
}

/// The Hosts and Origins of a server bound to `bound`.
fn gate(
    bound: &std::net::SocketAddr,
    loopback: bool,
    tls: bool,
    public_url: Option<&url::Url>,
    allowed: &[String],
) -> Result<Gate, String> {
    let default_port = if tls { 443 } else { 80 };
    let mut hosts = Vec::new();
    if loopback {
        let own = bound.ip().to_string();
        for name in ["localhost", "127.0.0.1", "::1", own.as_str()] {
            hosts.push(Authority::of(name, bound.port()));
            if bound.port() == default_port {
                hosts.push(Authority::portless(name));
            }
        }
    }
    if let Some(url) = public_url {
        let host = url
            .host_str()
            .ok_or_else(|| format!("--public-url {url}: no host"))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("--public-url {url}: no port"))?;
        hosts.push(Authority::of(host, port));
        // `https://sandbox.example.com`: a proxy passes `Host: sandbox.example.com`.
        if url.port().is_none() {
            hosts.push(Authority::portless(host));
        }
    }
    let mut origins: Vec<Origin> = hosts
        .iter()
        .filter(|host| host.has_port())
        .flat_map(Origin::both_schemes)
        .collect();
    for text in allowed {
        origins.push(Origin::parse(text).ok_or_else(|| {
            format!("--allow-origin {text}: not an origin (scheme://host[:port], e.g. https://app.example)")
        })?);
    }
    // With neither loopback nor a public URL, the names clients use are unknown.
    let hosts = (loopback || public_url.is_some()).then_some(hosts);
    if hosts.is_none() {
        tracing::info!("the Host header is not checked: --public-url names the one clients use");
    }
    Ok(Gate::new(hosts, origins))
}

/// `base` with `path` appended to its path.
fn join(base: &url::Url, path: &str) -> String {
    let text = base.as_str().trim_end_matches('/');
    format!("{text}/{path}")
}

fn describe_auth(tokens: bool, oauth: bool) -> &'static str {
    match (tokens, oauth) {
        (true, true) => "token file and OAuth",
        (true, false) => "token file",
        (false, true) => "OAuth",
        (false, false) => "none (loopback)",
    }
}
