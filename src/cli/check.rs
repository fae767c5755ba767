//! `check`: the linter.
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub policy: super::PolicyArg,
}

pub fn main(_args: CheckArgs) -> ExitCode {
    ExitCode::from(super::EXIT_USAGE)
}
