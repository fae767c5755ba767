//! The README is the quick start: it opens with the two commands a new user needs
//! (install-and-run, and the test command exactly as `.ci/run` calls it), installs
//! nothing by a distribution name that is not this project's, stays within
//! 300 lines with a contents list, and its fastmcp example is the script the
//! end-to-end test runs (tests/e2e/fastmcp_example.py), so the example cannot rot.

crate::common::harness::tests! {
    sync the_readme_opens_with_the_install_and_test_commands;
    sync the_docs_install_no_distribution_named_as_someone_elses;
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
            .any(|line| line.starts_with("cargo install --locked --path . && code-sandbox-mcp ")),
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

/// `code-sandbox-mcp` on PyPI is another project: an install command in the docs naming
/// it (rather than `code-sandbox-mcp-server`, this project's distribution, or the
/// checkout) would install that one.
fn the_docs_install_no_distribution_named_as_someone_elses() {
    let root = crate::common::root();
    let mut pages = vec![root.join("README.md")];
    pages.extend(
        std::fs::read_dir(root.join("docs"))
            .expect("docs/")
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "md")),
    );
    let taken = installs_of_the_taken_name();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        // Commands are in fenced blocks; prose may name the wrong command to warn of it.
        let mut fenced = false;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if !fenced {
                continue;
            }
            for pattern in &taken {
                assert!(
                    !line.contains(pattern.as_str()) || line.contains(&format!("{pattern}-server")),
                    "{}:{}: `{pattern}` installs another project's package: {line}",
                    page.display(),
                    number + 1
                );
            }
        }
    }
}

/// The ways of installing a distribution by name that would fetch `code-sandbox-mcp`.
fn installs_of_the_taken_name() -> Vec<String> {
    [
        "uvx code-sandbox-mcp",
        "pipx install code-sandbox-mcp",
        "pip install code-sandbox-mcp",
        "uv tool install code-sandbox-mcp",
        "pipx run code-sandbox-mcp",
    ]
    .map(String::from)
    .to_vec()
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
