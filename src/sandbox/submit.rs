//! One path from a request to a result, for every caller (the MCP tools, the `run`
//! command): the inputs checked (time limit, files, packages), the code checked against
//! the policy (in a session, together with the calls it follows, so that a name one call
//! binds is judged where the next one uses it), a person asked when an `ask` rule holds
//! it, and only then the run. What differs between callers (how a person is asked, where
//! output goes as it comes) is the [`Caller`] they hand in.

use super::files_in::{self, InputFile};
use super::{run_timeout, OutputTap, RunOutcome, RunRequest, Sandbox, SandboxError};
use crate::analysis::Language;
use crate::policy::{Finding, InputError, PolicyEngine, Report};
use async_trait::async_trait;
use serde::Serialize;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What a caller asks to run.
#[derive(Debug, Clone)]
pub struct Submission {
    pub language: Language,
    pub code: String,
    /// The wall-clock limit wished for, in seconds; the policy's `limits.timeout` caps
    /// it, and no wish is the policy's.
    pub timeout: Option<f64>,
    /// Files to write under `/sandbox` before the code runs.
    pub files: Vec<InputFile>,
    /// Package specs to have installed (each must be one the policy's `packages:`
    /// lists).
    pub packages: Vec<String>,
    /// Run in this session (`None`: a fresh box).
    pub session: Option<SessionName>,
    /// Variables set in the sandbox.
    pub env: Vec<(String, String)>,
}

/// A session, by its client and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionName {
    pub owner: String,
    pub name: String,
}

/// How an approval request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The person said yes: the code ran, once.
    Approved,
    /// The person said no.
    Declined,
    /// The person dismissed the question.
    Cancelled,
    /// The client cannot ask its user (no elicitation).
    Unavailable,
    /// No answer came in time.
    TimedOut,
    /// Asking failed (the client answered with an error).
    Failed,
}

/// What a result says of an approval that was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Approval {
    /// The `ask` rules the code matched.
    pub rules: Vec<String>,
    pub answer: Answer,
    /// sha256 of the code the person was shown (and that ran, if approved).
    pub code_sha256: String,
    /// sha256 of everything the person was shown that runs: the code, the files handed
    /// in (names, sizes and contents), the packages installed first and the session
    /// (see [`ApprovalRequest::sha256`]).
    pub request_sha256: String,
}

impl Approval {
    /// An approval nobody could give: the caller has no one to ask.
    pub fn unavailable(request: &ApprovalRequest<'_>) -> Approval {
        Approval {
            rules: request.rules.iter().map(|rule| rule.to_string()).collect(),
            answer: Answer::Unavailable,
            code_sha256: crate::digest::sha256_hex(request.code.as_bytes()),
            request_sha256: request.sha256(),
        }
    }

    /// Why the code did not run, for the result's message.
    pub fn refusal(&self) -> String {
        let why = match self.answer {
            Answer::Approved => return String::new(),
            Answer::Declined => "the person declined",
            Answer::Cancelled => "the person dismissed the question",
            Answer::Unavailable => "this client cannot ask its user (it has no MCP elicitation)",
            Answer::TimedOut => "no answer came in time",
            Answer::Failed => "asking the person failed",
        };
        format!(
            "the sandbox policy asks a person to approve this code ({}), and {why}: nothing \
             was run. Rewrite the code without what the findings name, or ask the user to \
             approve it when asked",
            self.rules.join(", ")
        )
    }
}

/// What a person is asked to approve: everything that will run (the code, the files
/// written before it, the packages installed first, the session it runs in), and why
/// they are asked (the findings of the `ask` rules).
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    pub language: Language,
    pub code: &'a str,
    pub files: &'a [InputFile],
    /// Package specs as they will be installed.
    pub packages: &'a [String],
    /// The session's name, when the code runs in one.
    pub session: Option<&'a str>,
    pub findings: &'a [Finding],
    /// The `ask` rules the code matched.
    pub rules: &'a [&'a str],
}

impl ApprovalRequest<'_> {
    /// sha256 of what will run, in one canonical form: the JSON object
    /// `{"language", "code_sha256", "files": [{"path", "size", "sha256"}], "packages",
    /// "session"}` with keys in that order, written compactly.
    pub fn sha256(&self) -> String {
        use crate::digest::sha256_hex;
        let files: Vec<serde_json::Value> = self
            .files
            .iter()
            .map(|file| {
                serde_json::json!({
                    "path": file.path,
                    "size": file.bytes.len(),
                    "sha256": sha256_hex(&file.bytes),
                })
            })
            .collect();
        // serde_json's maps keep keys sorted; this form is spelled out to be stable.
        let canonical = format!(
            "{{\"language\":{},\"code_sha256\":{},\"files\":{},\"packages\":{},\"session\":{}}}",
            serde_json::Value::from(self.language.name()),
            serde_json::Value::from(sha256_hex(self.code.as_bytes())),
            serde_json::Value::from(files),
            serde_json::Value::from(self.packages.to_vec()),
            serde_json::to_string(&self.session).expect("a name serializes"),
        );
        sha256_hex(canonical.as_bytes())
    }
}

/// The party a submission comes from: who can approve code an `ask` rule holds, and
/// who watches the run.
#[async_trait]
pub trait Caller: Send + Sync {
    /// Asks a person to approve everything `request` will run, showing why.
    async fn approve(&self, request: &ApprovalRequest<'_>) -> Approval;

    /// The check passed (with `findings`, warnings at most) and the run starts now,
    /// under `timeout`: where its output should also go as it is written, if anywhere.
    fn starting(&self, findings: &[Finding], timeout: Duration) -> Option<OutputTap>;
}

/// What became of a submission.
#[derive(Debug)]
pub struct Submitted {
    /// The policy check's findings (empty when the input was unusable).
    pub findings: Vec<Finding>,
    /// The approval asked for, when an `ask` rule held the code.
    pub approval: Option<Approval>,
    pub result: Result<Ran, NotRun>,
}

/// A run that happened (whatever its exit code).
#[derive(Debug)]
pub struct Ran {
    pub outcome: RunOutcome,
    /// In a session: the call's number in it, and why the session ended with it, if it
    /// did.
    pub session_call: Option<(u64, Option<String>)>,
}

/// Why nothing ran.
#[derive(Debug)]
pub enum NotRun {
    /// The input is unusable (too large, a bad time limit, files, packages, a session
    /// that cannot take the call): the message says why.
    Invalid(String),
    /// The policy refused the code (see the findings), or nobody approved it (see the
    /// approval).
    Denied,
    /// The sandbox could not run it (engine, cancellation, shutdown).
    Failed(SandboxError),
}

impl Sandbox {
    /// Checks `submission` against the policy and runs it if the policy (and, for an
    /// `ask` rule, a person through `caller`) allows. `cancel` stops it at any point.
    pub async fn submit(
        &self,
        submission: Submission,
        caller: &dyn Caller,
        cancel: CancellationToken,
    ) -> Submitted {
        let not_run = |reason: NotRun| Submitted {
            findings: Vec::new(),
            approval: None,
            result: Err(reason),
        };
        let policy = self.policy();
        let timeout = match run_timeout(submission.timeout, policy.limits.timeout()) {
            Ok(timeout) => timeout,
            Err(message) => return not_run(NotRun::Invalid(message)),
        };
        if let Err(message) = files_in::check(&submission.files, policy.limits.tmpfs) {
            return not_run(NotRun::Invalid(message));
        }
        let language = submission.language;
        let (allowed, _) = policy.packages.for_language(language);
        let key = match language {
            Language::Python => "packages.python",
            Language::JavaScript => "packages.javascript",
        };
        let packages = match crate::policy::packages::resolve(&submission.packages, allowed, key) {
            Ok(packages) => packages,
            Err(message) => return not_run(NotRun::Invalid(message)),
        };
        if !packages.is_empty() && submission.session.is_some() {
            return not_run(NotRun::Invalid(
                "packages cannot be installed into a session yet: run without `session`".into(),
            ));
        }
        let history = submission
            .session
            .as_ref()
            .and_then(|session| self.session_history(&session.owner, &session.name))
            .unwrap_or_default();
        let report = match check_after(
            self.core.engine().clone(),
            language,
            history,
            submission.code.clone(),
        )
        .await
        {
            Ok(report) => report,
            Err(error) => return not_run(NotRun::Invalid(error.to_string())),
        };
        if report.denied() {
            return Submitted {
                findings: report.findings,
                approval: None,
                result: Err(NotRun::Denied),
            };
        }
        // `ask`: a person approves this exact code, or it is a denial.
        let asks = report.asks();
        let approval = if asks.is_empty() {
            None
        } else {
            let request = ApprovalRequest {
                language,
                code: &submission.code,
                files: &submission.files,
                packages: &packages,
                session: submission.session.as_ref().map(|s| s.name.as_str()),
                findings: &report.findings,
                rules: &asks,
            };
            let approval = caller.approve(&request).await;
            if approval.answer != Answer::Approved {
                return Submitted {
                    findings: report.findings,
                    approval: Some(approval),
                    result: Err(NotRun::Denied),
                };
            }
            Some(approval)
        };
        let tap = caller.starting(&report.findings, timeout);
        let request = RunRequest {
            kind: report.kind,
            code: submission.code,
            timeout: Some(timeout),
            env: submission.env,
            tap,
            files: submission.files,
            approved: approval
                .as_ref()
                .map(|approval| approval.rules.clone())
                .unwrap_or_default(),
            packages,
        };
        tracing::debug!(%language, timeout_ms = timeout.as_millis() as u64, "dispatching to the sandbox");
        let ran = match &submission.session {
            None => self.run(request, cancel).await.map(|outcome| Ran {
                outcome,
                session_call: None,
            }),
            Some(session) => self
                .run_in_session(&session.owner, &session.name, request, cancel)
                .await
                .map(|call| Ran {
                    outcome: call.outcome,
                    session_call: Some((call.call, call.ended)),
                }),
        };
        Submitted {
            findings: report.findings,
            approval,
            result: ran.map_err(|error| match error {
                SandboxError::Session(error) => NotRun::Invalid(error.to_string()),
                error => NotRun::Failed(error),
            }),
        }
    }
}

/// [`PolicyEngine::check_continuation`], off the async workers: parsing a large
/// snippet takes a while.
pub async fn check_after(
    engine: PolicyEngine,
    language: Language,
    before: String,
    code: String,
) -> Result<Report, InputError> {
    let checked =
        tokio::task::spawn_blocking(move || engine.check_continuation(language, &before, &code))
            .await;
    match checked {
        Ok(result) => result,
        Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
    }
}
