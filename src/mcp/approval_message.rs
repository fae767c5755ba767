//! What a person reads before approving a run: why they are asked (each `ask` finding,
//! with the lines around it), everything that will run (the session it runs in, the
//! packages installed first, the files written first with their sizes and hashes, and
//! the whole code), and the hashes of the code and of all of it.
//!
//! The code is shown as the interpreter will read it: split where it ends lines (a bare
//! `\r` too, and U+2028/U+2029 for JavaScript), numbered as its tracebacks number them,
//! and with every character a terminal or the bidirectional algorithm would act on
//! written as a `\u{…}` escape (`analysis::display`), so that nothing runs that the
//! person could not see. What the agent chose (file names, the session's name, the
//! findings' messages, which quote the code) is escaped the same way.

use crate::analysis::display::{escaped, has_hidden_characters, interpreter_lines};
use crate::policy::Action;
use crate::sandbox::{Approval, ApprovalRequest};

/// How many lines of the code the question shows.
const SHOWN_LINES: usize = 200;

/// The question's text.
pub fn message(request: &ApprovalRequest<'_>, approval: &Approval) -> String {
    let language = request.language.spec().display;
    let lines = interpreter_lines(request.language, request.code);
    let mut text = format!(
        "The agent wants to run this {language} code, which the sandbox policy runs only with \
         your approval:\n"
    );
    for finding in request.findings.iter().filter(|f| f.action == Action::Ask) {
        text.push_str(&format!(
            "\n• line {}: {} — {}\n",
            finding.line,
            escaped(&finding.rule),
            escaped(&finding.message)
        ));
        let at = finding.line as usize;
        for number in at.saturating_sub(1).max(1)..=(at + 1).min(lines.len()) {
            text.push_str(&format!(
                "    {number:>4} | {}\n",
                escaped(lines[number - 1])
            ));
        }
    }
    if let Some(session) = request.session {
        text.push_str(&format!(
            "\nIt runs in the session `{}`: what that session's earlier calls left (variables, \
             files) is there too.\n",
            escaped(session)
        ));
    }
    if !request.packages.is_empty() {
        let packages: Vec<String> = request.packages.iter().map(|p| escaped(p)).collect();
        text.push_str(&format!("\nInstalled first: {}.\n", packages.join(", ")));
    }
    if !request.files.is_empty() {
        let total: usize = request.files.iter().map(|file| file.bytes.len()).sum();
        text.push_str(&format!(
            "\nWritten to /sandbox first ({} files, {total} bytes):\n",
            request.files.len()
        ));
        for file in request.files {
            text.push_str(&format!(
                "    {} — {} bytes, sha256 {}\n",
                escaped(&file.path),
                file.bytes.len(),
                crate::digest::sha256_hex(&file.bytes)
            ));
        }
    }
    // The whole code, so that the yes is to what runs, not to a few lines of it.
    text.push_str(&format!(
        "\nThe whole code ({} lines, as the interpreter counts them):\n",
        lines.len()
    ));
    for (index, line) in lines.iter().enumerate().take(SHOWN_LINES) {
        text.push_str(&format!("    {:>4} | {}\n", index + 1, escaped(line)));
    }
    if lines.len() > SHOWN_LINES {
        text.push_str(&format!(
            "    … {} more lines, not shown: say no unless you know this code\n",
            lines.len() - SHOWN_LINES
        ));
    }
    if has_hidden_characters(&lines.concat()) {
        text.push_str(
            "\nThe code holds characters a terminal or text direction would act on (escape \
             sequences, direction overrides, invisible characters): they are shown as \
             \\u{…} and are in the code as sent. Say no unless you know why they are there.\n",
        );
    }
    text.push_str(&format!(
        "\nThe code's sha256 is {}; with the files, packages and session above, the request's \
         sha256 is {}. Approving runs exactly this, once.",
        approval.code_sha256, approval.request_sha256
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Language;
    use crate::policy::Finding;
    use crate::sandbox::files_in::InputFile;

    fn finding(line: u32, message: &str) -> Finding {
        Finding {
            rule: "process-exec".into(),
            category: "process".into(),
            action: Action::Ask,
            message: message.into(),
            line,
            column: 1,
            end_line: line,
            end_column: 2,
            layer: Default::default(),
        }
    }

    fn ask(language: Language, code: &str, findings: &[Finding]) -> String {
        let request = ApprovalRequest {
            language,
            code,
            files: &[],
            packages: &[],
            session: None,
            findings,
            rules: &["process-exec"],
        };
        message(&request, &Approval::unavailable(&request))
    }

    #[test]
    fn a_bare_carriage_return_is_a_line_as_python_counts_it() {
        let text = ask(
            Language::Python,
            "print('hi')\rimport os; os.system('x')",
            &[finding(2, "m")],
        );
        assert!(
            text.contains("The whole code (2 lines, as the interpreter counts them)"),
            "{text}"
        );
        assert!(
            text.contains("       2 | import os; os.system('x')\n"),
            "{text}"
        );
        assert!(text.contains("• line 2: process-exec"), "{text}");
        let text = ask(Language::JavaScript, "a()\u{2028}b()\u{2029}c()", &[]);
        assert!(
            text.contains("(3 lines, as the interpreter counts them)"),
            "{text}"
        );
    }

    #[test]
    fn escape_sequences_and_direction_overrides_are_spelled_out() {
        let code = "x = 1 # \u{1b}[2K\u{1b}[1Ahidden\nok = '\u{202e}' # \u{2066}trojan\u{2069}";
        let text = ask(
            Language::Python,
            code,
            &[finding(1, "from `\u{1b}]8;;evil`")],
        );
        for raw in ['\u{1b}', '\u{202e}', '\u{2066}', '\u{2069}'] {
            assert!(
                !text.contains(raw),
                "{raw:?} reached the question: {text:?}"
            );
        }
        assert!(text.contains("\\u{1b}[2K"), "{text}");
        assert!(text.contains("\\u{202e}"), "{text}");
        assert!(text.contains("shown as \\u{…}"), "{text}");
        assert!(!ask(Language::Python, "print(1)", &[]).contains("shown as \\u{…}"));
    }

    #[test]
    fn files_packages_and_the_session_are_shown_and_hashed() {
        let files = [InputFile {
            path: "helper\u{202e}yp.py".into(),
            bytes: b"import os".to_vec(),
        }];
        let packages = ["numpy==2.0".to_string()];
        let request = ApprovalRequest {
            language: Language::Python,
            code: "import helper",
            files: &files,
            packages: &packages,
            session: Some("work"),
            findings: &[],
            rules: &["process-exec"],
        };
        let approval = Approval::unavailable(&request);
        let text = message(&request, &approval);
        assert!(text.contains("session `work`"), "{text}");
        assert!(text.contains("Installed first: numpy==2.0."), "{text}");
        assert!(
            text.contains("helper\\u{202e}yp.py — 9 bytes, sha256 "),
            "{text}"
        );
        assert!(text.contains(&approval.request_sha256), "{text}");
        // Every part of what runs changes the request's hash.
        let other_file = [InputFile {
            path: files[0].path.clone(),
            bytes: b"import sys".to_vec(),
        }];
        for changed in [
            ApprovalRequest {
                files: &other_file,
                ..request
            },
            ApprovalRequest {
                packages: &[],
                ..request
            },
            ApprovalRequest {
                session: None,
                ..request
            },
            ApprovalRequest {
                code: "import helper ",
                ..request
            },
        ] {
            assert_ne!(changed.sha256(), request.sha256());
        }
        assert_eq!(
            request.sha256(),
            Approval::unavailable(&request).request_sha256
        );
    }
}
