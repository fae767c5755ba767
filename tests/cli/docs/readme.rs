//! The README is the quick start: it opens with the two commands a new user needs
//! (install-and-run, and the test command exactly as `.ci/run` calls it), stays within
//! 300 lines with a contents list, and its fastmcp example is the script the
//! end-to-end test runs (tests/e2e/fastmcp_example.py), so the example cannot rot.

crate::common::harness::tests! {
    sync the_readme_opens_with_the_install_and_test_commands;
    sync the_readme_stays_a_quick_start;
    sync the_readme_fastmcp_example_is_the_script_the_tests_run;
}

use super::without_code_blocks;

fn readme() -> String {
    std::fs::read_to_string(crate::common::root().join("README.md")).expect("README.md")
}

/// The fenced code blocks of `text` whose info string is `info`, in order.
fn code_blocks(text: &str, info: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_start().strip_prefix("```") == Some(info) => {
                current = Some(Vec::new())
            }
            Some(lines) if line.trim_start() == "```" => {
                blocks.push(lines.join("\n") + "\n");
                current = None;
            }
            Some(lines) => lines.push(line),
            None => {}
        }
    }
    blocks
}

fn the_readme_opens_with_the_install_and_test_commands() {
    let readme = readme();
    let opening: Vec<&str> = readme.lines().take(8).collect();
    assert!(
        opening
            .iter()
            .any(|line| line.starts_with("pip install . && code-sandbox-mcp ")),
        "the README's first lines must be the install-and-run command: {opening:#?}"
    );
    assert!(
        opening
            .iter()
            .any(|line| line.starts_with("cargo test --locked ")),
        "the README's first lines must be the test command: {opening:#?}"
    );
    let ci = std::fs::read_to_string(crate::common::root().join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(|line| line.trim() == "cargo test --locked"),
        ".ci/run must run the README's test command, `cargo test --locked`"
    );
}

fn the_readme_stays_a_quick_start() {
    let readme = readme();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: it is the quick start (at most 300); move the rest to docs/"
    );
    assert!(
        without_code_blocks(&readme)
            .iter()
            .any(|line| line == "## Contents"),
        "README.md needs its contents list (`## Contents`)"
    );
}

fn the_readme_fastmcp_example_is_the_script_the_tests_run() {
    let script =
        std::fs::read_to_string(crate::common::root().join("tests/e2e/fastmcp_example.py"))
            .expect("tests/e2e/fastmcp_example.py");
    // The script is its docstring (for readers of the test) and then the example.
    let (_, after) = script
        .split_once("\"\"\"")
        .and_then(|(_, rest)| rest.split_once("\"\"\""))
        .expect("the script opens with a docstring");
    let example = after.trim_start_matches('\n');
    let blocks = code_blocks(&readme(), "python");
    assert!(
        blocks.iter().any(|block| block == example),
        "the README's fastmcp example differs from tests/e2e/fastmcp_example.py (after its \
         docstring); make them the same. README python blocks: {blocks:#?}"
    );
}
