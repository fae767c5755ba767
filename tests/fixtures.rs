//! Every snippet under fixtures/ is checked against the `default` preset, twice over:
//!
//! 1. Its own annotations: a line that should raise findings ends with a comment
//!    `# expect: rule-id[, rule-id…]` (Python) or `// expect: …` (JavaScript). The set
//!    of (line, rule) pairs found must equal the set annotated, exactly: a missing
//!    finding is an evasion, an extra one is a false alarm.
//! 2. A snapshot of the exact diagnostics (`tests/snapshots/`), so that messages,
//!    columns and spans do not drift unnoticed.

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::{Policy, PolicyEngine};
use std::collections::BTreeSet;
use std::path::Path;

fn engine() -> PolicyEngine {
    PolicyEngine::new(Policy::preset("default").expect("default preset"))
}

/// (line, rule) pairs the fixture's comments announce, lines counted as the
/// interpreter counts them (a bare `\r` ends one).
fn annotations(language: Language, source: &str) -> BTreeSet<(u32, String)> {
    let mut expected = BTreeSet::new();
    let lines = code_sandbox_mcp::analysis::display::interpreter_lines(language, source);
    for (index, line) in lines.into_iter().enumerate() {
        let Some(at) = line.rfind("expect:") else {
            continue;
        };
        let before = line[..at].trim_end();
        if !(before.ends_with('#') || before.ends_with("//") || before.ends_with("/*")) {
            continue;
        }
        for rule in line[at + "expect:".len()..]
            .trim_end_matches("*/")
            .split(',')
        {
            let rule = rule.trim();
            if !rule.is_empty() {
                expected.insert((index as u32 + 1, rule.to_string()));
            }
        }
    }
    expected
}

fn render(path: &Path, source: &str) -> String {
    let language = Language::from_path(path).expect("fixture extension");
    let report = engine()
        .check(language, source)
        .expect("fixture within limits");
    report
        .findings
        .iter()
        .map(|f| {
            format!(
                "{}:{}-{}:{} {} [{}] {}\n",
                f.line, f.column, f.end_line, f.end_column, f.rule, f.action, f.message
            )
        })
        .collect()
}

fn check_fixture(path: &Path) {
    let source = std::fs::read_to_string(path).expect("fixture is UTF-8");
    let language = Language::from_path(path).expect("fixture extension");
    let report = engine()
        .check(language, &source)
        .expect("fixture within limits");
    let found: BTreeSet<(u32, String)> = report
        .findings
        .iter()
        .map(|f| (f.line, f.rule.clone()))
        .collect();
    let expected = annotations(language, &source);
    let missing: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{}:\n  annotated but not found (evasions): {missing:?}\n  found but not annotated (false alarms): {extra:?}\n  findings:\n{}",
        path.display(),
        render(path, &source)
    );
}

#[test]
fn python_fixtures() {
    insta::glob!("../fixtures", "python/*.py", |path| {
        check_fixture(path);
        insta::assert_snapshot!(render(path, &std::fs::read_to_string(path).unwrap()));
    });
}

#[test]
fn javascript_fixtures() {
    insta::glob!("../fixtures", "javascript/*.{js,mjs,cjs}", |path| {
        check_fixture(path);
        insta::assert_snapshot!(render(path, &std::fs::read_to_string(path).unwrap()));
    });
}

#[test]
fn there_are_enough_fixtures() {
    let count = |dir: &str| {
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let (python, javascript) = (count("fixtures/python"), count("fixtures/javascript"));
    assert!(
        python + javascript >= 150,
        "{python} Python + {javascript} JavaScript fixtures; want 150 or more"
    );
}

/// Every snapshot belongs to a fixture that exists (what `cargo insta test
/// --unreferenced=reject` checks): a renamed or deleted fixture must take its snapshot
/// with it, or the snapshot would silently stop being compared.
#[test]
fn no_snapshot_is_left_without_its_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(root.join("tests/snapshots")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let fixture = name
            .strip_suffix(".snap")
            .and_then(|stem| {
                let (test, file) = stem.split_once('@')?;
                let dir = match test {
                    "fixtures__python_fixtures" => "python",
                    "fixtures__javascript_fixtures" => "javascript",
                    _ => return None,
                };
                Some(root.join("fixtures").join(dir).join(file))
            })
            .filter(|path| path.is_file());
        if fixture.is_none() {
            orphans.push(name);
        }
    }
    assert!(
        orphans.is_empty(),
        "snapshots without a fixture: {orphans:?}"
    );
}
