//! Byte offsets to the 1-based line and character column that diagnostics show.

use super::Span;

/// Start offsets of every line in a source text, for turning byte offsets into
/// line/column pairs. Columns count characters, as editors do, not bytes.
pub struct LineIndex<'a> {
    source: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(source: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
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
}
