//! `check`: the policy checker as a linter. Nothing is run.
//!
//! Files and directories (recursing into `.py`, `.js`, `.mjs`, `.cjs`), or `-` for
//! standard input with `--language`. Every file is read once, refused with a reason if
//! it is too large or not UTF-8, and checked against the same policy the server uses.

use super::format::{self, Format, Located};
use super::{display_path, PolicyArg, EXIT_USAGE};
use crate::analysis::Language;
use crate::policy::PolicyEngine;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Files or directories to check; `-` reads standard input (needs --language).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Language of standard input, or of files whose extension does not say.
    #[arg(long, value_name = "python|javascript")]
    pub language: Option<Language>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub policy: PolicyArg,
}

/// Directories never worth descending into.
const SKIPPED_DIRS: &[&str] = &["node_modules", "__pycache__", "target", "venv"];

/// What checking a set of inputs produced.
#[derive(Debug, Default)]
pub struct CheckRun {
    pub findings: Vec<Located>,
    /// Inputs that could not be checked, with the reason.
    pub errors: Vec<(String, String)>,
    pub files_checked: usize,
}

impl CheckRun {
    /// 2 when an input could not be checked, else 1 when something was denied, else 0.
    pub fn exit_code(&self) -> u8 {
        if !self.errors.is_empty() {
            EXIT_USAGE
        } else if self.findings.iter().any(|f| f.finding.action.blocks()) {
            1
        } else {
            0
        }
    }
}

pub fn main(args: CheckArgs) -> ExitCode {
    let policy = match args.policy.load() {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let engine = PolicyEngine::new(policy);
    let run = check_paths(&engine, &args.paths, args.language);
    for (path, reason) in &run.errors {
        eprintln!("error: {path}: {reason}");
    }
    print!("{}", format::render(args.format, &run.findings));
    if args.format == Format::Text {
        eprintln!("{}", summary(&run));
    }
    ExitCode::from(run.exit_code())
}

fn summary(run: &CheckRun) -> String {
    let denied = run
        .findings
        .iter()
        .filter(|f| f.finding.action.blocks())
        .count();
    let warned = run.findings.len() - denied;
    format!(
        "{} file{} checked: {denied} denied, {warned} warning{}",
        run.files_checked,
        if run.files_checked == 1 { "" } else { "s" },
        if warned == 1 { "" } else { "s" }
    )
}

/// Checks every input; never stops at the first bad one.
pub fn check_paths(
    engine: &PolicyEngine,
    paths: &[PathBuf],
    language: Option<Language>,
) -> CheckRun {
    let mut run = CheckRun::default();
    for path in paths {
        if path.as_os_str() == "-" {
            let Some(language) = language else {
                run.errors
                    .push(("-".into(), "reading standard input needs --language".into()));
                continue;
            };
            let mut bytes = Vec::new();
            match std::io::stdin().read_to_end(&mut bytes) {
                Ok(_) => check_one(engine, "-", language, &bytes, &mut run),
                Err(e) => run
                    .errors
                    .push(("-".into(), format!("cannot read standard input: {e}"))),
            }
        } else if path.is_dir() {
            let mut files = Vec::new();
            collect_sources(path, &mut files, &mut run.errors);
            files.sort();
            for file in files {
                check_file(engine, &file, Language::from_path(&file), &mut run);
            }
        } else {
            check_file(
                engine,
                path,
                language.or_else(|| Language::from_path(path)),
                &mut run,
            );
        }
    }
    run
}

fn check_file(engine: &PolicyEngine, path: &Path, language: Option<Language>, run: &mut CheckRun) {
    let name = display_path(path);
    let Some(language) = language else {
        run.errors.push((
            name,
            "unknown language: use a .py/.js/.mjs/.cjs file or --language".into(),
        ));
        return;
    };
    // Refuse oversize files before reading them whole.
    let limit = engine.policy().limits.code.bytes();
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() > limit => {
            run.errors.push((
                name,
                format!(
                    "{} bytes, over the policy's limit of {limit} bytes (limits.code)",
                    meta.len()
                ),
            ));
            return;
        }
        Ok(_) => {}
        Err(e) => {
            run.errors.push((name, format!("cannot read: {e}")));
            return;
        }
    }
    match std::fs::read(path) {
        Ok(bytes) => check_one(engine, &name, language, &bytes, run),
        Err(e) => run.errors.push((name, format!("cannot read: {e}"))),
    }
}

fn check_one(
    engine: &PolicyEngine,
    name: &str,
    language: Language,
    bytes: &[u8],
    run: &mut CheckRun,
) {
    match engine.check_bytes(language, bytes) {
        Ok(report) => {
            run.files_checked += 1;
            run.findings
                .extend(report.findings.into_iter().map(|finding| Located {
                    file: name.to_string(),
                    finding,
                }));
        }
        Err(e) => run.errors.push((name.to_string(), e.to_string())),
    }
}

/// Source files below `dir`, skipping hidden and dependency directories.
fn collect_sources(dir: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<(String, String)>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            errors.push((display_path(dir), format!("cannot read directory: {e}")));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                collect_sources(&path, files, errors);
            }
        } else if kind.is_file() && Language::from_path(&path).is_some() {
            files.push(path);
        }
    }
}
