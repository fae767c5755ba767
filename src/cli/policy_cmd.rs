//! `policy show|validate|init`: look at, check and start policy files.

use super::{PolicyArg, EXIT_USAGE};
use crate::policy::{PolicySource, PROJECT_FILE, STARTER_POLICY};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Print the effective policy (after `extends`) as YAML.
    Show(PolicyArg),
    /// Check policy files; prints each error with its file, line and column.
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Write a commented starter `.code-sandbox.yaml` in the current directory.
    Init {
        /// Overwrite an existing file.
        #[arg(long)]
        force: bool,
    },
}

pub fn main(command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Show(arg) => show(&arg),
        PolicyCommand::Validate { files } => validate(&files),
        PolicyCommand::Init { force } => init(force),
    }
}

fn show(arg: &PolicyArg) -> ExitCode {
    let policy = match arg.load() {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let yaml = serde_yaml::to_string(&policy).expect("a policy serializes");
    print!("# effective policy: {}\n{yaml}", policy.name);
    ExitCode::SUCCESS
}

fn validate(files: &[PathBuf]) -> ExitCode {
    let mut failed = false;
    for file in files {
        match PolicySource::File(file.clone()).load() {
            Ok(policy) => println!("{}: ok ({} rules)", file.display(), policy.rules.len()),
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(EXIT_USAGE)
    } else {
        ExitCode::SUCCESS
    }
}

fn init(force: bool) -> ExitCode {
    let path = PathBuf::from(PROJECT_FILE);
    if path.exists() && !force {
        eprintln!("error: {PROJECT_FILE} already exists here (use --force to overwrite it)");
        return ExitCode::from(EXIT_USAGE);
    }
    if let Err(e) = std::fs::write(&path, STARTER_POLICY) {
        eprintln!("error: cannot write {PROJECT_FILE}: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    eprintln!("wrote {PROJECT_FILE}; `code-sandbox-mcp policy show` prints the effective policy");
    ExitCode::SUCCESS
}
