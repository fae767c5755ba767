//! The documentation, checked like code: links that lead somewhere, a command-line
//! reference that is what the binary prints, and a README that stays a quick start
//! whose example is the script the end-to-end test runs. Nothing here needs Docker.

mod cli_reference;
mod links;
mod readme;

/// The documentation's tests, as the harness runs them.
pub(crate) fn tests() -> Vec<crate::common::harness::Test> {
    let mut tests = cli_reference::tests();
    tests.extend(links::tests());
    tests.extend(readme::tests());
    tests
}

use std::path::PathBuf;

/// The Markdown files whose links are checked: the README and every page of docs/.
fn markdown_files() -> Vec<PathBuf> {
    let root = crate::common::root();
    let mut files = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("a readable docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// `text` without its fenced code blocks: each of their lines becomes empty, so that
/// line numbers still match the file. Fences are ``` or ~~~ (three or more), closed by
/// a fence of the same character at least as long.
fn without_code_blocks(text: &str) -> Vec<String> {
    let mut open: Option<(char, usize)> = None;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let fence = ['`', '~'].into_iter().find_map(|c| {
                let run = trimmed.chars().take_while(|&x| x == c).count();
                (run >= 3).then_some((c, run))
            });
            match (open, fence) {
                (None, Some(fence)) => {
                    open = Some(fence);
                    String::new()
                }
                (Some((c, run)), Some((d, len)))
                    if c == d && len >= run && trimmed.trim_end().chars().all(|x| x == c) =>
                {
                    open = None;
                    String::new()
                }
                (Some(_), _) => String::new(),
                (None, None) => line.to_string(),
            }
        })
        .collect()
}
