//! `check`: the policy checker as a linter. Nothing is run.
//!
//! Files and directories (recursing into `.py`, `.js`, `.mjs`, `.cjs`), or `-` for
//! standard input with `--language`. Every file is read once, refused with a reason if
//! it is too large or not UTF-8, and checked against the same policy the server uses.
//! As a linter, and only here, it honours `# noqa: RULE-ID` comments (`suppress.rs`)
//! and `--exclude GLOB` (`exclude.rs`).

use super::exclude::Excludes;
use super::format::{self, Format, Located};
use super::{display_path, PolicyArg, EXIT_USAGE};
use crate::analysis::Language;
use crate::policy::PolicyEngine;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "A finding on one line is suppressed by a comment at its end that \
names the rule: `# noqa: process-exec` (Python), `// noqa: network` (JavaScript), several \
ids separated by commas. A bare `# noqa` suppresses nothing. Only `check` reads these \
comments: the server and `run` judge by the policy alone."
)]
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
    /// Leave out files and folders matching GLOB (repeatable): a name anywhere
    /// (`tests`, `*_pb2.py`) or, with a `/`, a path from here (`vendor/**/*.js`).
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
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
    /// Findings left out by a `noqa` comment naming their rule.
    pub suppressed: usize,
    /// What the user should know about their `noqa` comments (`file:line:col: text`).
    pub notes: Vec<String>,
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
    let excludes = Excludes::new(&args.exclude);
    let run = check_paths(&engine, &args.paths, args.language, &excludes);
    for (path, reason) in &run.errors {
        eprintln!("error: {path}: {reason}");
    }
    for note in &run.notes {
        eprintln!("note: {note}");
    }
    print!("{}", format::render(args.format, &run.findings));
    if args.format == Format::Text {
        eprintln!("{}", summary(&run));
    }
    ExitCode::from(run.exit_code())
}

/// `3 findings in 2 files (5 files checked): 2 denied, 1 warning`.
fn summary(run: &CheckRun) -> String {
    let plural =
        |count: usize, word: &str| format!("{count} {word}{}", if count == 1 { "" } else { "s" });
    let mut checked = plural(run.files_checked, "file") + " checked";
    if run.suppressed > 0 {
        checked.push_str(&format!(", {} suppressed by noqa", run.suppressed));
    }
    if run.findings.is_empty() {
        return format!("no findings ({checked})");
    }
    let mut files: Vec<&str> = run.findings.iter().map(|f| f.file.as_str()).collect();
    files.sort_unstable();
    files.dedup();
    let denied = run
        .findings
        .iter()
        .filter(|f| f.finding.action.blocks())
        .count();
    let warned = run.findings.len() - denied;
    let mut kinds = Vec::new();
    if denied > 0 {
        kinds.push(format!("{denied} denied"));
    }
    if warned > 0 {
        kinds.push(plural(warned, "warning"));
    }
    format!(
        "{} in {} ({checked}): {}",
        plural(run.findings.len(), "finding"),
        plural(files.len(), "file"),
        kinds.join(", ")
    )
}

/// Checks every input; never stops at the first bad one.
pub fn check_paths(
    engine: &PolicyEngine,
    paths: &[PathBuf],
    language: Option<Language>,
    excludes: &Excludes,
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
        } else if excludes.excludes(path) {
            continue;
        } else if path.is_dir() {
            let mut files = Vec::new();
            collect_sources(path, excludes, &mut files, &mut run.errors);
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
            let mut findings = report.findings;
            // `check_bytes` read the bytes as UTF-8 already; comments matter only
            // where there is something to suppress.
            if let (false, Ok(source)) = (findings.is_empty(), std::str::from_utf8(bytes)) {
                let rule_ids: Vec<&str> = engine
                    .policy()
                    .rules
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect();
                let directives = crate::analysis::noqa::directives(language, source);
                let applied = super::suppress::apply(findings, &directives, &rule_ids);
                findings = applied.kept;
                run.suppressed += applied.suppressed;
                run.notes
                    .extend(applied.notes.iter().map(|note| format!("{name}:{note}")));
            }
            run.findings
                .extend(findings.into_iter().map(|finding| Located {
                    file: name.to_string(),
                    finding,
                }));
        }
        Err(e) => run.errors.push((name.to_string(), e.to_string())),
    }
}

/// Source files below `dir`, skipping hidden, dependency and excluded directories.
fn collect_sources(
    dir: &Path,
    excludes: &Excludes,
    files: &mut Vec<PathBuf>,
    errors: &mut Vec<(String, String)>,
) {
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
        if excludes.excludes(&path) {
            continue;
        }
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                collect_sources(&path, excludes, files, errors);
            }
        } else if kind.is_file() && Language::from_path(&path).is_some() {
            files.push(path);
        }
    }
}
