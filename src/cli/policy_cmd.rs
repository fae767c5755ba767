//! `policy show|validate|init`.
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    Show(super::PolicyArg),
}

pub fn main(_command: PolicyCommand) -> ExitCode {
    ExitCode::from(super::EXIT_USAGE)
}
