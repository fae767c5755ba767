//! `run`: check, then run in a container. (Filled in by the container runtime work.)
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: super::PolicyArg,
}

pub fn main(_args: RunArgs) -> ExitCode {
    eprintln!("run: not built yet");
    ExitCode::from(super::EXIT_USAGE)
}
