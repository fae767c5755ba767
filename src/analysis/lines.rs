//! Byte offsets to the 1-based line and character column that diagnostics show, with
//! lines ended where the interpreter ends them, so that a finding's line is the line a
//! traceback would name: `\r\n`, `\n` and a bare `\r` for both languages (CPython's
//! tokenizer and ECMAScript both end a line at a lone carriage return), and U+2028 and
//! U+2029 for JavaScript.

use super::{Language, Span};

/// Where each line terminator of `source` starts, and its length in bytes, as
/// `language`'s interpreter reads them.
pub fn terminators(source: &str, language: Language) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let bytes = source.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let width = match bytes[at] {
            b'\n' => 1,
            b'\r' if bytes.get(at + 1) == Some(&b'\n') => 2,
            b'\r' => 1,
            // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
            0xE2 if language == Language::JavaScript
                && bytes.get(at + 1) == Some(&0x80)
                && matches!(bytes.get(at + 2), Some(0xA8 | 0xA9)) =>
            {
                3
            }
            _ => {
                at += 1;
                continue;
            }
        };
        found.push((at, width));
        at += width;
    }
    found
}

/// Start offsets of every line in a source text, for turning byte offsets into
/// line/column pairs. Columns count characters, as editors do, not bytes.
pub struct LineIndex<'a> {
    source: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Lines as Python ends them (see the module docs).
    pub fn new(source: &'a str) -> Self {
        LineIndex::for_language(source, Language::Python)
    }

    pub fn for_language(source: &'a str, language: Language) -> Self {
        let mut starts = vec![0];
        starts.extend(
            terminators(source, language)
                .into_iter()
                .map(|(at, width)| at + width),
        );
        LineIndex { source, starts }
    }

    /// The text the offsets point into.
    pub fn source(&self) -> &'a str {
        self.source
    }

    /// The 1-based (line, column) of a byte offset; offsets past the end or inside a
    /// multi-byte character are clamped to the nearest character boundary before them.
    pub fn position(&self, offset: usize) -> (u32, u32) {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let column = self.source[self.starts[line]..offset].chars().count();
        (line as u32 + 1, column as u32 + 1)
    }

    /// The span between two byte offsets.
    pub fn span(&self, start: usize, end: usize) -> Span {
        let (line, column) = self.position(start);
        let (end_line, end_column) = self.position(end.max(start));
        Span {
            line,
            column,
            end_line,
            end_column,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_characters_not_bytes() {
        let index = LineIndex::new("ab\nçé = x\n");
        assert_eq!(index.position(0), (1, 1));
        assert_eq!(index.position(3), (2, 1));
        // 'ç' and 'é' are two bytes each; ' ' after them is the third character.
        assert_eq!(index.position(7), (2, 3));
        assert_eq!(index.position(100), (3, 1));
    }

    #[test]
    fn lines_end_where_the_interpreter_ends_them() {
        // `x = 1\r` then `os.system()`: line 2 for Python, as its traceback says.
        let index = LineIndex::new("x = 1\ros.system()\r\nz\u{2028}w");
        assert_eq!(index.position(6), (2, 1));
        assert_eq!(index.position(19), (3, 1));
        assert_eq!(index.position(20), (3, 2));
        let javascript = LineIndex::for_language("a\u{2028}b\u{2029}c\rd", Language::JavaScript);
        assert_eq!(javascript.position(4), (2, 1));
        assert_eq!(javascript.position(8), (3, 1));
        assert_eq!(javascript.position(10), (4, 1));
    }
}
