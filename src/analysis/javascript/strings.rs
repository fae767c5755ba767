//! Unescaping and constant folding of strings.
//!
//! Names are matched after the source's own escapes are undone, so `\u0065val`,
//! `'\x63hild_process'` and `'\u{63}hild_process'` are `eval` and `child_process`. The
//! folding covers the forms people use to hide a module or global name from a grep:
//! concatenation, substitution-only templates, `.concat`, `.join`, `.split`,
//! `.reverse`, case changes, `.replace` with string patterns and
//! `String.fromCharCode`. Anything else folds to "unknown", which callers treat
//! conservatively.

use super::model::ScopeId;
use super::model::{number_to_string, Val, Vals};
use super::Analyzer;
use super::{Field, NodeExt};
use std::borrow::Cow;
use tree_sitter::Node;

/// Longest string folding builds; longer results widen to "unknown".
const MAX_FOLDED_LEN: usize = 4096;

/// Undoes JavaScript escape sequences (`\n`, `\xHH`, `\uHHHH`, `\u{H…}`, line
/// continuations, and `\c` meaning `c` for every other character).
pub fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            break;
        };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            '0' if !chars.peek().is_some_and(|c| c.is_ascii_digit()) => out.push('\0'),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
            }
            '\n' | '\u{2028}' | '\u{2029}' => {}
            'x' => {
                let hex: String = chars.by_ref().take(2).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == 2 => out.push(ch),
                    _ => {
                        out.push('x');
                        out.push_str(&hex);
                    }
                }
            }
            'u' => {
                let hex: String = if chars.peek() == Some(&'{') {
                    chars.next();
                    let mut hex = String::new();
                    for h in chars.by_ref() {
                        if h == '}' || hex.len() > 8 {
                            break;
                        }
                        hex.push(h);
                    }
                    hex
                } else {
                    chars.by_ref().take(4).collect()
                };
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push('u');
                        out.push_str(&hex);
                    }
                }
            }
            other => out.push(other),
        }
    }
    Cow::Owned(out)
}

impl<'a> Analyzer<'a> {
    /// An identifier's (or property name's) name, escapes undone.
    pub fn identifier(&self, node: Node) -> Cow<'a, str> {
        unescape(self.text(node))
    }

    /// The value of a string literal node, quotes dropped and escapes undone.
    pub fn string_value(&self, node: Node) -> Cow<'a, str> {
        let text = self.text(node);
        let inner = if text.len() >= 2 {
            text.get(1..text.len() - 1).unwrap_or("")
        } else {
            ""
        };
        unescape(inner)
    }

    /// A template literal: constant when every substitution folds.
    pub fn template_value(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> Vals {
        let mut results = vec![String::new()];
        let mut cursor = node.walk();
        let mut literal_start = node.start_byte() + 1;
        for child in node.children(&mut cursor) {
            if child.kind() != "template_substitution" {
                continue;
            }
            let literal = self
                .source
                .get(literal_start..child.start_byte())
                .unwrap_or("");
            let literal = unescape(literal);
            for r in &mut results {
                r.push_str(&literal);
            }
            literal_start = child.end_byte();
            let Some(inner) = child.named_child(0) else {
                return Vals::unknown();
            };
            let (parts, other) = self.eval(inner, scope, depth + 1).strings();
            if other || parts.is_empty() {
                return Vals::unknown();
            }
            results = match product(&results, &parts) {
                Some(results) => results,
                None => return Vals::unknown(),
            };
        }
        let end = node.end_byte().saturating_sub(1).max(literal_start);
        let tail = unescape(self.source.get(literal_start..end).unwrap_or(""));
        let mut out = Vals::default();
        for mut r in results {
            r.push_str(&tail);
            out.push(Val::Str(r));
        }
        out
    }

    /// `a + b`, folded for strings and numbers; `||`, `??` and `&&` give either side.
    pub fn binary_value(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> Vals {
        let (Some(left), Some(right), Some(op)) = (
            node.field(Field::Left),
            node.field(Field::Right),
            node.field(Field::Operator),
        ) else {
            return Vals::unknown();
        };
        match op.kind() {
            "||" | "??" | "&&" => {
                let mut out = self.eval(left, scope, depth + 1);
                out.extend(self.eval(right, scope, depth + 1));
                out
            }
            "+" => {
                let l = self.eval(left, scope, depth + 1);
                let r = self.eval(right, scope, depth + 1);
                if l.unknown || r.unknown || l.items.is_empty() || r.items.is_empty() {
                    return Vals::unknown();
                }
                let mut out = Vals::default();
                for a in &l.items {
                    for b in &r.items {
                        match (a, b) {
                            (Val::Num(x), Val::Num(y)) => out.push(Val::Num(x + y)),
                            _ => match (as_text(a), as_text(b)) {
                                (Some(x), Some(y)) if x.len() + y.len() <= MAX_FOLDED_LEN => {
                                    out.push(Val::Str(x + &y))
                                }
                                _ => out.unknown = true,
                            },
                        }
                    }
                }
                out
            }
            _ => Vals::unknown(),
        }
    }

    /// Folds `'a'.concat(…)`, `[…].join(…)`, `'ab'.split('')`, `.reverse()`, case
    /// changes and string `.replace`; `None` when the receiver is not constant.
    pub fn string_method(
        &self,
        callee: Node<'a>,
        receiver: &Vals,
        args: Option<Node<'a>>,
        scope: ScopeId,
        depth: u32,
    ) -> Option<Vals> {
        let property = callee.field(Field::Property)?;
        let method = self.identifier(property);
        if receiver.unknown || receiver.items.is_empty() {
            return None;
        }
        if !receiver
            .items
            .iter()
            .all(|v| matches!(v, Val::Str(_) | Val::StrList(_)))
        {
            return None;
        }
        let arg = |n: usize| -> Option<Vec<String>> {
            let node = self.argument(args?, n)?;
            let (strings, other) = self.eval(node, scope, depth + 1).strings();
            (!other && !strings.is_empty()).then_some(strings)
        };
        let single = |n: usize| arg(n).filter(|v| v.len() == 1).map(|mut v| v.remove(0));
        let mut out = Vals::default();
        for val in &receiver.items {
            match (val, method.as_ref()) {
                (Val::Str(s), "concat") => {
                    let mut text = s.clone();
                    let count = args.map(|a| a.named_child_count()).unwrap_or(0);
                    for n in 0..count {
                        text.push_str(&single(n)?);
                    }
                    out.push(Val::Str(text));
                }
                (Val::Str(s), "toLowerCase") => out.push(Val::Str(s.to_lowercase())),
                (Val::Str(s), "toUpperCase") => out.push(Val::Str(s.to_uppercase())),
                (Val::Str(s), "trim") => out.push(Val::Str(s.trim().to_string())),
                (Val::Str(s), "toString" | "valueOf") => out.push(Val::Str(s.clone())),
                (Val::Str(s), "split") => {
                    let sep = single(0)?;
                    let parts: Vec<String> = if sep.is_empty() {
                        s.chars().map(String::from).collect()
                    } else {
                        s.split(sep.as_str()).map(String::from).collect()
                    };
                    out.push(Val::StrList(parts));
                }
                (Val::Str(s), "replace" | "replaceAll") => {
                    let pattern = self.argument(args?, 0)?;
                    if pattern.kind() == "regex" {
                        return None;
                    }
                    let (from, to) = (single(0)?, single(1)?);
                    out.push(Val::Str(if method == "replace" {
                        s.replacen(&from, &to, 1)
                    } else {
                        s.replace(&from, &to)
                    }));
                }
                (Val::StrList(list), "join") => {
                    let sep = match args.and_then(|a| self.argument(a, 0)) {
                        Some(_) => single(0)?,
                        None => ",".to_string(),
                    };
                    out.push(Val::Str(list.join(&sep)));
                }
                (Val::StrList(list), "reverse") => {
                    out.push(Val::StrList(list.iter().rev().cloned().collect()))
                }
                _ => return None,
            }
        }
        Some(out)
    }

    /// `String.fromCharCode(101, 118, …)` with constant codes.
    pub fn char_codes(&self, args: Node<'a>, scope: ScopeId, depth: u32) -> Option<String> {
        let mut out = String::new();
        let mut cursor = args.walk();
        for arg in args.named_children(&mut cursor) {
            let vals = self.eval(arg, scope, depth + 1);
            match vals.items.as_slice() {
                [Val::Num(n)] if !vals.unknown => out.push(char::from_u32(*n as u32)?),
                _ => return None,
            }
        }
        Some(out)
    }
}

fn as_text(val: &Val) -> Option<String> {
    match val {
        Val::Str(s) => Some(s.clone()),
        Val::Num(n) => Some(number_to_string(*n)),
        _ => None,
    }
}

/// Every concatenation of a prefix and a part, or `None` if that is too many.
fn product(prefixes: &[String], parts: &[String]) -> Option<Vec<String>> {
    if prefixes.len() * parts.len() > 16 {
        return None;
    }
    Some(
        prefixes
            .iter()
            .flat_map(|p| parts.iter().map(move |s| format!("{p}{s}")))
            .collect(),
    )
}
