//! Every relative link in README.md and docs/*.md leads to a file that exists, and every
//! `#anchor` to a heading of the page it names, with anchors as GitHub makes them: the
//! heading's text in lower case, punctuation dropped, each space a hyphen, and `-1`,
//! `-2`… added to repeats. Links inside code (fenced blocks, code spans) and HTML
//! comments are not links; links with a scheme (`https:`, `mailto:`) are not checked.

crate::common::harness::tests! {
    sync every_relative_link_leads_to_a_file_and_heading_that_exist;
    sync every_page_written_elsewhere_is_still_missing;
    sync the_link_checker_finds_missing_files_and_anchors;
    sync anchors_are_made_as_github_makes_them;
}

use super::{markdown_files, without_code_blocks};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Pages that other branches write and this one links to before they are merged. A link
/// to one of these (without an anchor) passes while the file is missing; once the file
/// exists its entry must go, so that its links are checked like any other
/// ([`every_page_written_elsewhere_is_still_missing`]).
const WRITTEN_ELSEWHERE: &[&str] = &[];

fn every_relative_link_leads_to_a_file_and_heading_that_exist() {
    let root = crate::common::root();
    let files = markdown_files();
    assert!(
        files.len() > 2,
        "expected README.md and the pages of docs/, found {files:?}"
    );
    let problems = problems(root, &files, WRITTEN_ELSEWHERE);
    assert!(
        problems.is_empty(),
        "broken links in the documentation:\n{}",
        problems.join("\n")
    );
}

fn every_page_written_elsewhere_is_still_missing() {
    let root = crate::common::root();
    let merged: Vec<&str> = WRITTEN_ELSEWHERE
        .iter()
        .copied()
        .filter(|page| root.join(page).exists())
        .collect();
    assert!(
        merged.is_empty(),
        "{merged:?} exist now: remove them from WRITTEN_ELSEWHERE in tests/cli/docs/links.rs, \
         so that links to them are checked like any other"
    );
}

/// The checker on pages made for it: it must find what is broken, and only that.
fn the_link_checker_finds_missing_files_and_anchors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Title\n\
         [ok](docs/a.md) [ok](docs/a.md#a-heading-with-code) [ok](#title)\n\
         [missing](docs/gone.md) [bad anchor](docs/a.md#nowhere)\n\
         `[in code](docs/gone.md)` <!-- [in a comment](docs/gone.md) -->\n\
         ```\n[in a block](docs/gone.md)\n```\n\
         [outside](https://example.com/x.md) [pending](docs/later.md)\n\
         [ref]: docs/also-gone.md\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# Page\n\n## A heading: with `code`!\n\n## Repeat\n\n## Repeat\n\n\
         [up](../README.md#title) [second](#repeat-1) [third](#repeat-2)\n",
    )
    .unwrap();
    let files = [root.join("README.md"), root.join("docs/a.md")];
    let found = problems(root, &files, &["docs/later.md"]);
    assert_eq!(
        found,
        [
            "README.md:3: `docs/gone.md`: no such file",
            "README.md:3: `docs/a.md#nowhere`: no heading `nowhere` in docs/a.md",
            "README.md:9: `docs/also-gone.md`: no such file",
            "docs/a.md:9: `#repeat-2`: no heading `repeat-2` in docs/a.md",
        ]
    );
}

fn anchors_are_made_as_github_makes_them() {
    let text = "# Network by name: `network: { allow: [...] }`\n\
                ## Asking a person: `action: ask`\n\
                ## Importing ahead: `pool.preload`\n\
                ### The server's options\n\
                ## A [linked](x.md) heading ##\n\
                ## Repeat\n## Repeat\n";
    assert_eq!(
        anchors(text),
        [
            "network-by-name-network--allow--",
            "asking-a-person-action-ask",
            "importing-ahead-poolpreload",
            "the-servers-options",
            "a-linked-heading",
            "repeat",
            "repeat-1",
        ]
    );
}

/// Every broken link in `files`, as `path:line: target: why`, paths relative to `root`.
fn problems(root: &Path, files: &[PathBuf], written_elsewhere: &[&str]) -> Vec<String> {
    let mut anchors_of: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let shown = relative(root, file);
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if path.is_empty() {
                file.clone()
            } else {
                normalize(&file.parent().unwrap().join(path))
            };
            if !linked.exists() {
                let pending = anchor.is_empty()
                    && written_elsewhere.contains(&relative(root, &linked).as_str());
                if !pending {
                    found.push(format!("{shown}:{line}: `{target}`: no such file"));
                }
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            let known = anchors_of.entry(linked.clone()).or_insert_with(|| {
                std::fs::read_to_string(&linked)
                    .map(|text| anchors(&text))
                    .unwrap_or_default()
            });
            if !known.iter().any(|known| known == anchor) {
                found.push(format!(
                    "{shown}:{line}: `{target}`: no heading `{anchor}` in {}",
                    relative(root, &linked)
                ));
            }
        }
    }
    found
}

/// The link targets in a Markdown text, with their line numbers: inline links and
/// images `[text](target "title")`, and reference definitions `[label]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = without_code_spans(&without_comments(&without_code_blocks(text).join("\n")));
    let line_of = |at: usize| prose[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(start) = prose[from..].find("](").map(|at| from + at + 2) {
        from = start;
        if let Some(target) = inline_target(&prose[start..]) {
            found.push((line_of(start), target));
        }
    }
    let mut offset = 0;
    for line in prose.split('\n') {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('[') {
            if let Some((_, rest)) = trimmed.split_once("]:") {
                if let Some(target) = rest.split_whitespace().next() {
                    let target = target.trim_start_matches('<').trim_end_matches('>');
                    found.push((line_of(offset), target.to_string()));
                }
            }
        }
        offset += line.len() + 1;
    }
    // Stable: links on one line stay in the order they are written.
    found.sort_by_key(|(line, _)| *line);
    found
}

/// The target at the start of what follows `](`: `<…>`, or up to the first space or the
/// `)` that closes the link (parentheses inside it balanced).
fn inline_target(rest: &str) -> Option<String> {
    let rest = rest.trim_start_matches(' ');
    if let Some(bracketed) = rest.strip_prefix('<') {
        return bracketed
            .split_once('>')
            .map(|(target, _)| target.to_string());
    }
    let mut depth = 0usize;
    for (at, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(rest[..at].to_string()),
            ')' => depth -= 1,
            c if c.is_whitespace() => return Some(rest[..at].to_string()),
            _ => {}
        }
    }
    None
}

/// `text` with each HTML comment blanked out (newlines kept, so line numbers hold).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find("-->")
            .map_or(rest.len(), |at| start + at + 3);
        out.extend(rest[start..end].chars().filter(|&c| c == '\n'));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with the contents of its code spans blanked out: a run of backticks opens
/// one, the next run of the same length closes it, within a paragraph (an unmatched run
/// is literal, as in CommonMark). Newlines are kept.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out: Vec<char> = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = run_at(i);
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '\n'
                && chars[j + 1..]
                    .iter()
                    .take_while(|&&c| c != '\n')
                    .all(|c| c.is_whitespace())
            {
                break; // a blank line ends the paragraph
            }
            if chars[j] == '`' {
                let other = run_at(j);
                if other == run {
                    close = Some(j);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.extend(
                    chars[i..end + run]
                        .iter()
                        .map(|&c| if c == '\n' { '\n' } else { ' ' }),
                );
                i = end + run;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out.into_iter().collect()
}

/// The anchors of a page's headings (`#` to `######`), in order, as GitHub makes them,
/// and any `id="…"` or `name="…"` of its HTML.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut found = Vec::new();
    for line in without_code_blocks(text) {
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|&c| c == '#').count();
        let heading = &trimmed[level..];
        if line.len() - trimmed.len() > 3
            || !(1..=6).contains(&level)
            || !(heading.is_empty() || heading.starts_with(' '))
        {
            continue;
        }
        let slug = slug(&heading_text(heading));
        let count = seen.entry(slug.clone()).or_insert(0);
        found.push(if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        });
        *count += 1;
    }
    for attribute in ["id=\"", "name=\""] {
        for (at, _) in text.match_indices(attribute) {
            let value = &text[at + attribute.len()..];
            if let Some((value, _)) = value.split_once('"') {
                found.push(value.to_string());
            }
        }
    }
    found
}

/// What a heading line shows: no closing `#`s, no backticks, a link's text without its
/// target.
fn heading_text(heading: &str) -> String {
    let heading = heading.trim();
    let heading = match heading.trim_end_matches('#') {
        stripped if stripped.ends_with(' ') || stripped.is_empty() => stripped.trim_end(),
        _ => heading,
    };
    let mut shown = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find("](") {
        let close = rest[open..]
            .find(')')
            .map_or(rest.len(), |at| open + at + 1);
        shown.push_str(&rest[..open]);
        rest = &rest[close..];
    }
    shown.push_str(rest);
    shown.replace(['`', '['], "")
}

/// GitHub's anchor of a heading's text.
fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `path` with `.` and `..` parts folded away (the file need not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` relative to `root`, with forward slashes, as the pages write it.
fn relative(root: &Path, path: &Path) -> String {
    let root = normalize(root);
    let path = normalize(path);
    path.strip_prefix(&root)
        .unwrap_or(&path)
        .to_string_lossy()
        .replace('\\', "/")
}
