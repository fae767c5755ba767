//! `code-sandbox-mcp cleanup`: removes the containers and guard volumes that
//! code-sandbox-mcp processes which are gone (killed, crashed, a machine that lost
//! power) left behind. Every server does this for itself when it first reaches the
//! engine; this is the same sweep on demand, for a user who wants the engine clean now.
//! Containers of a process still running are never touched.

use super::run::EXIT_ENGINE;
use crate::sandbox::Sandbox;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub policy: super::PolicyArg,
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
        sandbox.shutdown().await;
        match cleaned {
            Ok((containers, volumes)) => {
                println!(
                    "removed {containers} container(s) and {volumes} volume(s) left by \
                     code-sandbox-mcp processes that are gone"
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::from(EXIT_ENGINE)
            }
        }
    })
}
