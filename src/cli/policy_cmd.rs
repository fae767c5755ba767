//! `policy show|layers|validate|reference|init`: look at, check, look up and start
//! policy files.

use super::{PolicyArg, EXIT_USAGE};
use crate::analysis::Language;
use crate::policy::PolicyEngine;
use crate::policy::{PolicySource, PROJECT_FILE, STARTER_POLICY};
use crate::sandbox::{Guard, Mode};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Print the effective policy (after `extends`) as a policy file, every value spelled
    /// out: `policy validate` accepts it, and it loads to the same policy.
    Show(PolicyArg),
    /// Show what the policy enforces while code runs, per language: the run-time layers
    /// its deny rules turn on (besides the container, which every policy gets).
    Layers {
        #[command(flatten)]
        policy: PolicyArg,
        /// Print instead the settings that language's guard is given (JSON).
        #[arg(long, value_name = "python|javascript")]
        settings: Option<Language>,
    },
    /// Check policy files; prints each error with its file, line and column.
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Print the reference of every policy key (Markdown), made from the schema.
    Reference,
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
        PolicyCommand::Layers { policy, settings } => layers(&policy, settings),
        PolicyCommand::Validate { files } => validate(&files),
        PolicyCommand::Reference => {
            print!("{}", crate::policy::reference::markdown());
            ExitCode::SUCCESS
        }
        PolicyCommand::Init { force } => init(force),
    }
}

fn show(arg: &PolicyArg) -> ExitCode {
    let policy = match arg.load() {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let yaml = crate::policy::to_file_yaml(&policy);
    print!("# effective policy: {}\n{yaml}", policy.name);
    ExitCode::SUCCESS
}

fn layers(arg: &PolicyArg, settings: Option<Language>) -> ExitCode {
    let policy = match arg.load() {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let engine = PolicyEngine::new(policy.clone());
    if let Some(language) = settings {
        println!(
            "{}",
            Guard::new(&engine, language).settings(&Mode::default())
        );
        return ExitCode::SUCCESS;
    }
    println!("# run-time layers of policy {}", policy.name);
    for language in Language::ALL {
        let layers = Guard::new(&engine, language).layers();
        let layers = if layers.is_empty() {
            "none (no deny rule applies at run time)".to_string()
        } else {
            layers.join(", ")
        };
        println!("{language}: {layers}");
    }
    println!("\n# each rule: enforced (outside the program's reach) or checked");
    let rules = crate::sandbox::assets::layers::rule_layers(&engine);
    let width = rules.iter().map(|r| r.rule.len()).max().unwrap_or(0);
    for rule in &rules {
        let kept = if rule.enforced { "enforced" } else { "checked" };
        println!(
            "{:<width$}  {:<4}  {kept:<8}  {}",
            rule.rule,
            rule.action.as_str(),
            if rule.layers.is_empty() {
                "nothing (off)".to_string()
            } else {
                rule.layers.join("; ")
            }
        );
    }
    println!("\n# always");
    for layer in crate::sandbox::assets::layers::ALWAYS {
        println!("{layer}");
    }
    ExitCode::SUCCESS
}

fn validate(files: &[PathBuf]) -> ExitCode {
    let mut failed = false;
    for file in files {
        match PolicySource::File(file.clone()).load() {
            Ok(policy) => println!("{}: ok ({} rules)", file.display(), policy.rules.len()),
            Err(e) => {
                super::print_policy_error(&e);
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
