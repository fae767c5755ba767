//! The three tools: check, then (for the run tools) dispatch to the sandbox and shape
//! the outcome into a tool result with both structured content and text.
//!
//! Every failure a model can do something about is a tool result with `isError: true`
//! (a denial, an oversize snippet, a daemon that is down), never a JSON-RPC error: a
//! protocol error would reach the client's code, not the model that wrote the snippet.

use super::approval;
use super::audit_trail;
use super::caller::Refusal;
use super::progress::ProgressReporter;
use super::render;
use super::types::{
    CheckCodeArgs, CheckResult, EndSessionArgs, EndSessionResult, RunCodeArgs, RunResult,
    RunStatus, SessionState,
};
use super::CodeSandboxServer;
use crate::analysis::Language;
use crate::policy::{InputError, PolicyEngine, Report};
use crate::sandbox::{run_timeout, RunRequest, SandboxError};
use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use serde::Serialize;

// The descriptions and annotations written here are placeholders: `CodeSandboxServer::new`
// replaces them with ones built from the policy in force (see `describe`).
#[tool_router(vis = "pub(super)")]
impl CodeSandboxServer {
    /// Run Python code in the sandbox.
    #[tool(name = "run_python_code", output_schema = schema_for_output::<RunResult>())]
    async fn run_python_code(
        &self,
        Parameters(args): Parameters<RunCodeArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let audit = self.audit_call(
            "run_python_code",
            Some(Language::Python),
            args.session.as_deref(),
            Some(&args.code),
        );
        let result = self.run_code(Language::Python, args, context).await;
        audit.run(&result);
        self.run_tool_result(&result)
    }

    /// Run JavaScript code in the sandbox.
    #[tool(name = "run_javascript_code", output_schema = schema_for_output::<RunResult>())]
    async fn run_javascript_code(
        &self,
        Parameters(args): Parameters<RunCodeArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let audit = self.audit_call(
            "run_javascript_code",
            Some(Language::JavaScript),
            args.session.as_deref(),
            Some(&args.code),
        );
        let result = self.run_code(Language::JavaScript, args, context).await;
        audit.run(&result);
        self.run_tool_result(&result)
    }

    /// End a session and remove its container.
    #[tool(name = "end_session", output_schema = schema_for_output::<EndSessionResult>())]
    async fn end_session(&self, Parameters(args): Parameters<EndSessionArgs>) -> CallToolResult {
        let audit = self.audit_call("end_session", None, Some(&args.session), None);
        if let Some(error) = &self.policy_error {
            let message = policy_error_message(error);
            audit.checked(None, &[], Some(message.clone()));
            return CallToolResult::error(vec![ContentBlock::text(message)]);
        }
        let ended = self
            .sandbox
            .end_session(&self.connection, &args.session)
            .await;
        self.caller.session_ended(&self.connection, &args.session);
        let text = if ended {
            format!(
                "The session `{}` has ended; its container is gone.",
                args.session
            )
        } else {
            format!("No session `{}` was open.", args.session)
        };
        audit.checked(None, &[], None);
        let result = EndSessionResult {
            session: args.session,
            ended,
        };
        tool_result(&result, text, false)
    }

    /// Check code against the sandbox policy without running it.
    #[tool(name = "check_code", output_schema = schema_for_output::<CheckResult>())]
    async fn check_code(&self, Parameters(args): Parameters<CheckCodeArgs>) -> CallToolResult {
        let audit = self.audit_call("check_code", Some(args.language), None, Some(&args.code));
        if let Some(error) = &self.policy_error {
            let message = policy_error_message(error);
            audit.checked(None, &[], Some(message.clone()));
            return CallToolResult::error(vec![ContentBlock::text(message)]);
        }
        if let Some(reason) = args.invalid_utf8 {
            audit.checked(None, &[], Some(reason.clone()));
            return input_error(&reason);
        }
        match check(self.engine.clone(), args.language, args.code).await {
            Ok(report) => {
                // Code an `ask` rule holds runs only after a person's yes: not "allowed".
                let allowed = !report.denied() && report.asks().is_empty();
                audit.checked(Some(allowed), &report.findings, None);
                let result = CheckResult {
                    allowed,
                    findings: report.findings,
                    language: args.language,
                    policy: self.engine.policy().name.clone(),
                };
                tool_result(&result, render::check_result(&result), false)
            }
            Err(error) => {
                audit.checked(None, &[], Some(error.to_string()));
                input_error(&error.to_string())
            }
        }
    }
}

impl CodeSandboxServer {
    /// Check, then run: the body of both run tools.
    async fn run_code(
        &self,
        language: Language,
        args: RunCodeArgs,
        context: RequestContext<RoleServer>,
    ) -> RunResult {
        let policy = self.engine.policy();
        let not_run = |status: RunStatus, message: String| {
            let mut result = RunResult::not_run(status, language, &policy.name);
            result.message = Some(message);
            result
        };
        if let Some(error) = &self.policy_error {
            return not_run(RunStatus::PolicyError, policy_error_message(error));
        }
        if let Some(reason) = args.invalid_utf8 {
            return not_run(RunStatus::InvalidInput, reason);
        }
        let limit = policy.limits.timeout();
        let timeout = match run_timeout(args.timeout, limit) {
            Ok(timeout) => timeout,
            Err(message) => return not_run(RunStatus::InvalidInput, message),
        };
        let files = match args
            .files
            .iter()
            .map(|file| file.decode())
            .collect::<Result<Vec<_>, _>>()
            .and_then(|files| {
                crate::sandbox::files::check(&files, policy.limits.tmpfs).map(|()| files)
            }) {
            Ok(files) => files,
            Err(message) => return not_run(RunStatus::InvalidInput, message),
        };
        let (allowed, _) = policy.packages.for_language(language);
        let key = match language {
            Language::Python => "packages.python",
            Language::JavaScript => "packages.javascript",
        };
        let packages = match crate::policy::packages::resolve(&args.packages, allowed, key) {
            Ok(packages) => packages,
            Err(message) => return not_run(RunStatus::InvalidInput, message),
        };
        if !packages.is_empty() && args.session.is_some() {
            return not_run(
                RunStatus::InvalidInput,
                "packages cannot be installed into a session yet: run without `session`".into(),
            );
        }
        // A session's call is checked together with the calls it follows, so that a
        // name one call binds is judged where the next one uses it.
        let history = args
            .session
            .as_deref()
            .and_then(|name| self.sandbox.session_history(&self.connection, name))
            .unwrap_or_default();
        let report =
            match check_after(self.engine.clone(), language, history, args.code.clone()).await {
                Ok(report) => report,
                Err(error) => return not_run(RunStatus::InvalidInput, error.to_string()),
            };
        if report.denied() {
            let mut result = RunResult::not_run(RunStatus::Denied, language, &policy.name);
            result.message = Some("the sandbox policy denied this code; see findings".to_string());
            result.findings = report.findings;
            return result;
        }
        // `ask`: a person approves this exact code, or it is a denial.
        let asks = report.asks();
        let approval = if asks.is_empty() {
            None
        } else {
            let approval =
                approval::ask(&context.peer, language, &args.code, &report.findings, &asks).await;
            if approval.answer != approval::Answer::Approved {
                let mut result = RunResult::not_run(RunStatus::Denied, language, &policy.name);
                result.message = Some(approval.refusal());
                result.findings = report.findings;
                result.approval = Some(approval);
                return result;
            }
            Some(approval)
        };

        // The run stops when the client cancels this request or the server shuts down.
        let cancel = self.stop.child_token();
        let _link = {
            let request = context.ct.clone();
            let cancel = cancel.clone();
            AbortOnDrop(tokio::spawn(async move {
                request.cancelled().await;
                cancel.cancel();
            }))
        };
        let (_progress, tap) = ProgressReporter::start(
            context.peer.clone(),
            context.meta.get_progress_token(),
            timeout,
        );
        let request = RunRequest {
            kind: report.kind,
            code: args.code,
            timeout: Some(timeout),
            env: self.env.to_vec(),
            tap,
            files,
            approved: approval
                .as_ref()
                .map(|a| a.rules.clone())
                .unwrap_or_default(),
            packages,
        };
        // The principal's allowance (HTTP): a new session past it is refused, and a
        // run waits for one of its run slots, cancellable like the run.
        let _admitted = match self
            .caller
            .admit(
                &self.connection,
                args.session.as_deref(),
                &self.sandbox,
                &cancel,
            )
            .await
        {
            Ok(admitted) => admitted,
            Err(Refusal::Sessions(message) | Refusal::Busy(message)) => {
                return not_run(RunStatus::InvalidInput, message)
            }
            Err(Refusal::Cancelled) => {
                return not_run(
                    RunStatus::Cancelled,
                    "the call was cancelled before it ran".into(),
                )
            }
        };
        tracing::debug!(%language, timeout_ms = timeout.as_millis() as u64, "dispatching to the sandbox");
        let ran = match &args.session {
            None => self
                .sandbox
                .run(request, cancel)
                .await
                .map(|outcome| (outcome, None)),
            Some(name) => self
                .sandbox
                .run_in_session(&self.connection, name, request, cancel)
                .await
                .map(|call| {
                    let state = SessionState {
                        name: name.clone(),
                        call: call.call,
                        ended: call.ended,
                    };
                    (call.outcome, Some(state))
                }),
        };
        match ran {
            Ok((outcome, session)) => {
                let mut result =
                    RunResult::completed(outcome, report.findings, language, &policy.name);
                result.session = session;
                result.approval = approval;
                result
            }
            Err(error @ SandboxError::Session(_)) => {
                not_run(RunStatus::InvalidInput, error.to_string())
            }
            Err(SandboxError::Cancelled) => not_run(
                RunStatus::Cancelled,
                "the call was cancelled and the run killed".into(),
            ),
            Err(error @ SandboxError::ShuttingDown) => {
                not_run(RunStatus::ShuttingDown, engine_error_message(&error))
            }
            Err(error) => {
                tracing::warn!(%error, "the sandbox could not run a snippet");
                not_run(RunStatus::EngineError, engine_error_message(&error))
            }
        }
    }
}

/// The policy check, off the async workers: parsing a large snippet takes a while.
async fn check(
    engine: PolicyEngine,
    language: Language,
    code: String,
) -> Result<Report, InputError> {
    check_after(engine, language, String::new(), code).await
}

/// [`PolicyEngine::check_continuation`], off the async workers.
async fn check_after(
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

/// An engine failure in words a user can act on; the server stays up either way.
fn engine_error_message(error: &SandboxError) -> String {
    let hint = match error {
        SandboxError::EngineUnreachable(_) => {
            "Start Docker (or Podman) on this machine, then call the tool again: the server \
             keeps running and connects on the next call."
        }
        SandboxError::ImageUnavailable(_) => {
            "Pull the image (docker pull IMAGE) or set the policy's `images` to one that exists \
             locally, then call the tool again."
        }
        SandboxError::LayerUnavailable(_) => {
            "The policy needs this enforcement at run time and it is not available, so nothing \
             runs until the image or the policy changes."
        }
        SandboxError::ShuttingDown => {
            "The server is shutting down and runs nothing more; do not retry on this connection."
        }
        SandboxError::Engine(_) | SandboxError::Cancelled => "Calling the tool again may succeed.",
        SandboxError::Session(_) => "Nothing was run.",
    };
    format!("the sandbox could not run the code: {error}. {hint}")
}

impl CodeSandboxServer {
    /// The audit line of a call now starting (written when it ends, or is dropped).
    fn audit_call(
        &self,
        tool: &str,
        language: Option<Language>,
        session: Option<&str>,
        code: Option<&str>,
    ) -> audit_trail::Pending {
        audit_trail::Pending::start(
            self.audit.clone(),
            tool,
            language.map(Language::name),
            session,
            code,
            (&self.policy().name, &self.policy_sha256),
            self.caller.principal(),
        )
    }

    /// A run tool's result: the structured result, its text (with small text files
    /// inline), then the returned images and the other files as embedded resources.
    fn run_tool_result(&self, result: &RunResult) -> CallToolResult {
        let inline = self.sandbox.policy().outputs.inline_text.bytes();
        let mut call = tool_result(
            result,
            render::run_result(result, inline),
            result.is_error(),
        );
        call.content.extend(render::file_blocks(result, inline));
        call
    }
}

/// A tool result with `value` as structured content and `text` as its rendering.
fn tool_result<T: Serialize>(value: &T, text: String, is_error: bool) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(structured) => {
            let mut result = if is_error {
                CallToolResult::structured_error(structured)
            } else {
                CallToolResult::structured(structured)
            };
            result.content = vec![ContentBlock::text(text)];
            result
        }
        Err(error) => {
            CallToolResult::error(vec![ContentBlock::text(format!("internal error: {error}"))])
        }
    }
}

/// What every call answers while the policy file has errors.
pub(super) fn policy_error_message(errors: &str) -> String {
    format!(
        "The sandbox's policy file has errors, so nothing can be checked or run until \
         they are fixed and the MCP server is restarted. Tell the user; the errors are:\n{errors}"
    )
}

/// A `check_code` call whose input cannot be checked at all.
fn input_error(reason: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "The code could not be checked: {reason}"
    ))])
}

/// Aborts a helper task when the call it serves is over.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
