//! The tools' arguments and structured results. Their JSON schemas are the tools'
//! `inputSchema` and `outputSchema`, so field docs here are what a model reads.

use crate::analysis::Language;
use crate::policy::Finding;
use crate::sandbox::files_out::OutputFile;
use crate::sandbox::RunOutcome;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// Arguments of `run_python_code` and `run_javascript_code`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RunCodeArgs {
    /// The whole program, as saved to a file.
    pub code: String,
    /// Seconds; can only lower the policy's limit.
    #[serde(default, deserialize_with = "lenient_seconds")]
    pub timeout: Option<f64>,
    /// A name (letters, digits, `-`, `_`, `.`) to keep state across calls; leave it out
    /// for a fresh sandbox.
    #[serde(default)]
    pub session: Option<String>,
    /// Files to put in /sandbox first.
    #[serde(default)]
    pub files: Vec<FileArg>,
    /// Packages to install for this run, by name: only those the description lists.
    #[serde(default)]
    pub packages: Vec<String>,
    /// Set by the server itself when the request carried code that is not valid UTF-8
    /// (see `sanitize`); never part of the advertised schema.
    #[serde(default, rename = "__invalid_utf8")]
    #[schemars(skip)]
    pub invalid_utf8: Option<String>,
}

/// A file handed in with a run.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct FileArg {
    /// Relative to /sandbox: `data.csv`, `in/config.json`.
    pub path: String,
    /// Text, or base64 when `encoding` is `base64`.
    pub content: String,
    #[serde(default)]
    pub encoding: FileEncoding,
}

/// How a file's `content` is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum FileEncoding {
    /// The text itself (the default).
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    /// The bytes, in standard base64.
    #[serde(rename = "base64")]
    Base64,
}

impl FileArg {
    /// The file's bytes, or why its content cannot be read.
    pub fn decode(&self) -> Result<crate::sandbox::files_in::InputFile, String> {
        use base64::Engine;
        let bytes = match self.encoding {
            FileEncoding::Utf8 => self.content.as_bytes().to_vec(),
            FileEncoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(self.content.trim())
                .map_err(|error| {
                    format!(
                        "the content of `{}` is not valid base64 ({error})",
                        self.path
                    )
                })?,
        };
        Ok(crate::sandbox::files_in::InputFile {
            path: self.path.clone(),
            bytes,
        })
    }
}

/// Arguments of `end_session`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EndSessionArgs {
    /// The session's name, as given to the run tool.
    pub session: String,
}

/// Result of `end_session`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EndSessionResult {
    pub session: String,
    /// False when no such session was open (it may have ended on its own: idle, time
    /// limit, or the program exited).
    pub ended: bool,
}

/// Where a run in a session stands.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SessionState {
    pub name: String,
    /// This call's number in the session, from 1.
    pub call: u64,
    /// Set when the session is over after this call, with why: the next call with this
    /// name starts a new, empty session.
    pub ended: Option<String>,
}

/// Arguments of `check_code`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CheckCodeArgs {
    /// The snippet to check.
    pub code: String,
    /// The snippet's language.
    pub language: Language,
    /// See [`RunCodeArgs::invalid_utf8`].
    #[serde(default, rename = "__invalid_utf8")]
    #[schemars(skip)]
    pub invalid_utf8: Option<String>,
}

/// What became of a run request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The code ran; see exit_code, timed_out and oom_killed for how it ended.
    Completed,
    /// The policy denied the code; nothing ran. `findings` says why.
    Denied,
    /// The request itself was unusable (code too large, not UTF-8, bad timeout).
    InvalidInput,
    /// The container engine could not run it (daemon down, image missing); `message`
    /// says what to do. A later call can succeed.
    EngineError,
    /// Installing the packages the call asked for failed (the index unreachable, no
    /// such package or version, no wheel for this platform); nothing ran. `message`
    /// has the installer's own words: calling again with the same packages fails the
    /// same way until the cause is fixed.
    InstallFailed,
    /// The program started, and a run-time layer of the policy stopped it when it
    /// tried something the policy denies: `findings` names the rule, the layer, what
    /// was attempted and the line; output printed before the stop is kept.
    Blocked,
    /// The client cancelled the call; the run was killed.
    Cancelled,
    /// The server is stopping and runs nothing more; retrying on this connection is
    /// pointless.
    ShuttingDown,
    /// The sandbox's policy file has errors (`message` lists them): nothing runs until
    /// it is fixed and the server restarted.
    PolicyError,
}

/// The structured result of `run_python_code` and `run_javascript_code`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunResult {
    pub status: RunStatus,
    /// The program's exit code; null when it did not run. 137 when it was killed.
    pub exit_code: Option<i64>,
    /// Everything the program wrote to stdout (up to the output limit).
    pub stdout: String,
    /// Everything the program wrote to stderr (up to the output limit).
    pub stderr: String,
    /// The wall-clock limit was reached and the run was killed.
    pub timed_out: bool,
    /// The memory limit was reached and the run was killed.
    pub oom_killed: bool,
    /// Something outside the sandbox (another program on the machine) removed or
    /// killed the container: the run did not end by itself, nor by a limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub killed_outside: bool,
    /// Output went past the output limit and was cut.
    pub truncated: bool,
    /// How long the run took, in milliseconds (0 when it did not run).
    pub duration_ms: u64,
    /// What the policy check found, each with its action: the `deny` ones are why a
    /// `denied` run did not run; `warn` ones ride along with a completed run.
    pub findings: Vec<Finding>,
    /// Why the code did not run, when status is not `completed`.
    pub message: Option<String>,
    pub language: Language,
    /// The name of the policy in force.
    pub policy: String,
    /// Present when the call named a session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionState>,
    /// Files the program created or changed under /sandbox, and the matplotlib
    /// figures it drew. Their content comes as image, text or resource content next to
    /// this result; one listed with `omitted` was held back by a cap (named there).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<OutputFile>,
    /// How many more files there were than are listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub files_unlisted: u64,
    /// Connections the sandbox's egress proxy refused (under a network allowlist): the
    /// host and port asked for, and why. Each is also a finding (layer `egress-proxy`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_refused: Vec<crate::sandbox::egress::Refusal>,
    /// Requests the egress proxy refused because they carried a secret's placeholder
    /// toward a host the secret does not list (or over plain HTTP): the secret's name
    /// and the host, never a value. Each is also a finding (layer `egress-proxy`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_refused: Vec<crate::sandbox::egress::SecretRefusal>,
    /// Present when the code needed a person's approval (`ask` rules): what they said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::sandbox::Approval>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl RunResult {
    /// A result for code that did not run.
    pub fn not_run(status: RunStatus, language: Language, policy: &str) -> RunResult {
        RunResult {
            status,
            exit_code: None,
            stdout: String::new(),
            stderr: String::new(),
            timed_out: false,
            oom_killed: false,
            killed_outside: false,
            truncated: false,
            duration_ms: 0,
            findings: Vec::new(),
            message: None,
            language,
            policy: policy.to_string(),
            session: None,
            files: Vec::new(),
            files_unlisted: 0,
            network_refused: Vec::new(),
            secret_refused: Vec::new(),
            approval: None,
        }
    }

    /// A result for code that ran.
    pub fn completed(
        outcome: RunOutcome,
        findings: Vec<Finding>,
        language: Language,
        policy: &str,
    ) -> RunResult {
        let mut findings = findings;
        // A refused connection did not stop the program (it got an error and went on):
        // a finding to say why, not a block.
        findings.extend(outcome.network_refused.iter().map(|refusal| Finding {
            rule: "network".into(),
            category: "network".into(),
            action: crate::policy::Action::Warn,
            message: if refusal.host.is_empty() {
                format!(
                    "the sandbox's egress proxy refused a connection: {}",
                    refusal.reason
                )
            } else {
                format!(
                    "the sandbox's egress proxy refused a connection to {}:{}: {}",
                    refusal.host, refusal.port, refusal.reason
                )
            },
            line: 0,
            column: 0,
            end_line: 0,
            end_column: 0,
            layer: crate::policy::Layer::EgressProxy,
            file: None,
        }));
        findings.extend(outcome.secret_refused.iter().map(|refusal| Finding {
            rule: "secrets".into(),
            category: "network".into(),
            action: crate::policy::Action::Warn,
            message: format!(
                "the sandbox's egress proxy refused a request to {}:{} that carried the \
                 placeholder of {}: {}",
                refusal.host, refusal.port, refusal.secret, refusal.reason
            ),
            line: 0,
            column: 0,
            end_line: 0,
            end_column: 0,
            layer: crate::policy::Layer::EgressProxy,
            file: None,
        }));
        let status = if outcome.blocked.is_empty() {
            RunStatus::Completed
        } else {
            findings.extend(outcome.blocked);
            RunStatus::Blocked
        };
        RunResult {
            status,
            exit_code: Some(outcome.exit_code),
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            timed_out: outcome.timed_out,
            oom_killed: outcome.oom_killed,
            killed_outside: outcome.killed_outside,
            truncated: outcome.truncated,
            duration_ms: outcome.duration_ms,
            findings,
            message: None,
            language,
            policy: policy.to_string(),
            session: None,
            files: outcome.files,
            files_unlisted: outcome.files_unlisted,
            network_refused: outcome.network_refused,
            secret_refused: outcome.secret_refused,
            approval: None,
        }
    }

    /// True for every status but `completed`: the MCP result carries `isError`.
    pub fn is_error(&self) -> bool {
        self.status != RunStatus::Completed
    }
}

/// The structured result of `check_code`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CheckResult {
    /// True when run_python_code / run_javascript_code would run this code (false also
    /// when an `ask` rule would first need the user's yes).
    pub allowed: bool,
    /// Every finding, denials and warnings, in source order.
    pub findings: Vec<Finding>,
    pub language: Language,
    /// The name of the policy in force.
    pub policy: String,
}

/// `schema` without the `format` keywords schemars adds to numbers (`uint32`, `double`…).
/// They are not JSON Schema formats, and strict validators in clients (the Inspector's
/// among them) print a warning for each one.
pub fn without_numeric_formats(
    schema: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(object) => {
                let numeric = matches!(object.get("type"), Some(t) if t.to_string().contains("integer") || t.to_string().contains("number"));
                if numeric {
                    object.remove("format");
                }
                object.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::Value::Object(schema.clone());
    strip(&mut value);
    match value {
        serde_json::Value::Object(object) => object,
        _ => unreachable!("an object stays an object"),
    }
}

/// Accepts a number of seconds, or a string holding one: some clients (the MCP
/// Inspector's CLI among them) pass every argument as a string.
fn lenient_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }
    match Option::<NumberOrText>::deserialize(deserializer)? {
        None => Ok(None),
        Some(NumberOrText::Number(seconds)) => Ok(Some(seconds)),
        Some(NumberOrText::Text(text)) if text.trim().is_empty() => Ok(None),
        Some(NumberOrText::Text(text)) => text.trim().parse::<f64>().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("timeout must be a number of seconds, not `{text}`"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_is_a_number_or_a_numeric_string() {
        let parse = |json: &str| serde_json::from_str::<RunCodeArgs>(json).map(|a| a.timeout);
        assert_eq!(parse(r#"{"code":"x"}"#).unwrap(), None);
        assert_eq!(parse(r#"{"code":"x","timeout":2.5}"#).unwrap(), Some(2.5));
        assert_eq!(parse(r#"{"code":"x","timeout":"3"}"#).unwrap(), Some(3.0));
        assert_eq!(parse(r#"{"code":"x","timeout":null}"#).unwrap(), None);
        assert!(parse(r#"{"code":"x","timeout":"soon"}"#).is_err());
    }

    #[test]
    fn numeric_formats_are_stripped_and_nothing_else() {
        let schema = serde_json::json!({
            "properties": {
                "line": {"type": "integer", "format": "uint32"},
                "when": {"type": "string", "format": "date-time"},
                "t": {"type": ["number", "null"], "format": "double"}
            }
        });
        let stripped = without_numeric_formats(schema.as_object().unwrap());
        let text = serde_json::Value::Object(stripped).to_string();
        assert!(
            !text.contains("uint32") && !text.contains("double"),
            "{text}"
        );
        assert!(text.contains("date-time"), "{text}");
    }

    #[test]
    fn the_hidden_marker_is_not_advertised() {
        let schema = serde_json::to_string(&schemars::schema_for!(RunCodeArgs)).unwrap();
        assert!(!schema.contains("__invalid_utf8"), "{schema}");
    }
}
