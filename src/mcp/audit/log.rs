//! The audit log's file and the schema of its lines: what a line holds is
//! [`AuditEntry`]; docs/audit.md documents it as the schema.
//!
//! Lines are appended with one write each to a file opened for appending, so lines of
//! calls made at once (and of several servers sharing a file) never interleave. The
//! file is opened when the server starts: one that cannot be written is an error then
//! (every call says so), not calls silently left out of the record.

use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// How far a call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Nothing ran: the policy denied the code, or the input was unusable.
    Refused,
    /// A person was asked to approve the code (an `ask` rule) and did not say yes.
    Declined,
    /// The call only checked (`check_code`), or ended a session; nothing ran.
    Checked,
    /// The program ran to its end (whatever its exit code).
    Completed,
    /// A run-time layer stopped the program.
    Blocked,
    TimedOut,
    Oom,
    Cancelled,
    /// The engine could not run it, or the server was stopping.
    Failed,
}

/// One line of the log.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    /// When the call ended, RFC 3339 in UTC.
    pub time: String,
    /// Who made the call over HTTP: the token file's name or the JWT's subject
    /// (absent over stdio, where the one client is whoever started the server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// How that principal was proven: `token`, `oauth`, or `none` (a loopback server
    /// without authentication).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// sha256 of the code, hex; absent for calls without code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    /// The policy as results name it, and the sha256 of its effective form.
    pub policy: String,
    pub policy_sha256: String,
    /// `allowed` or `denied` by the static check; absent when it did not check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    pub findings: Vec<crate::policy::Finding>,
    /// The layer that stopped the call (`static`, `python-audit-hook`, …), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub duration_ms: u64,
    pub stdout_bytes: usize,
    pub stderr_bytes: usize,
    /// Why nothing ran, or what went wrong, when the result says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The open log.
#[derive(Debug)]
pub struct AuditLog {
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (creating) the log for appending.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(AuditLog {
            file: Mutex::new(file),
        })
    }

    /// Appends `entry` as one line, with one write. A failure is logged (the call's
    /// answer is already decided), never a panic.
    pub fn record(&self, entry: &AuditEntry) {
        let mut line = serde_json::to_vec(entry).expect("an audit entry serializes");
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(error) = file.write_all(&line) {
            tracing::error!(%error, "the audit log could not be written");
        }
    }
}

/// Now, as RFC 3339 in UTC with milliseconds (no date crate: the civil date from the
/// days since 1970, by Howard Hinnant's algorithm).
pub fn now_rfc3339() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs() as i64, since.subsec_millis())
}

fn rfc3339(seconds: i64, millis: u32) -> String {
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_420_800, 5), "2026-11-23T08:00:00.005Z");
        assert_eq!(rfc3339(951_782_400, 999), "2000-02-29T00:00:00.999Z");
    }

    use crate::digest::sha256_hex as sha256;

    #[test]
    fn each_entry_is_one_line_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
        let log = AuditLog::open(&path).unwrap();
        let entry = AuditEntry {
            time: now_rfc3339(),
            principal: Some("alice".into()),
            auth: Some("token".into()),
            tool: "check_code".into(),
            language: Some("python".into()),
            session: None,
            code_sha256: Some(sha256(b"print(1)")),
            policy: "default".into(),
            policy_sha256: sha256(b"x"),
            verdict: Some("allowed".into()),
            findings: Vec::new(),
            stopped_by: None,
            phase: Phase::Checked,
            exit_code: None,
            duration_ms: 1,
            stdout_bytes: 0,
            stderr_bytes: 0,
            message: None,
        };
        log.record(&entry);
        log.record(&entry);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let line: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(
            line["code_sha256"],
            "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99"
        );
        assert_eq!(line["phase"], "checked");
        assert_eq!(line["principal"], "alice");
        assert!(AuditLog::open(&dir.path().join("no/such/dir/audit.jsonl")).is_err());
    }
}
