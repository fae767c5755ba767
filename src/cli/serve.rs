//! `serve`: MCP over stdio. (Filled in by the MCP server work.)
use std::process::ExitCode;

#[derive(Debug, Default, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub policy: super::PolicyArg,
}

pub fn main(_args: ServeArgs) -> ExitCode {
    eprintln!("serve: not built yet");
    ExitCode::from(super::EXIT_USAGE)
}
