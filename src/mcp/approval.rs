//! `ask`: a person approves one exact snippet. When the worst of a snippet's findings is
//! a rule whose action is `ask`, the server asks the person at the client, through MCP
//! elicitation, showing what the policy found (rule, line, the code there), the whole
//! code and its hash. Only a yes runs it, once: the next call, even with the same code, asks
//! again, and nothing the agent sends can answer for the person. No, a dismissal, a
//! client that cannot ask, or no answer in [`APPROVAL_WAIT`] is a denial, and the result
//! says which.

use crate::analysis::Language;
use crate::policy::{Action, Finding};
use crate::sandbox::{Answer, Approval};
use rmcp::model::{BooleanSchema, ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use rmcp::RoleServer;
use std::time::Duration;

/// How long a person has to answer.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// Asks the person at `peer`'s end to approve `code`, showing `findings`.
pub async fn ask(
    peer: &Peer<RoleServer>,
    language: Language,
    code: &str,
    findings: &[Finding],
    rules: &[&str],
) -> Approval {
    let mut approval = Approval::unavailable(code, rules);
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return approval;
    }
    let schema = ElicitationSchema::builder()
        .required_bool_property("approve", |b: BooleanSchema| {
            b.title("Run this code once").with_default(false)
        })
        .build_unchecked();
    let request = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(language, code, findings, &approval.code_sha256),
        requested_schema: schema,
    };
    approval.answer = match peer
        .create_elicitation_with_timeout(request, Some(APPROVAL_WAIT))
        .await
    {
        Ok(result) => match result.action {
            ElicitationAction::Accept
                if result
                    .content
                    .as_ref()
                    .and_then(|c| c.get("approve"))
                    .and_then(|v| v.as_bool())
                    == Some(true) =>
            {
                Answer::Approved
            }
            ElicitationAction::Cancel => Answer::Cancelled,
            // Accept without a yes, Decline, and whatever a later protocol adds.
            _ => Answer::Declined,
        },
        Err(rmcp::ServiceError::Timeout { .. }) => Answer::TimedOut,
        Err(error) => {
            tracing::warn!(%error, "asking for approval failed");
            Answer::Failed
        }
    };
    approval
}

/// What the person reads: what the policy found, where, the code around it, the hash.
fn message(language: Language, code: &str, findings: &[Finding], sha256: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut text = format!(
        "The agent wants to run this {} code, which the sandbox policy runs only with your \
         approval:\n",
        language.spec().display
    );
    for finding in findings.iter().filter(|f| f.action == Action::Ask) {
        text.push_str(&format!(
            "\n• line {}: {} — {}\n",
            finding.line, finding.rule, finding.message
        ));
        let at = finding.line as usize;
        for number in at.saturating_sub(1).max(1)..=(at + 1).min(lines.len()) {
            text.push_str(&format!("    {number:>4} | {}\n", lines[number - 1]));
        }
    }
    // The whole code, so that the yes is to what runs, not to a few lines of it.
    text.push_str(&format!("\nThe whole code ({} lines):\n", lines.len()));
    for (index, line) in lines.iter().enumerate().take(SHOWN_LINES) {
        text.push_str(&format!("    {:>4} | {line}\n", index + 1));
    }
    if lines.len() > SHOWN_LINES {
        text.push_str(&format!(
            "    … {} more lines, not shown: say no unless you know this code\n",
            lines.len() - SHOWN_LINES
        ));
    }
    text.push_str(&format!(
        "\nIts sha256 is {sha256}. Approving runs this exact code once."
    ));
    text
}

/// How many lines of the code the question shows.
const SHOWN_LINES: usize = 200;
