//! `serve --http HOST:PORT`: the team server's options, checked, then handed to
//! `mcp::http`. The process exits 0 on SIGINT/SIGTERM once every container it created
//! is removed, and 2 when it cannot start (an option or a file it names is wrong, the
//! port is taken, the OAuth issuer cannot be reached), saying why on stderr. SIGHUP
//! re-reads the token file and the TLS files.

use crate::mcp::http::{HttpSettings, OAuthArgs};
use crate::mcp::CodeSandboxServer;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The scope a token must grant unless `--oauth-scope` says otherwise.
pub const DEFAULT_SCOPE: &str = "code-sandbox:run";

#[derive(Debug, Default, clap::Args)]
pub struct HttpArgs {
    /// Serve MCP over streamable HTTP at http://HOST:PORT/mcp instead of stdio.
    /// Loopback (127.0.0.1:8080) unless told otherwise; any other address needs
    /// --token-file or --oauth-issuer.
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<String>,

    /// Bearer tokens, one `NAME TOKEN [POLICY]` per line; re-read on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,

    /// Accept JWT bearer tokens from this OAuth 2.1 issuer (its `iss`), checked
    /// against its published keys.
    #[arg(long, value_name = "URL", requires = "http")]
    pub oauth_issuer: Option<String>,

    /// The issuer's JWKS, when its metadata (RFC 8414 / OpenID discovery) does not
    /// name it.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub oauth_jwks_url: Option<String>,

    /// What a token's `aud` must contain [default: this server's /mcp URL].
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    pub oauth_audience: Option<String>,

    /// A scope every token must grant (repeat for several) [default: code-sandbox:run].
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    pub oauth_scope: Vec<String>,

    /// The URL clients reach this server by, when a reverse proxy or a DNS name stands
    /// in front of the address listened on (e.g. https://sandbox.example.com).
    #[arg(long, value_name = "URL", requires = "http")]
    pub public_url: Option<String>,

    /// A web origin whose pages may call the server (repeat for several), e.g.
    /// http://localhost:6274 for the MCP Inspector's web UI.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,

    /// TLS certificate chain (PEM); with --tls-key, the server speaks https.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<PathBuf>,

    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Runs at once per principal; more wait their turn (up to 4 × N going and waiting).
    #[arg(long, value_name = "N", default_value_t = 4, requires = "http")]
    pub principal_runs: usize,

    /// Open sessions per principal, over all its connections [default: the policy's
    /// sessions.max].
    #[arg(long, value_name = "N", requires = "http")]
    pub principal_sessions: Option<usize>,
}

impl HttpArgs {
    /// The settings, or what is wrong with the options.
    fn settings(&self, listen: &str, pass_through_env: &[String]) -> Result<HttpSettings, String> {
        let url = |flag: &str, text: &str| {
            url::Url::parse(text).map_err(|e| format!("{flag} {text}: not a URL: {e}"))
        };
        let public_url = match &self.public_url {
            Some(text) => {
                let parsed = url("--public-url", text)?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                    return Err(format!(
                        "--public-url {text}: an http(s) URL with a host, please"
                    ));
                }
                Some(parsed)
            }
            None => None,
        };
        let oauth = match &self.oauth_issuer {
            Some(issuer) => {
                url("--oauth-issuer", issuer)?;
                let jwks_url = match &self.oauth_jwks_url {
                    Some(text) => Some(url("--oauth-jwks-url", text)?),
                    None => None,
                };
                let scopes = if self.oauth_scope.is_empty() {
                    vec![DEFAULT_SCOPE.to_string()]
                } else {
                    self.oauth_scope.clone()
                };
                Some(OAuthArgs {
                    issuer: issuer.clone(),
                    jwks_url,
                    audience: self.oauth_audience.clone(),
                    scopes,
                })
            }
            None => None,
        };
        if self.principal_runs == 0 {
            return Err("--principal-runs 0 would run nothing; give 1 or more".into());
        }
        Ok(HttpSettings {
            listen: listen.to_string(),
            public_url,
            allowed_origins: self.allow_origin.clone(),
            token_file: self.token_file.clone(),
            oauth,
            tls: self.tls_cert.clone().zip(self.tls_key.clone()),
            principal_runs: self.principal_runs,
            principal_sessions: self.principal_sessions,
            pass_through_env: pass_through_env.to_vec(),
        })
    }
}

/// Serves `server` over HTTP at `listen` until SIGINT/SIGTERM.
pub fn main(
    args: &HttpArgs,
    listen: &str,
    server: impl FnOnce() -> CodeSandboxServer,
    pass_through_env: &[String],
) -> ExitCode {
    let settings = match args.settings(listen, pass_through_env) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(super::EXIT_USAGE);
        }
    };
    let runtime = match super::async_runtime(true) {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let served = runtime.block_on(async {
        let stop = CancellationToken::new();
        let reload = Arc::new(Notify::new());
        let on_signal = stop.clone();
        tokio::spawn(async move {
            let signal = super::termination_signal().await;
            let name = if signal == 15 { "SIGTERM" } else { "SIGINT" };
            tracing::info!("{name}: shutting down");
            on_signal.cancel();
        });
        spawn_reload_on_sighup(reload.clone());
        crate::mcp::http::run(settings, server(), stop, reload).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            for line in error.lines() {
                tracing::error!("{line}");
            }
            ExitCode::from(super::EXIT_USAGE)
        }
    }
}

#[cfg(unix)]
fn spawn_reload_on_sighup(reload: Arc<Notify>) {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(mut hangups) => {
            tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    reload.notify_one();
                }
            });
        }
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; the token file is read once")
        }
    }
}

#[cfg(not(unix))]
fn spawn_reload_on_sighup(_reload: Arc<Notify>) {}
