//! The three tools: check, then (for the run tools) dispatch to the sandbox and shape
//! the outcome into a tool result with both structured content and text.
//!
//! Every failure a model can do something about is a tool result with `isError: true`
//! (a denial, an oversize snippet, a daemon that is down), never a JSON-RPC error: a
//! protocol error would reach the client's code, not the model that wrote the snippet.

use super::approval;
use super::audit;
use super::principal::Refusal;
use super::progress::ProgressReporter;
use super::render;
use super::types::{
    CheckCodeArgs, CheckResult, EndSessionArgs, EndSessionResult, RunCodeArgs, RunResult,
    RunStatus, SessionState,
};
use super::CodeSandboxServer;
use crate::analysis::Language;
use crate::policy::{Finding, InputError, PolicyEngine, Report};
use crate::sandbox::{
    check_after, Approval, ApprovalRequest, Caller, NotRun, OutputTap, SandboxError, SessionName,
    Submission,
};
use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};
use serde::Serialize;
use std::time::Duration;

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
        self.allowance
            .session_ended(&self.connection, &args.session);
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
    /// The body of both run tools: the sandbox's one check → ask → run path, with this
    /// client as the caller (its user approves, its progress token hears the output).
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
        let files = match args.files.iter().map(|file| file.decode()).collect() {
            Ok(files) => files,
            Err(message) => return not_run(RunStatus::InvalidInput, message),
        };
        let submission = Submission {
            language,
            code: args.code,
            timeout: args.timeout,
            files,
            packages: args.packages,
            session: args.session.as_ref().map(|name| SessionName {
                owner: self.connection.to_string(),
                name: name.clone(),
            }),
            env: self.env.to_vec(),
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
        let caller = McpCaller {
            context: &context,
            progress: std::sync::Mutex::new(None),
        };
        // The principal's allowance (HTTP): a new session past it is refused, and a
        // run waits for one of its run slots, cancellable like the run.
        let _admitted = match self
            .allowance
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
        let submitted = self.sandbox.submit(submission, &caller, cancel).await;
        let mut result = match submitted.result {
            Ok(ran) => {
                let mut result =
                    RunResult::completed(ran.outcome, submitted.findings, language, &policy.name);
                result.session = ran.session_call.map(|(call, ended)| SessionState {
                    name: args.session.clone().unwrap_or_default(),
                    call,
                    ended,
                });
                result
            }
            Err(NotRun::Invalid(message)) => not_run(RunStatus::InvalidInput, message),
            Err(NotRun::Denied) => {
                let mut result = RunResult::not_run(RunStatus::Denied, language, &policy.name);
                result.message = Some(match &submitted.approval {
                    Some(approval) => approval.refusal(),
                    None => "the sandbox policy denied this code; see findings".to_string(),
                });
                result.findings = submitted.findings;
                result
            }
            Err(NotRun::Failed(SandboxError::Cancelled)) => not_run(
                RunStatus::Cancelled,
                "the call was cancelled and the run killed".into(),
            ),
            Err(NotRun::Failed(error @ SandboxError::ShuttingDown)) => {
                not_run(RunStatus::ShuttingDown, engine_error_message(&error))
            }
            Err(NotRun::Failed(error @ SandboxError::InstallFailed(_))) => {
                tracing::info!(%error, "a run's packages could not be installed");
                not_run(RunStatus::InstallFailed, engine_error_message(&error))
            }
            Err(NotRun::Failed(error)) => {
                tracing::warn!(%error, "the sandbox could not run a snippet");
                not_run(RunStatus::EngineError, engine_error_message(&error))
            }
        };
        result.approval = submitted.approval;
        result
    }
}

/// The MCP client of one call, as the sandbox's [`Caller`]: its user approves code an
/// `ask` rule holds (elicitation), and its progress token hears the run's output.
struct McpCaller<'a> {
    context: &'a RequestContext<RoleServer>,
    /// Reports progress until the call is over (dropped with the caller).
    progress: std::sync::Mutex<Option<ProgressReporter>>,
}

#[async_trait::async_trait]
impl Caller for McpCaller<'_> {
    async fn approve(&self, request: &ApprovalRequest<'_>) -> Approval {
        approval::ask(&self.context.peer, request).await
    }

    fn starting(&self, _findings: &[Finding], timeout: Duration) -> Option<OutputTap> {
        let (reporter, tap) = ProgressReporter::start(
            self.context.peer.clone(),
            self.context.meta.get_progress_token(),
            timeout,
        );
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = Some(reporter);
        tap
    }
}

/// The policy check, off the async workers: parsing a large snippet takes a while.
async fn check(
    engine: PolicyEngine,
    language: Language,
    code: String,
) -> Result<Report, InputError> {
    check_after(engine, language, String::new(), code, Vec::new()).await
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
        SandboxError::InstallFailed(_) => {
            "Nothing was run. Calling again with the same packages fails the same way: run \
             without them, ask for other ones (or other versions), or tell the user what the \
             installer said (an index the sandbox cannot reach, a certificate it does not \
             trust: see the policy's `packages` and `certificates`)."
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
    ) -> audit::Pending {
        audit::Pending::start(
            self.audit.clone(),
            tool,
            language.map(Language::name),
            session,
            code,
            (&self.policy().name, &self.policy_sha256),
            self.allowance.principal(),
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
