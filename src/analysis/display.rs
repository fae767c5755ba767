//! How source text and names a snippet chose are shown to a person: split into lines
//! where the interpreter ends them, with every character that a terminal or the Unicode
//! bidirectional algorithm would act on (rather than print) spelled out as an escape.
//!
//! What a person approves must be what runs. A bare `\r` ends a line for Python and
//! Node but not for a line counter that looks for `\n`, so a second line can hide after
//! the first; U+2028 and U+2029 end lines for JavaScript; an ANSI escape can clear the
//! screen or rewrite what was printed before it; a right-to-left override
//! ("trojan source") shows code in another order than the interpreter reads it. The
//! question shows lines as the interpreter counts them and none of those characters
//! raw.

use super::Language;

/// `code` split where `language`'s interpreter ends a line, terminators removed: `\r\n`,
/// `\n` and a bare `\r` for both (CPython's tokenizer and Node's), and U+2028 and
/// U+2029 for JavaScript. A form feed is whitespace to both, not a line end. A final
/// terminator does not start another line.
pub fn interpreter_lines(language: Language, code: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (at, width) in super::lines::terminators(code, language) {
        lines.push(&code[start..at]);
        start = at + width;
    }
    if start < code.len() {
        lines.push(&code[start..]);
    }
    lines
}

/// `text` with every control character (C0 but tab, DEL, C1), every invisible or
/// direction-changing character (bidi overrides and isolates, zero-width characters,
/// the byte order mark) and every line or paragraph separator written as `\u{…}`
/// (`\t` stays a tab; `\\` is doubled so an escape cannot be faked).
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push('\t'),
            c if acts_rather_than_prints(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Whether `text` holds a character [`escaped`] would spell out.
pub fn has_hidden_characters(text: &str) -> bool {
    text.chars()
        .any(|c| c != '\t' && acts_rather_than_prints(c))
}

/// Characters a terminal or a text renderer acts on instead of printing.
fn acts_rather_than_prints(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F
            | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
            | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFB | 0xE0000..=0xE0FFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_where_the_interpreter_ends_them() {
        let python = interpreter_lines(Language::Python, "a\rb\r\nc\nd\u{2028}e\x0cf\n");
        assert_eq!(python, ["a", "b", "c", "d\u{2028}e\x0cf"]);
        let javascript = interpreter_lines(Language::JavaScript, "a\rb\u{2028}c\u{2029}d");
        assert_eq!(javascript, ["a", "b", "c", "d"]);
        assert_eq!(interpreter_lines(Language::Python, ""), Vec::<&str>::new());
        assert_eq!(interpreter_lines(Language::Python, "\n\n"), ["", ""]);
    }

    #[test]
    fn what_a_terminal_acts_on_is_spelled_out() {
        assert_eq!(escaped("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(
            escaped("x = 1 \u{202e}# \u{2066}"),
            "x = 1 \\u{202e}# \\u{2066}"
        );
        assert_eq!(escaped("tab\tand \\u{41}"), "tab\tand \\\\u{41}");
        assert_eq!(
            escaped("zero\u{200b}width\u{feff}"),
            "zero\\u{200b}width\\u{feff}"
        );
        assert_eq!(escaped("C1 \u{9b}"), "C1 \\u{9b}");
        assert_eq!(escaped("é ü 中文 😀"), "é ü 中文 😀");
        assert!(has_hidden_characters("\u{202e}") && !has_hidden_characters("a\tb é"));
    }
}
