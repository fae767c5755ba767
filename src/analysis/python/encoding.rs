//! Spelling: the source-encoding cookie and identifier normalisation.
//!
//! CPython decodes a file by the `coding` cookie on its first two lines, so a snippet
//! declaring `utf-7` means something else to the interpreter than the UTF-8 text this
//! analyser reads (`+AGkAbQBw-` hides an `import`). Any cookie that is not UTF-8 is
//! refused. CPython also NFKC-normalises every identifier, so `ｅｖａｌ` *is* `eval`:
//! every name is normalised the same way before it is resolved.

use std::borrow::Cow;
use unicode_normalization::UnicodeNormalization;

/// An identifier as CPython sees it: NFKC-normalised (ASCII is returned as is).
pub fn normalize(identifier: &str) -> Cow<'_, str> {
    if identifier.is_ascii() {
        Cow::Borrowed(identifier)
    } else {
        Cow::Owned(identifier.nfkc().collect())
    }
}

/// A refused coding cookie: its byte range and the declared encoding.
pub struct RefusedCookie {
    pub start: usize,
    pub end: usize,
    pub encoding: String,
}

/// The cookie on line 1 or 2 (line 2 only if line 1 is blank or a comment, as in
/// CPython), if it names an encoding other than UTF-8.
pub fn refused_cookie(source: &str) -> Option<RefusedCookie> {
    let source_without_bom = source.strip_prefix('\u{feff}').unwrap_or(source);
    let bom = source.len() - source_without_bom.len();
    let mut offset = bom;
    for (number, line) in cpython_lines(source_without_bom).take(2).enumerate() {
        if let Some((start, end, encoding)) = cookie_in_line(line) {
            if is_utf8_name(encoding) {
                return None;
            }
            return Some(RefusedCookie {
                start: offset + start,
                end: offset + end,
                encoding: encoding.to_string(),
            });
        }
        let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
        let blank_or_comment = trimmed.is_empty()
            || trimmed.starts_with('#')
            || trimmed.starts_with('\n')
            || trimmed.starts_with('\r');
        if number == 0 && !blank_or_comment {
            return None;
        }
        offset += line.len();
    }
    None
}

/// Lines as CPython's tokenizer ends them: at `\r\n`, `\n` or a bare `\r` (each line
/// with its terminator). Splitting at `\n` alone would put a cookie that follows a bare
/// `\r` on line 1 for us and on line 2 for CPython, which honours it.
fn cpython_lines(source: &str) -> impl Iterator<Item = &str> {
    let mut rest = source;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = match rest.find(['\r', '\n']) {
            Some(at) if rest[at..].starts_with("\r\n") => at + 2,
            Some(at) => at + 1,
            None => rest.len(),
        };
        let (line, tail) = rest.split_at(end);
        rest = tail;
        Some(line)
    })
}

/// CPython's `^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)`, without a regex.
fn cookie_in_line(line: &str) -> Option<(usize, usize, &str)> {
    let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
    if !trimmed.starts_with('#') {
        return None;
    }
    let comment_start = line.len() - trimmed.len();
    let mut search_from = comment_start;
    while let Some(found) = line[search_from..].find("coding") {
        let after = search_from + found + "coding".len();
        let rest = &line[after..];
        if rest.starts_with(':') || rest.starts_with('=') {
            let value = rest[1..].trim_start_matches([' ', '\t']);
            let value_start = line.len() - value.len();
            let length = value
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
                .unwrap_or(value.len());
            if length > 0 {
                return Some((search_from + found, value_start + length, &value[..length]));
            }
        }
        search_from = after;
    }
    None
}

/// The names CPython's codec registry resolves to UTF-8.
fn is_utf8_name(name: &str) -> bool {
    let name: String = name
        .chars()
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    matches!(
        name.as_str(),
        "utf_8" | "utf8" | "u8" | "utf" | "utf8_ucs2" | "utf8_ucs4" | "cp65001"
    ) || name.starts_with("utf_8_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies() {
        assert!(refused_cookie("# -*- coding: utf-8 -*-\nx = 1\n").is_none());
        assert!(refused_cookie("# coding=UTF_8\n").is_none());
        assert!(
            refused_cookie("#!/usr/bin/env python\n# vim: set fileencoding=utf8 :\n").is_none()
        );
        let refused = refused_cookie("# -*- coding: utf-7 -*-\n").unwrap();
        assert_eq!(refused.encoding, "utf-7");
        assert!(refused_cookie("#!/usr/bin/python\n# coding: latin-1\n").is_some());
        // Line 2 counts only after a blank or comment line.
        assert!(refused_cookie("x = 1\n# coding: utf-7\n").is_none());
        // Line 3 never counts.
        assert!(refused_cookie("\n\n# coding: utf-7\n").is_none());
    }

    #[test]
    fn nfkc() {
        assert_eq!(normalize("ｅｖａｌ"), "eval");
        assert_eq!(normalize("os"), "os");
    }

    #[test]
    fn a_cookie_after_a_bare_carriage_return_is_on_line_two_as_for_cpython() {
        // CPython ends line 1 at the `\r`, so the cookie is on line 2 and honoured.
        let source = "\r# -*- coding: utf-7 -*-\nx = 1 #+AAo-print(1)\n";
        let refused = refused_cookie(source).expect("the utf-7 cookie is found");
        assert_eq!(refused.encoding, "utf-7");
        assert_eq!(&source[refused.start..refused.start + 6], "coding");
        // Line 1 is code: a cookie on line 2 is not honoured, by CPython or by us.
        assert!(refused_cookie("x = 1\r# coding: utf-7\n").is_none());
        // \r\n is one line end, not two.
        assert!(refused_cookie("x = 1\r\n# coding: utf-7\n").is_none());
        assert!(refused_cookie("# c\r\n# coding: utf-7\n").is_some());
    }
}
