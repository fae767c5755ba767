//! `code-sandbox-mcp cleanup`: removes the containers and guard volumes that
//! code-sandbox-mcp processes which are gone (killed, crashed, a machine that lost
//! power) left behind. Every server does this for itself when it first reaches the
//! engine; this is the same sweep on demand, for a user who wants the engine clean now.
//! Containers of a process still running are never touched.
//!
//! With `--packages DAYS` it also removes the package sets (see
//! `sandbox::package_sets`) that no run has used for more than DAYS days; those are kept
//! otherwise, since they are the cache of the next run asking for the same set.

use super::run::EXIT_ENGINE;
use crate::sandbox::Sandbox;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub policy: super::PolicyArg,
    /// Also remove the package sets unused for more than DAYS days (0: every one no
    /// container uses now).
    #[arg(long, value_name = "DAYS")]
    pub packages: Option<u32>,
}

pub fn main(args: CleanupArgs) -> ExitCode {
    super::init_logging(false);
    let policy = match args.policy.load() {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let runtime = match super::async_runtime(false) {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let sandbox = Sandbox::new(std::sync::Arc::new(policy));
        let cleaned = sandbox.cleanup().await;
        let pruned = match (&cleaned, args.packages) {
            (Ok(_), Some(days)) => Some(
                sandbox
                    .prune_packages(Duration::from_secs(u64::from(days) * 86_400))
                    .await,
            ),
            _ => None,
        };
        sandbox.shutdown().await;
        let (containers, volumes) = match cleaned {
            Ok(counts) => counts,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_ENGINE);
            }
        };
        println!(
            "removed {containers} container(s) and {volumes} volume(s) left by \
             code-sandbox-mcp processes that are gone"
        );
        match (pruned, args.packages) {
            (Some(Ok(pruned)), Some(days)) => {
                println!(
                    "removed {} package set(s) unused for more than {days} day(s); kept {} \
                     used more recently{}",
                    pruned.removed.len(),
                    pruned.kept,
                    if pruned.in_use.is_empty() {
                        String::new()
                    } else {
                        format!(" and {} in use by a container now", pruned.in_use.len())
                    }
                );
                for name in &pruned.removed {
                    println!("  removed {name}");
                }
                ExitCode::SUCCESS
            }
            (Some(Err(error)), _) => {
                eprintln!("error: pruning package sets: {error}");
                ExitCode::from(EXIT_ENGINE)
            }
            _ => ExitCode::SUCCESS,
        }
    })
}
