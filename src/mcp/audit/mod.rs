//! The audit log (`audit: { path: FILE }` in the policy, opt-in): one JSON line per
//! tool call, so that "did it run, and what did it do?" has an answer after the fact.
//! `log` is the file and the line's schema; `call` records one call, however it ends.

mod call;
mod log;

pub use call::Pending;
pub use log::{AuditEntry, AuditLog, Phase};
