//! `serve`: MCP over stdio, what an MCP client starts (also the default with no
//! subcommand, so `{"command": "code-sandbox-mcp"}` configurations keep working);
//! with `--http HOST:PORT`, the team server instead (`serve_http`).
//!
//! stdout carries JSON-RPC and nothing else; every log line goes to stderr. The process
//! exits 0 when the client closes stdin or on SIGINT/SIGTERM, after every container it
//! created has been removed.

use crate::mcp::{self, CodeSandboxServer};
use crate::sandbox::pass_through;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Default, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub policy: super::PolicyArg,

    /// Host environment variables to hand to the sandbox, by name (comma-separated; in
    /// addition to the policy's env.pass_through). Unset ones are skipped with a warning.
    #[arg(long, value_name = "KEY1,KEY2", value_delimiter = ',')]
    pub pass_through_env: Vec<String>,

    #[command(flatten)]
    pub http: super::serve_http::HttpArgs,
}

/// How long the runtime may take to wind down once the session is over: a read of stdin
/// blocked in a worker thread must not keep the process alive.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(2);

pub fn main(args: ServeArgs) -> ExitCode {
    super::init_logging(true);
    if let Some(listen) = &args.http.http {
        return serve_http(&args, listen);
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Someone typed the command to try it: say what it is waiting for.
        eprintln!(
            "code-sandbox-mcp is an MCP server: it now waits for JSON-RPC messages on stdin. \
             Start it from an MCP client (see the README's client configurations), or try \
             `code-sandbox-mcp check FILE` or `code-sandbox-mcp run FILE` here. Ctrl-C stops it."
        );
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let policy = crate::policy::Policy::discover(args.policy.policy.as_deref(), &cwd);
    if let Err(error) = &policy {
        // Served anyway: see `CodeSandboxServer::with_policy_error`.
        for line in error.to_string().lines() {
            tracing::error!("policy: {line}");
        }
    }
    let runtime = match super::async_runtime(true) {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let end = runtime.block_on(async {
        let server = match policy {
            Ok(policy) => {
                let env = pass_through(&policy.env.pass_through, &args.pass_through_env);
                tracing::info!(policy = %policy.name, network = policy.network.as_str(), "serving MCP on stdio");
                CodeSandboxServer::new(policy, env)
            }
            Err(error) => {
                tracing::warn!("serving MCP on stdio; every call answers with the policy's errors");
                CodeSandboxServer::with_policy_error(&error)
            }
        };
        let stop = CancellationToken::new();
        let on_signal = stop.clone();
        tokio::spawn(async move {
            let signal = super::termination_signal().await;
            let name = if signal == 15 { "SIGTERM" } else { "SIGINT" };
            tracing::info!("{name}: shutting down");
            on_signal.cancel();
        });
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        mcp::serve(server, stdin, stdout, stop).await
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    match end {
        mcp::ServeEnd::InputClosed | mcp::ServeEnd::Stopped => ExitCode::SUCCESS,
        mcp::ServeEnd::Failed => ExitCode::FAILURE,
    }
}

/// `--http`: a policy with errors is an error at start here (an operator starts this
/// by hand and reads its output), not a server that answers with them.
fn serve_http(args: &ServeArgs, listen: &str) -> ExitCode {
    let Ok(policy) = args.policy.load() else {
        return ExitCode::from(super::EXIT_USAGE);
    };
    let server = || {
        let env = pass_through(&policy.env.pass_through, &args.pass_through_env);
        CodeSandboxServer::new(policy, env)
    };
    super::serve_http::main(&args.http, listen, server, &args.pass_through_env)
}
