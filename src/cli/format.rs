//! Output formats of `check`: concise text, JSON, SARIF 2.1.0 and GitHub annotations.
//!
//! JSON is an array of objects with `file`, `line`, `column`, `end_line`, `end_column`,
//! `rule`, `category`, `action`, `message` (lines and columns 1-based, columns in
//! characters, ends exclusive).

use crate::policy::{Action, Finding};
use serde::Serialize;
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `path:line:col: rule-id [action] message`, one line per finding.
    Text,
    /// An array of finding objects.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=…`), shown inline on pull requests.
    Github,
}

/// A finding together with the file it was found in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Located {
    pub file: String,
    #[serde(flatten)]
    pub finding: Finding,
}

pub fn render(format: Format, findings: &[Located]) -> String {
    match format {
        Format::Text => findings
            .iter()
            .map(|f| f.finding.to_line(&f.file) + "\n")
            .collect(),
        Format::Json => serde_json::to_string_pretty(findings).expect("findings serialize") + "\n",
        Format::Sarif => {
            serde_json::to_string_pretty(&sarif(findings)).expect("SARIF serializes") + "\n"
        }
        Format::Github => findings.iter().map(github_annotation).collect(),
    }
}

fn sarif(findings: &[Located]) -> serde_json::Value {
    let mut rules: Vec<(&str, &str, Action)> = Vec::new();
    for f in findings {
        if !rules.iter().any(|(id, _, _)| *id == f.finding.rule) {
            rules.push((&f.finding.rule, &f.finding.category, f.finding.action));
        }
    }
    let level = |action: Action| {
        if action.blocks() {
            "error"
        } else {
            "warning"
        }
    };
    let results: Vec<_> = findings
        .iter()
        .map(|f| {
            let finding = &f.finding;
            json!({
                "ruleId": finding.rule,
                "ruleIndex": rules.iter().position(|(id, _, _)| *id == finding.rule),
                "level": level(finding.action),
                "message": { "text": finding.message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": f.file },
                        "region": {
                            "startLine": finding.line,
                            "startColumn": finding.column,
                            "endLine": finding.end_line,
                            "endColumn": finding.end_column,
                        }
                    }
                }],
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "code-sandbox-mcp",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules.iter().map(|(id, category, action)| json!({
                        "id": id,
                        "shortDescription": { "text": format!("{category} rule `{id}`") },
                        "defaultConfiguration": { "level": level(*action) },
                        "properties": { "category": category },
                    })).collect::<Vec<_>>(),
                }
            },
            "results": results,
        }]
    })
}

/// One workflow command; property values escape `%`, CR, LF, `:` and `,` as GitHub requires.
fn github_annotation(f: &Located) -> String {
    let escape_data = |s: &str| {
        s.replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A")
    };
    let escape_property = |s: &str| escape_data(s).replace(':', "%3A").replace(',', "%2C");
    let finding = &f.finding;
    format!(
        "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
        if finding.action.blocks() {
            "error"
        } else {
            "warning"
        },
        escape_property(&f.file),
        finding.line,
        finding.column,
        finding.end_line,
        finding.end_column,
        escape_property(&format!("code-sandbox-mcp {}", finding.rule)),
        escape_data(&finding.message),
    )
}
