//! Text renderings of the structured results, for clients that show a model only the
//! `content` of a tool result. They carry the same facts as `structuredContent`, worded
//! so a model can act on them (what happened, then what to change).

use super::types::{CheckResult, RunResult, RunStatus};
use crate::analysis::display::escaped;
use crate::analysis::Language;
use crate::policy::{Action, Finding};
use crate::sandbox::files_out::{is_image, OutputFile};
use base64::Engine as _;
use rmcp::model::{ContentBlock, ResourceContents};

/// The text of a run tool's result; text files up to `inline` bytes are shown in it.
pub fn run_result(result: &RunResult, inline: u64) -> String {
    let mut text = match result.status {
        RunStatus::Completed => completed_header(result),
        RunStatus::Blocked => format!(
            "Stopped while running by the sandbox policy `{}`: the program tried something \
             the policy denies (below); its output up to that point follows. Rewrite the \
             code without it and call the tool again.\n",
            result.policy
        ),
        RunStatus::Denied if result.approval.is_some() => format!(
            "Not approved under the sandbox policy `{}`: {}.\n",
            result.policy,
            result.message.as_deref().unwrap_or("nothing was run")
        ),
        RunStatus::Denied => format!(
            "Denied by the sandbox policy `{}`: nothing was run. Rewrite the code without \
             what is listed below and call the tool again.\n",
            result.policy
        ),
        RunStatus::PolicyError
        | RunStatus::InvalidInput
        | RunStatus::EngineError
        | RunStatus::InstallFailed
        | RunStatus::Cancelled
        | RunStatus::ShuttingDown => {
            format!(
                "Nothing was run: {}\n",
                result.message.as_deref().unwrap_or("unknown reason")
            )
        }
    };
    for (action, heading) in [
        (Action::Deny, "Denied"),
        (Action::Ask, "Needing the user's approval"),
        (Action::Warn, "Warnings (allowed, but worth a look)"),
    ] {
        let findings: Vec<&Finding> = result
            .findings
            .iter()
            .filter(|f| f.action == action)
            .collect();
        if !findings.is_empty() {
            text.push_str(&format!("\n{heading}:\n"));
            push_findings(&mut text, &findings);
        }
    }
    if matches!(result.status, RunStatus::Completed | RunStatus::Blocked) {
        push_stream(&mut text, "stdout", &result.stdout);
        push_stream(&mut text, "stderr", &result.stderr);
        push_files(&mut text, result, inline);
    }
    if let Some(hint) = nothing_printed_hint(result) {
        text.push('\n');
        text.push_str(hint);
    }
    text
}

/// A run that succeeded and printed nothing: models often expect the value of the last
/// expression to be shown, as in a notebook, and would otherwise try again blindly.
fn nothing_printed_hint(result: &RunResult) -> Option<&'static str> {
    let silent = result.status == RunStatus::Completed
        && result.exit_code == Some(0)
        && result.stdout.is_empty()
        && result.stderr.is_empty()
        && result.files.is_empty();
    silent.then_some(match result.language {
        Language::Python => {
            "Nothing was printed: the program ran and exited 0, but the value of the last \
             expression is not shown as in a notebook. print() the result you want to see.\n"
        }
        Language::JavaScript => {
            "Nothing was printed: the program ran and exited 0, but the value of the last \
             expression is not shown as in a REPL. console.log() the result you want to see.\n"
        }
    })
}

/// The text of `check_code`'s result.
pub fn check_result(result: &CheckResult) -> String {
    let mut text = if result.allowed {
        format!(
            "Allowed by the sandbox policy `{}`: this code would run.\n",
            result.policy
        )
    } else if result.findings.iter().any(|f| f.action == Action::Deny) {
        format!(
            "Denied by the sandbox policy `{}`: this code would not run. Rewrite it without \
             what is listed below.\n",
            result.policy
        )
    } else {
        format!(
            "Needs the user's approval under the sandbox policy `{}`: this code runs only if \
             the user says yes when asked (an `ask` rule, listed below).\n",
            result.policy
        )
    };
    if result.findings.is_empty() {
        text.push_str("No findings.\n");
    } else {
        text.push('\n');
        let findings: Vec<&Finding> = result.findings.iter().collect();
        push_findings(&mut text, &findings);
    }
    text
}

/// One line saying how the run ended, e.g. `exit code 1 · 83 ms · policy default`.
fn completed_header(result: &RunResult) -> String {
    let exit_code = result
        .exit_code
        .map_or_else(|| "none".to_string(), |c| c.to_string());
    let mut how = Vec::new();
    if result.timed_out {
        how.push("TIMED OUT: killed at the time limit".to_string());
    }
    if result.oom_killed {
        how.push("OUT OF MEMORY: killed at the memory limit".to_string());
    }
    if result.killed_outside {
        how.push(
            "KILLED FROM OUTSIDE: the container was removed or killed by another program"
                .to_string(),
        );
    }
    if result.truncated {
        how.push("output truncated at the output limit".to_string());
    }
    let mut line = format!(
        "exit code {exit_code} · {} ms · policy {}",
        result.duration_ms, result.policy
    );
    for part in how {
        line.push_str(" · ");
        line.push_str(&part);
    }
    line.push('\n');
    line
}

fn push_findings(text: &mut String, findings: &[&Finding]) {
    for finding in findings {
        let layer = if finding.layer.is_static() {
            String::new()
        } else {
            format!(" (run time: {})", finding.layer.as_str())
        };
        // A run-time finding with no place in the code (the egress proxy's) has line 0.
        let place = match (&finding.file, finding.line) {
            (Some(file), line) => format!("{file}, line {line}, column {}: ", finding.column),
            (None, 0) => String::new(),
            (None, line) => format!("line {line}, column {}: ", finding.column),
        };
        text.push_str(&format!(
            "- {place}{} [{}]{layer} {}\n",
            finding.rule, finding.action, finding.message
        ));
    }
}

/// How a returned file travels: inline in the text, as an image, or as an embedded
/// resource; `None` when its content was held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Inline,
    Image,
    Resource,
}

fn delivery(file: &OutputFile, inline: u64) -> Option<Delivery> {
    let bytes = file.bytes.as_deref()?;
    Some(if is_image(&file.mime_type) {
        Delivery::Image
    } else if bytes.len() as u64 <= inline && is_text(file) {
        Delivery::Inline
    } else {
        Delivery::Resource
    })
}

fn is_text(file: &OutputFile) -> bool {
    let textual = file.mime_type.starts_with("text/")
        || matches!(
            file.mime_type.as_str(),
            "application/json" | "application/xml" | "application/yaml" | "image/svg+xml"
        );
    textual
        && file
            .bytes
            .as_deref()
            .is_some_and(|b| std::str::from_utf8(b).is_ok())
}

/// The URI a returned file goes by in resource content.
fn file_uri(file: &OutputFile) -> String {
    if file.figure {
        format!("sandbox://figures/{}", escaped(&file.path))
    } else {
        format!("sandbox://files/{}", escaped(&file.path))
    }
}

/// The list of a run's files, and the small text ones in full.
fn push_files(text: &mut String, result: &RunResult, inline: u64) {
    if result.files.is_empty() {
        return;
    }
    text.push_str("\n--- files ---\n");
    for file in &result.files {
        let how = match (delivery(file, inline), &file.omitted) {
            (Some(Delivery::Image), _) => "image, attached".to_string(),
            (Some(Delivery::Inline), _) => "text, below".to_string(),
            (Some(Delivery::Resource), _) => format!("attached as resource {}", file_uri(file)),
            (None, Some(why)) => format!("not returned: {why}"),
            (None, None) => "not returned".to_string(),
        };
        let what = if file.figure { "figure" } else { "file" };
        // The name is the run's choice: a line break or an escape sequence in it must
        // not forge lines of this text.
        text.push_str(&format!(
            "- {what} {} ({} bytes, {}): {how}",
            escaped(&file.path),
            file.size,
            file.mime_type
        ));
        if let Some(to) = &file.exported_to {
            text.push_str(&format!("; exported to {to}"));
        }
        if let Some(error) = &file.export_error {
            text.push_str(&format!("; {error}"));
        }
        text.push('\n');
    }
    if result.files_unlisted > 0 {
        text.push_str(&format!(
            "- and {} more files, not listed\n",
            result.files_unlisted
        ));
    }
    for file in &result.files {
        if delivery(file, inline) == Some(Delivery::Inline) {
            let content = String::from_utf8_lossy(file.bytes.as_deref().unwrap_or_default());
            push_stream(text, &format!("file {}", escaped(&file.path)), &content);
        }
    }
}

/// The content blocks of a run's returned files that do not travel inline in the text:
/// images as image content, the rest as embedded resources.
pub fn file_blocks(result: &RunResult, inline: u64) -> Vec<ContentBlock> {
    let base64 = base64::engine::general_purpose::STANDARD;
    result
        .files
        .iter()
        .filter_map(|file| {
            let bytes = file.bytes.as_deref()?;
            match delivery(file, inline)? {
                Delivery::Inline => None,
                Delivery::Image => Some(ContentBlock::image(base64.encode(bytes), &file.mime_type)),
                Delivery::Resource if is_text(file) => Some(ContentBlock::resource(
                    ResourceContents::TextResourceContents {
                        uri: file_uri(file),
                        mime_type: Some(file.mime_type.clone()),
                        text: String::from_utf8_lossy(bytes).into_owned(),
                        meta: None,
                    },
                )),
                Delivery::Resource => Some(ContentBlock::resource(
                    ResourceContents::BlobResourceContents {
                        uri: file_uri(file),
                        mime_type: Some(file.mime_type.clone()),
                        blob: base64.encode(bytes),
                        meta: None,
                    },
                )),
            }
        })
        .collect()
}

/// How much of each stream the text carries in full. The structured result has all
/// that was kept (up to `limits.output`); the text, which many clients hand the model
/// beside it, carries a long stream's beginning and end only, so a reply never holds the
/// same large output twice.
const TEXT_STREAM_SHARE: usize = 8 * 1024;

fn push_stream(text: &mut String, name: &str, content: &str) {
    text.push_str(&format!("\n--- {name} ---\n"));
    if content.is_empty() {
        text.push_str("(empty)\n");
        return;
    }
    if content.len() <= TEXT_STREAM_SHARE {
        text.push_str(content);
    } else {
        let half = TEXT_STREAM_SHARE / 2;
        let head_end = floor_char_boundary(content, half);
        let tail_start = floor_char_boundary(content, content.len() - half);
        text.push_str(&content[..head_end]);
        if !content[..head_end].ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[… {} bytes not repeated here: the result's structured `{name}` has them …]\n",
            tail_start - head_end
        ));
        text.push_str(&content[tail_start..]);
    }
    if !content.ends_with('\n') {
        text.push('\n');
    }
}

/// The largest char boundary of `text` at or before `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(action: Action) -> Finding {
        Finding {
            rule: "process-exec".into(),
            category: "process".into(),
            action,
            message: "no processes (`os.system`)".into(),
            line: 2,
            column: 1,
            end_line: 2,
            end_column: 10,
            layer: Default::default(),
            file: None,
        }
    }

    #[test]
    fn a_denial_names_rule_line_and_column() {
        let mut result = RunResult::not_run(RunStatus::Denied, Language::Python, "default");
        result.findings = vec![finding(Action::Deny)];
        let text = run_result(&result, 4096);
        assert!(text.contains("nothing was run"), "{text}");
        assert!(
            text.contains("line 2, column 1: process-exec [deny]"),
            "{text}"
        );
        assert!(!text.contains("--- stdout ---"), "{text}");
    }

    #[test]
    fn a_silent_success_says_to_print_the_result() {
        let mut result = RunResult::not_run(RunStatus::Completed, Language::Python, "default");
        result.exit_code = Some(0);
        assert!(run_result(&result, 4096).contains("print() the result"));
        result.language = Language::JavaScript;
        assert!(run_result(&result, 4096).contains("console.log() the result"));
        result.stderr = "a warning".into();
        assert!(!run_result(&result, 4096).contains("Nothing was printed"));
        result.stderr.clear();
        result.exit_code = Some(1);
        assert!(!run_result(&result, 4096).contains("Nothing was printed"));
    }

    #[test]
    fn a_long_stream_is_in_the_text_by_its_ends_only() {
        let mut result = RunResult::not_run(RunStatus::Completed, Language::Python, "default");
        result.exit_code = Some(1);
        result.stdout = format!("first line\n{}last line\n", "é".repeat(20_000));
        result.stderr = "Traceback: the end\n".into();
        let text = run_result(&result, 4096);
        assert!(text.len() < 2 * TEXT_STREAM_SHARE + 1024, "{}", text.len());
        assert!(text.contains("--- stdout ---\nfirst line\n"), "{text}");
        assert!(text.contains("last line\n\n--- stderr ---\nTraceback: the end\n"));
        assert!(text.contains("not repeated here: the result's structured `stdout` has them"));
    }

    #[test]
    fn a_failed_run_keeps_both_streams_and_its_warnings() {
        let mut result = RunResult::not_run(RunStatus::Completed, Language::Python, "default");
        result.exit_code = Some(1);
        result.stdout = "partial".into();
        result.stderr = "Traceback".into();
        result.findings = vec![finding(Action::Warn)];
        let text = run_result(&result, 4096);
        assert!(text.starts_with("exit code 1"), "{text}");
        assert!(text.contains("--- stdout ---\npartial\n"), "{text}");
        assert!(text.contains("--- stderr ---\nTraceback\n"), "{text}");
        assert!(text.contains("Warnings"), "{text}");
    }
}
