//! Indentation that CPython reads and rustpython's tokenizer refuses: spaces followed by
//! a tab (`"  \tx = 1"`). CPython measures a tab as reaching the next multiple of 8 and
//! accepts the line when that agrees with the block structure; rustpython stops with
//! "Tabs not allowed as part of indentation after spaces". A checker that refuses what
//! the interpreter runs would deny harmless code, and worse, a parser that reads a file
//! differently from the interpreter is a place for an evasion to hide.
//!
//! So when rustpython refuses only that, each such indentation is re-spelled as the
//! spaces CPython counts (which gives CPython's block structure whenever CPython accepts
//! the file, and code CPython refuses never runs), the result is parsed, and the facts'
//! columns are mapped back to the original text. Line numbers do not change.

use crate::analysis::Fact;

/// The error rustpython gives for the one spelling this module re-spells.
pub const REFUSED: &str = "Tabs not allowed as part of indentation after spaces";

/// A source with its mixed indentation re-spelled, and how to map columns back.
pub struct Respelled {
    pub source: String,
    /// Per re-spelled line (1-based): the new indentation's width and the original's,
    /// both in characters.
    lines: Vec<(u32, u32, u32)>,
}

/// The source with every indentation that has a tab after a space re-spelled in
/// spaces, or `None` when there is none.
pub fn respell(source: &str) -> Option<Respelled> {
    let mut out = String::with_capacity(source.len() + 64);
    let mut lines = Vec::new();
    for (number, line) in source.split_inclusive('\n').enumerate() {
        let indent_len = line
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\x0c'))
            .count();
        let indent = &line[..indent_len];
        let mixed = indent
            .find(' ')
            .is_some_and(|space| indent[space..].contains('\t'));
        if !mixed {
            out.push_str(line);
            continue;
        }
        let mut column = 0u32;
        for byte in indent.bytes() {
            column = match byte {
                b'\t' => (column / 8 + 1) * 8,
                b'\x0c' => 0,
                _ => column + 1,
            };
        }
        out.extend(std::iter::repeat_n(' ', column as usize));
        out.push_str(&line[indent_len..]);
        lines.push((number as u32 + 1, column, indent_len as u32));
    }
    (!lines.is_empty()).then_some(Respelled { source: out, lines })
}

impl Respelled {
    /// Moves the facts' columns from the re-spelled text back to the original.
    pub fn map_back(&self, facts: &mut [Fact]) {
        let shift = |line: u32, column: u32| -> u32 {
            match self.lines.iter().find(|(number, _, _)| *number == line) {
                Some(&(_, new, old)) if column > new => column - new + old,
                Some(&(_, _, old)) => column.min(old + 1),
                None => column,
            }
        };
        for fact in facts {
            fact.span.column = shift(fact.span.line, fact.span.column);
            fact.span.end_column = shift(fact.span.end_line, fact.span.end_column);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_then_a_tab_reach_the_next_multiple_of_eight() {
        let source = "def f():\n  \tx = 1\n  \treturn x\nprint(f())\n";
        let respelled = respell(source).expect("mixed indentation");
        assert_eq!(
            respelled.source,
            "def f():\n        x = 1\n        return x\nprint(f())\n"
        );
        assert!(
            respell("if 1:\n\tx = 1\n    y = 2\n").is_none(),
            "no tab after a space"
        );
    }

    #[test]
    fn columns_map_back_to_the_original_text() {
        let source = "import os\nif 1:\n  \tos.system('x')\n";
        let respelled = respell(source).unwrap();
        let facts = crate::analysis::python::analyze(&respelled.source);
        let mut facts = facts;
        respelled.map_back(&mut facts);
        let system = facts
            .iter()
            .find(|f| f.span.line == 3)
            .expect("a fact on line 3");
        // `os.system` starts after the 3 characters of "  \t" in the original.
        assert_eq!(system.span.column, 4, "{system:?}");
    }
}
