//! `ask`: a person approves one exact run. When the worst of a snippet's findings is a
//! rule whose action is `ask`, the server asks the person at the client, through MCP
//! elicitation, showing what the policy found and everything that will run, with its
//! hash ([`super::approval_message`]). Only a yes runs it, once: the next call, even with
//! the same code, asks again, and nothing the agent sends can answer for the person. No,
//! a dismissal, a client that cannot ask, or no answer in [`APPROVAL_WAIT`] is a denial,
//! and the result says which.

use crate::sandbox::{Answer, Approval, ApprovalRequest};
use rmcp::model::{BooleanSchema, ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use rmcp::RoleServer;
use std::time::Duration;

/// How long a person has to answer.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// Asks the person at `peer`'s end to approve everything `request` will run.
pub async fn ask(peer: &Peer<RoleServer>, request: &ApprovalRequest<'_>) -> Approval {
    let mut approval = Approval::unavailable(request);
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
    let question = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: super::approval_message::message(request, &approval),
        requested_schema: schema,
    };
    approval.answer = match peer
        .create_elicitation_with_timeout(question, Some(APPROVAL_WAIT))
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
