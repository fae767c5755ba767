//! `run`: check a file against the policy, then run it in a container.
//!
//! The policy check comes first and decides: a denial prints the findings (the same
//! `path:line:col: rule [deny] message` lines as `check`) to stderr and runs nothing
//! (exit 1); warnings are printed too and the run goes ahead. With `--format text` the
//! snippet's stdout and stderr pass through as they come (see [`super::live`]) and its
//! exit code becomes ours; with
//! `--format json` one JSON object says everything (the run's outcome, the findings,
//! the policy's name) and the exit code is still the snippet's.
//!
//! Exit codes besides the snippet's own: 1 denied, 2 usage or input error (too large,
//! not UTF-8, unknown language, bad policy), 125 the container engine could not run it
//! (the code `docker run` uses for the same), 130/143 interrupted by SIGINT/SIGTERM.

use super::live::{escape_controls, LiveView, Shown};
use super::{display_path, PolicyArg, EXIT_USAGE};
use crate::analysis::Language;
use crate::policy::{EngineKind, Finding, InputError};
use crate::sandbox::{
    pass_through, Approval, ApprovalRequest, Caller, NotRun, OutputTap, RunOutcome, Sandbox,
    SandboxError, Submission, Submitted,
};
use serde::Serialize;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Exit code when the engine could not run the snippet at all.
pub(super) const EXIT_ENGINE: u8 = 125;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The file to run, or `-` to read the code from standard input (needs --language).
    #[arg(value_name = "FILE|-")]
    pub file: PathBuf,
    /// Language of standard input, or of a file whose extension does not say.
    #[arg(long, value_name = "python|javascript")]
    pub language: Option<Language>,
    /// `text` passes the snippet's output through; `json` prints one result object.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
    /// Wall-clock limit in seconds; the policy's `limits.timeout` caps it.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Host environment variables to hand to the snippet, by name (comma-separated; in
    /// addition to the policy's env.pass_through). Unset ones are skipped.
    #[arg(long, value_name = "KEY1,KEY2", value_delimiter = ',')]
    pub pass_through_env: Vec<String>,
    /// Container engine, overriding the policy's `engine:` (docker, podman or auto).
    #[arg(long, value_name = "docker|podman|auto", value_parser = parse_engine)]
    pub engine: Option<EngineKind>,
    #[command(flatten)]
    pub policy: PolicyArg,
}

pub(super) fn parse_engine(value: &str) -> Result<EngineKind, String> {
    match value {
        "docker" => Ok(EngineKind::Docker),
        "podman" => Ok(EngineKind::Podman),
        "auto" => Ok(EngineKind::Auto),
        other => Err(format!(
            "unknown engine `{other}` (expected docker, podman or auto)"
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunFormat {
    /// The snippet's stdout and stderr, as they were written.
    Text,
    /// `{"policy", "language", "denied", "findings", "exit_code", "stdout", …}`.
    Json,
}

/// The `--format json` object.
#[derive(Debug, Serialize)]
struct JsonResult<'a> {
    policy: &'a str,
    language: Language,
    /// True when the policy refused the code; nothing ran and no outcome follows.
    denied: bool,
    findings: &'a [Finding],
    #[serde(flatten)]
    outcome: Option<&'a RunOutcome>,
}

pub fn main(args: RunArgs) -> ExitCode {
    let mut policy = match args.policy.load_to_run() {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let name = display_path(&args.file);
    let Some(language) = args.language.or_else(|| Language::from_path(&args.file)) else {
        eprintln!("error: {name}: unknown language: use a .py/.js/.mjs/.cjs file or --language");
        return ExitCode::from(EXIT_USAGE);
    };
    let limit = policy.limits.code.bytes();
    let bytes = match read_input(&args.file, limit) {
        Ok(bytes) => bytes,
        Err(reason) => {
            eprintln!("error: {name}: {reason}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = match String::from_utf8(bytes) {
        Ok(code) => code,
        Err(error) => {
            let offset = error.utf8_error().valid_up_to();
            eprintln!("error: {name}: {}", InputError::NotUtf8 { offset });
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let submission = Submission {
        language,
        code,
        timeout: args.timeout,
        files: Vec::new(),
        packages: Vec::new(),
        session: None,
        env: pass_through(&policy.env.pass_through, &args.pass_through_env),
    };
    // One run, then exit: a warm pool would only start containers to throw away.
    policy.pool.size = 0;
    if let Some(engine) = args.engine {
        policy.engine = engine;
    }
    let policy_name = policy.name.clone();
    let caller = CliCaller {
        name: name.clone(),
        live: args.format == RunFormat::Text,
        cap: usize::try_from(policy.limits.output.bytes()).unwrap_or(usize::MAX),
        view: std::sync::Mutex::new(None),
    };
    let (submitted, shown, signal) = match execute(Arc::new(policy), submission, &caller) {
        Ok(ended) => ended,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_ENGINE);
        }
    };
    match submitted.result {
        Ok(ran) => report_outcome(
            args.format,
            &name,
            &policy_name,
            language,
            &submitted.findings,
            &ran.outcome,
            shown,
        ),
        Err(NotRun::Invalid(message)) => {
            eprintln!("error: {name}: {message}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(NotRun::Denied) => {
            for finding in &submitted.findings {
                eprintln!("{}", finding.to_line(&name));
            }
            match &submitted.approval {
                // `ask` needs an MCP client that can ask its user; here it is a denial.
                Some(approval) => eprintln!(
                    "{name}: the policy `{policy_name}` asks a person to approve this code ({}), \
                     which only an MCP client can do: nothing was run",
                    approval.rules.join(", ")
                ),
                None => eprintln!("{name}: denied by the policy `{policy_name}`: nothing was run"),
            }
            if args.format == RunFormat::Json {
                print_json(&JsonResult {
                    policy: &policy_name,
                    language,
                    denied: true,
                    findings: &submitted.findings,
                    outcome: None,
                });
            }
            ExitCode::from(1)
        }
        Err(NotRun::Failed(SandboxError::Cancelled)) => {
            eprintln!("{name}: interrupted; the run was killed and its container removed");
            ExitCode::from(128 + signal)
        }
        Err(NotRun::Failed(error)) => {
            eprintln!("error: {error}");
            ExitCode::from(EXIT_ENGINE)
        }
    }
}

/// The terminal as the sandbox's [`Caller`]: nobody can approve an `ask` rule here
/// (it is a denial), the check's warnings are printed before the run, and with `--format
/// text` the output is printed as it comes.
struct CliCaller {
    /// The file as the user named it, for the findings' lines.
    name: String,
    live: bool,
    /// The policy's output cap: the live view prints no more.
    cap: usize,
    view: std::sync::Mutex<Option<LiveView>>,
}

#[async_trait::async_trait]
impl Caller for CliCaller {
    async fn approve(&self, request: &ApprovalRequest<'_>) -> Approval {
        Approval::unavailable(request)
    }

    fn starting(&self, findings: &[Finding], _timeout: std::time::Duration) -> Option<OutputTap> {
        for finding in findings {
            eprintln!("{}", finding.to_line(&self.name));
        }
        if !self.live {
            return None;
        }
        let (view, tap) = LiveView::start(self.cap);
        *self.view.lock().unwrap_or_else(|e| e.into_inner()) = Some(view);
        Some(tap)
    }
}

/// Submits on a runtime of its own; SIGINT and SIGTERM cancel the run, and its
/// container is removed on every path before returning. Returns what became of the
/// submission, what the live view printed, and the signal that stopped it, if one did.
fn execute(
    policy: Arc<crate::policy::Policy>,
    submission: Submission,
    caller: &CliCaller,
) -> Result<(Submitted, Option<Shown>, u8), SandboxError> {
    super::init_logging(false);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| {
            SandboxError::Engine(format!("cannot start the async runtime: {error}"))
        })?;
    Ok(runtime.block_on(async {
        let sandbox = Sandbox::new(policy);
        let cancel = CancellationToken::new();
        // A signal cancels the run, which then kills it and removes its container
        // before `submit` returns; the number becomes the exit status (128 + n).
        let watcher = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let signal = super::termination_signal().await;
                cancel.cancel();
                signal
            })
        };
        let submitted = sandbox.submit(submission, caller, cancel.clone()).await;
        // The run, and with it the tap, is over: the view ends once it has printed.
        let view = caller.view.lock().unwrap_or_else(|e| e.into_inner()).take();
        let shown = match view {
            Some(view) => Some(view.finish().await),
            None => None,
        };
        // A cancelled run was cancelled by the watcher, which returns its signal right
        // after; asking whether it has finished yet would race with that.
        let signal = if cancel.is_cancelled() {
            watcher.await.unwrap_or(2)
        } else {
            watcher.abort();
            2
        };
        sandbox.shutdown().await;
        (submitted, shown, signal)
    }))
}

fn report_outcome(
    format: RunFormat,
    name: &str,
    policy: &str,
    language: Language,
    findings: &[Finding],
    outcome: &RunOutcome,
    shown: Option<Shown>,
) -> ExitCode {
    for finding in &outcome.blocked {
        eprintln!(
            "{} (run time: {})",
            finding.to_line(name),
            finding.layer.as_str()
        );
    }
    match format {
        RunFormat::Text => {
            // The live view printed the output as it came; when it printed all of it,
            // there is nothing to add.
            let complete = shown.is_some_and(|shown| {
                !shown.cut
                    && !outcome.truncated
                    && shown.stdout == outcome.stdout.len()
                    && shown.stderr == outcome.stderr.len()
            });
            let mut stderr = std::io::stderr().lock();
            if !complete {
                if shown.is_some() {
                    let _ = writeln!(
                        stderr,
                        "[the output above is incomplete; the output the sandbox kept follows]"
                    );
                }
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(escape_controls(&outcome.stdout).as_bytes());
                let _ = stdout.flush();
                let _ = stderr.write_all(escape_controls(&outcome.stderr).as_bytes());
            }
            if outcome.timed_out {
                let _ = writeln!(stderr, "[killed: the wall-clock limit was reached]");
            }
            if outcome.oom_killed {
                let _ = writeln!(
                    stderr,
                    "[killed: out of memory (the policy's limits.memory)]"
                );
            }
            // The files themselves reach the host through the policy's export folder.
            for file in &outcome.files {
                let what = if file.figure { "figure" } else { "file" };
                let note = match (&file.exported_to, &file.export_error, &file.omitted) {
                    (Some(to), _, _) => format!("; exported to {to}"),
                    (None, Some(error), _) => format!("; {error}"),
                    (None, None, Some(why)) => format!("; not returned: {why}"),
                    (None, None, None) => "; set the policy's outputs.export to keep it".into(),
                };
                let _ = writeln!(stderr, "[{what} {} ({} bytes){note}]", file.path, file.size);
            }
            if outcome.files_unlisted > 0 {
                let _ = writeln!(stderr, "[and {} more files]", outcome.files_unlisted);
            }
        }
        RunFormat::Json => print_json(&JsonResult {
            policy,
            language,
            denied: false,
            findings,
            outcome: Some(outcome),
        }),
    }
    ExitCode::from(exit_status(outcome.exit_code))
}

/// A process exit status from the snippet's exit code (which the engine reports as a
/// wider integer; a shell would show -1 as 255).
fn exit_status(code: i64) -> u8 {
    (code & 0xFF) as u8
}

fn print_json(result: &JsonResult<'_>) {
    let text = serde_json::to_string_pretty(result).expect("the result serializes");
    println!("{text}");
}

/// Reads the input, refusing more than `limit` bytes without reading them all.
fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        if bytes.len() as u64 > limit {
            return Err(format!(
                "standard input is over the policy's limit of {limit} bytes (limits.code)"
            ));
        }
        return Ok(bytes);
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if meta.is_dir() {
        return Err("is a directory; `run` takes one file".into());
    }
    if meta.len() > limit {
        return Err(format!(
            "{} bytes, over the policy's limit of {limit} bytes (limits.code)",
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("cannot read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_wraps_like_a_shell() {
        assert_eq!(exit_status(0), 0);
        assert_eq!(exit_status(137), 137);
        assert_eq!(exit_status(256 + 3), 3);
        assert_eq!(exit_status(-1), 255);
    }

    #[test]
    fn an_oversize_file_is_refused_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("csm-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("big.py");
        std::fs::write(&file, vec![b'#'; 100]).unwrap();
        let error = read_input(&file, 10).unwrap_err();
        assert!(
            error.contains("100 bytes") && error.contains("limits.code"),
            "{error}"
        );
        assert_eq!(read_input(&file, 100).unwrap().len(), 100);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
