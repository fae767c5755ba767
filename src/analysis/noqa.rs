//! `# noqa: RULE-ID` (Python) and `// noqa: RULE-ID` (JavaScript): a comment that asks
//! the linter to pass over a rule's finding on its line. Comments are found by each
//! language's own lexer, so `"# noqa: process-exec"` inside a string is text, not a
//! directive.
//!
//! A frontend only reports these; whether they count is the caller's choice. Only
//! `check` honours them: the server and `run` never do, or code could switch its own
//! checks off by writing a comment.

use super::{Language, LineIndex};

/// One directive, where its comment stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Noqa {
    pub line: u32,
    pub column: u32,
    /// The rule ids named after `noqa:`, as written; empty for a bare `noqa`.
    pub rules: Vec<String>,
}

/// Every directive in `source`, in source order. Source that cannot be lexed to its
/// end gives the directives before the point it stops.
pub fn directives(language: Language, source: &str) -> Vec<Noqa> {
    let index = LineIndex::new(source);
    let comments = match language {
        Language::Python => python_comments(source),
        Language::JavaScript => super::javascript::comments(source),
    };
    comments
        .into_iter()
        .filter_map(|(offset, text)| {
            let rules = parse(&text)?;
            let (line, column) = index.position(offset);
            Some(Noqa {
                line,
                column,
                rules,
            })
        })
        .collect()
}

/// The comments of Python source (offset of the `#`, text with it). The lexer drops
/// comments (without its `full-lexer` feature), but it marks every string: a `#` that
/// no string token covers starts a comment, which runs to the end of its line.
fn python_comments(source: &str) -> Vec<(usize, String)> {
    use rustpython_parser::{lexer::lex, Mode, Tok};
    let mut strings = Vec::new();
    let mut lexed_to = source.len();
    for token in lex(source, Mode::Module) {
        match token {
            Ok((Tok::String { .. }, range)) => {
                strings.push(range.start().to_usize()..range.end().to_usize());
            }
            Ok(_) => {}
            Err(error) => {
                lexed_to = error.location.to_usize();
                break;
            }
        }
    }
    let mut comments = Vec::new();
    let mut strings = strings.into_iter().peekable();
    let mut offset = 0;
    while let Some(found) = source[offset..lexed_to].find('#') {
        let at = offset + found;
        while strings.next_if(|string| string.end <= at).is_some() {}
        if let Some(string) = strings.peek().filter(|string| string.start <= at) {
            offset = string.end;
            continue;
        }
        let end = source[at..].find('\n').map_or(source.len(), |n| at + n);
        comments.push((at, source[at..end].trim_end_matches('\r').to_string()));
        offset = end;
    }
    comments
}

/// The rule ids of a comment that is a `noqa` directive (empty: bare), else `None`.
/// `noqa` may follow other text of the comment (`# type: ignore  # noqa: x`), in any
/// case; ids are separated by commas or spaces and end at the first word that is not
/// one (`# noqa: network -- reads a fixture`).
fn parse(comment: &str) -> Option<Vec<String>> {
    let lower = comment.to_ascii_lowercase();
    let at = lower.match_indices("noqa").map(|(at, _)| at).find(|&at| {
        let before = lower[..at].trim_end_matches(' ');
        let after = lower[at + 4..].chars().next();
        (before.is_empty()
            || before.ends_with('#')
            || before.ends_with("//")
            || before.ends_with("/*"))
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    })?;
    let rest = comment[at + 4..].trim_start();
    let Some(list) = rest.strip_prefix(':') else {
        return Some(Vec::new());
    };
    let is_id = |word: &&str| {
        word.starts_with(|c: char| c.is_ascii_alphanumeric())
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    Some(
        list.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|word| !word.is_empty())
            .take_while(is_id)
            .map(str::to_string)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(language: Language, source: &str) -> Vec<(u32, Vec<String>)> {
        directives(language, source)
            .into_iter()
            .map(|noqa| (noqa.line, noqa.rules))
            .collect()
    }

    #[test]
    fn python_directives_are_comments_not_strings() {
        let source = "import os  # noqa: process-exec\n\
                      os.system('x # noqa: network')\n\
                      x = 1  # NoQA: a, b c -- why\n\
                      y = 2  # noqa\n\
                      z = 3  # type: ignore  # noqa:dynamic-code\n\
                      w = 4  # noqanothing\n";
        assert_eq!(
            found(Language::Python, source),
            [
                (1, vec!["process-exec".to_string()]),
                (3, vec!["a".into(), "b".into(), "c".into()]),
                (4, vec![]),
                (5, vec!["dynamic-code".to_string()]),
            ]
        );
    }

    #[test]
    fn javascript_directives_are_comments_not_strings() {
        let source = "const cp = require('child_process'); // noqa: process-exec\n\
                      const s = '// noqa: network';\n\
                      fetch(u); /* noqa: network */\n";
        assert_eq!(
            found(Language::JavaScript, source),
            [
                (1, vec!["process-exec".to_string()]),
                (3, vec!["network".to_string()]),
            ]
        );
    }
}
