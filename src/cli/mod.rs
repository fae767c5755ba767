//! The command line: `serve` (the default), `check`, `run`, `policy`, `image`, `cleanup`.
//!
//! Exit codes are shared by every subcommand: 0 success, 1 the policy denied something
//! (or, for `run --format text`, the snippet's own exit code), 2 a usage error, an
//! unreadable input or a bad policy.

pub mod check;
mod cleanup;
mod exclude;
pub mod format;
mod image_cmd;
mod live;
mod policy_cmd;
mod run;
mod serve;
mod serve_http;
mod suppress;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit code for usage errors, unreadable inputs and bad policies.
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "code-sandbox-mcp",
    version,
    about = "Policy-checked, container-isolated code execution for AI agents (MCP over stdio)"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `serve`'s options: `code-sandbox-mcp --policy strict` is
    /// `code-sandbox-mcp serve --policy strict`, as client configurations write it.
    #[command(flatten)]
    serve: serve::ServeArgs,
}

/// The policy to use; shared by every subcommand.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PolicyArg {
    /// Policy file, or a preset name (default, strict, permissive). Without it:
    /// $CODE_SANDBOX_POLICY, then .code-sandbox.yaml in this directory or a parent,
    /// then the `default` preset.
    #[arg(long, value_name = "FILE|PRESET")]
    pub policy: Option<String>,
}

impl PolicyArg {
    /// Loads the policy, printing the error and returning the usage exit code on failure.
    pub fn load(&self) -> Result<crate::policy::Policy, ExitCode> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
        crate::policy::Policy::discover(self.policy.as_deref(), &cwd).map_err(|e| {
            print_policy_error(&e);
            ExitCode::from(EXIT_USAGE)
        })
    }

    /// Loads the policy for running code: also every secret's value must be there.
    pub fn load_to_run(&self) -> Result<crate::policy::Policy, ExitCode> {
        let policy = self.load()?;
        policy.check_secrets().map_err(|e| {
            print_policy_error(&e);
            ExitCode::from(EXIT_USAGE)
        })?;
        Ok(policy)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio (what an agent starts; the default with no subcommand), or
    /// over streamable HTTP for a team with --http HOST:PORT.
    Serve(Box<serve::ServeArgs>),
    /// Check files against the policy, like a linter; nothing is run.
    Check(check::CheckArgs),
    /// Check a file (or stdin) against the policy, then run it in a hardened container.
    Run(run::RunArgs),
    /// Show, validate or create policy files.
    #[command(subcommand)]
    Policy(policy_cmd::PolicyCommand),
    /// Build the sandbox images with their libraries, or see which exist.
    #[command(subcommand)]
    Image(image_cmd::ImageCommand),
    /// Remove the containers and volumes that code-sandbox-mcp processes which are gone
    /// left behind.
    Cleanup(cleanup::CleanupArgs),
}

/// Logs to stderr only (stdout is JSON-RPC in `serve` and the snippet's in `run`),
/// filtered by `RUST_LOG` (default: info for this crate, debug with `VERBOSE=1`,
/// warnings for the rest), without
/// colours: clients show the stream in their own log views. `run` leaves out the time,
/// so the few lines a user sees read like the snippet's own stderr.
fn init_logging(with_time: bool) {
    // `VERBOSE=1` (the original code-sandbox-mcp's switch) is debug for this crate.
    let verbose = std::env::var("VERBOSE").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    });
    let default = if verbose {
        "warn,code_sandbox_mcp=debug"
    } else {
        "warn,code_sandbox_mcp=info"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = if with_time {
        builder.try_init()
    } else {
        builder.without_time().try_init()
    };
}

/// Waits for the first SIGINT or SIGTERM (Ctrl-C elsewhere) and returns its number;
/// never returns when signals cannot be listened for.
async fn termination_signal() -> u8 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut interrupt), Ok(mut terminate)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tracing::warn!("cannot listen for signals");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = interrupt.recv() => 2,
            _ = terminate.recv() => 15,
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            return std::future::pending().await;
        }
        2
    }
}

/// A path as the user would type it: no leading `./`, forward slashes.
pub fn display_path(path: &std::path::Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    text.strip_prefix("./").map(str::to_string).unwrap_or(text)
}

/// The async runtime a command runs on; when it cannot start, the error is printed
/// and the exit code to return is given instead.
fn async_runtime(multi_thread: bool) -> Result<tokio::runtime::Runtime, ExitCode> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build().map_err(|error| {
        eprintln!("error: cannot start the async runtime: {error}");
        ExitCode::FAILURE
    })
}

/// A policy's errors, one `error:` line each.
pub fn print_policy_error(error: &crate::policy::PolicyError) {
    for line in error.to_string().lines() {
        eprintln!("error: {line}");
    }
}

/// Parses the process arguments and runs the chosen subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The egress proxy holds two descriptors per connection; the usual soft limit of
    // 1,024 is what one busy sandbox could use up.
    crate::sandbox::egress::limits::raise_descriptor_limit();
    match cli.command {
        None => serve::main(cli.serve),
        Some(Command::Serve(args)) => serve::main(*args),
        Some(Command::Check(args)) => check::main(args),
        Some(Command::Run(args)) => run::main(args),
        Some(Command::Policy(command)) => policy_cmd::main(command),
        Some(Command::Image(command)) => image_cmd::main(command),
        Some(Command::Cleanup(args)) => cleanup::main(args),
    }
}
