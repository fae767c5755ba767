//! Writes each tool call to the audit log ([`super::log`]), however the call ends: a
//! call the client cancels is dropped by the transport before its answer exists, so
//! the line is written by a guard when it is dropped unfinished (phase `cancelled`).

use super::log::{now_rfc3339, AuditEntry, AuditLog, Phase};
use crate::digest::sha256_hex as sha256;
use crate::mcp::principal::Principal;
use crate::mcp::types::{RunResult, RunStatus};
use crate::policy::{Action, Finding};
use std::sync::Arc;
use std::time::Instant;

/// One call's line, written when it is finished or dropped.
pub struct Pending {
    log: Option<Arc<AuditLog>>,
    entry: AuditEntry,
    started: Instant,
    written: bool,
}

impl Pending {
    /// A call of `tool` (with `code`, in `language`, in `session`) under the policy
    /// named `policy` whose effective form hashes to `policy_sha256`, made by
    /// `principal` (HTTP; `None` over stdio); `log` is `None` when the policy keeps no
    /// log, and then nothing is written.
    pub fn start(
        log: Option<Arc<AuditLog>>,
        tool: &str,
        language: Option<&str>,
        session: Option<&str>,
        code: Option<&str>,
        policy: (&str, &str),
        principal: Option<&Principal>,
    ) -> Pending {
        Pending {
            entry: AuditEntry {
                time: String::new(),
                principal: principal.map(|p| p.name.to_string()),
                auth: principal.map(|p| p.via.as_str().to_string()),
                tool: tool.to_string(),
                language: language.map(str::to_string),
                session: session.map(str::to_string),
                code_sha256: log.as_ref().and(code).map(|code| sha256(code.as_bytes())),
                policy: policy.0.to_string(),
                policy_sha256: policy.1.to_string(),
                verdict: None,
                findings: Vec::new(),
                stopped_by: None,
                phase: Phase::Cancelled,
                exit_code: None,
                duration_ms: 0,
                stdout_bytes: 0,
                stderr_bytes: 0,
                message: None,
            },
            log,
            started: Instant::now(),
            written: false,
        }
    }

    /// A run tool's result.
    pub fn run(mut self, result: &RunResult) {
        let entry = &mut self.entry;
        entry.phase = match result.status {
            RunStatus::Completed if result.timed_out => Phase::TimedOut,
            RunStatus::Completed if result.oom_killed => Phase::Oom,
            RunStatus::Completed => Phase::Completed,
            RunStatus::Blocked => Phase::Blocked,
            RunStatus::Denied | RunStatus::InvalidInput | RunStatus::PolicyError => Phase::Refused,
            RunStatus::Cancelled => Phase::Cancelled,
            RunStatus::EngineError | RunStatus::InstallFailed | RunStatus::ShuttingDown => {
                Phase::Failed
            }
        };
        entry.verdict = match result.status {
            RunStatus::Denied => Some("denied".into()),
            RunStatus::Completed | RunStatus::Blocked => Some("allowed".into()),
            _ => None,
        };
        if result
            .approval
            .as_ref()
            .is_some_and(|a| a.answer != crate::sandbox::Answer::Approved)
        {
            entry.phase = Phase::Declined;
        }
        entry.stopped_by = match entry.phase {
            Phase::Declined => Some("approval".into()),
            Phase::Refused if result.status == RunStatus::Denied => Some("static".into()),
            Phase::Blocked => stopping_layer(&result.findings),
            Phase::TimedOut => Some("limits.timeout".into()),
            Phase::Oom => Some("limits.memory".into()),
            _ => None,
        };
        entry.findings = result.findings.clone();
        entry.exit_code = result.exit_code;
        entry.stdout_bytes = result.stdout.len();
        entry.stderr_bytes = result.stderr.len();
        entry.message = result.message.clone();
        self.write();
    }

    /// A call that ran nothing: `check_code` (with its verdict) or `end_session`.
    pub fn checked(mut self, verdict: Option<bool>, findings: &[Finding], message: Option<String>) {
        self.entry.phase = if message.is_some() {
            Phase::Refused
        } else {
            Phase::Checked
        };
        self.entry.verdict =
            verdict.map(|allowed| if allowed { "allowed" } else { "denied" }.into());
        self.entry.findings = findings.to_vec();
        self.entry.message = message;
        self.write();
    }

    fn write(&mut self) {
        self.written = true;
        let Some(log) = &self.log else {
            return;
        };
        self.entry.time = now_rfc3339();
        self.entry.duration_ms = self.started.elapsed().as_millis() as u64;
        log.record(&self.entry);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.written {
            self.entry.message = Some("the client cancelled the call".into());
            self.write();
        }
    }
}

/// The run-time layer of the first deny finding that is not the static check's.
fn stopping_layer(findings: &[Finding]) -> Option<String> {
    findings
        .iter()
        .find(|f| f.action == Action::Deny && !f.layer.is_static())
        .map(|f| f.layer.as_str().to_string())
}
