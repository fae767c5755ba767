//! Fail-closed parsing: the first `ERROR` or `MISSING` node tree-sitter produced.
//!
//! tree-sitter recovers from syntax errors and still hands back a tree, but code that
//! does not parse will not run either, and a recovered tree may hide the very call we
//! are looking for inside an `ERROR` node. So any error makes the whole snippet
//! `Unparseable` and nothing else is reported about it.

use super::super::{Fact, FactKind, LineIndex};
use tree_sitter::Node;

/// The first syntax error in source order, as an `Unparseable` fact.
pub fn first_error(root: Node, source: &str, index: &LineIndex) -> Option<Fact> {
    if !root.has_error() {
        return None;
    }
    let mut node = root;
    // Descend towards the first child that holds an error; stop at the error itself.
    'descend: loop {
        if node.is_error() || node.is_missing() {
            break;
        }
        let mut cursor = node.walk();
        if cursor.goto_first_child() {
            loop {
                let child = cursor.node();
                if child.is_error() || child.is_missing() || child.has_error() {
                    node = child;
                    continue 'descend;
                }
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        break;
    }
    let reason = if node.is_missing() {
        format!("syntax error: missing `{}`", node.kind())
    } else if node.is_error() {
        let text = source.get(node.byte_range()).unwrap_or("");
        let excerpt: String = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .take(30)
            .collect();
        if excerpt.is_empty() {
            "syntax error".to_string()
        } else {
            format!("syntax error near `{excerpt}`")
        }
    } else {
        "syntax error".to_string()
    };
    let end = if node.end_byte() > node.start_byte() {
        node.end_byte()
    } else {
        node.start_byte() + 1
    };
    Some(Fact {
        kind: FactKind::Unparseable { reason },
        span: index.span(node.start_byte(), end),
    })
}
