//! Python 3.12 lets an f-string's replacement field reuse the string's own quote
//! (`f"{"hello"}"`, `f'{d['k']}'`, PEP 701), and the sandbox's Python (3.13) runs it,
//! but this checker's parser reads the 3.11 grammar, where the inner quote ends the
//! string. Such code is refused as unparseable like any other (fail closed); this
//! module only recognises the case, so the finding can say what to write instead.

/// The hint for a syntax error on `line` when the line has such an f-string.
pub fn hint(line: &str) -> Option<String> {
    let quote = reused_quote(line)?;
    let other = if quote == '"' { '\'' } else { '"' };
    Some(format!(
        "this looks like an f-string that uses its own quote ({quote}) inside {{…}}, which \
         Python 3.12 allows and this checker cannot read yet: use the other quote inside \
         (f{quote}{{d[{other}k{other}]}}{quote}), or put the value in a variable first"
    ))
}

/// The quote of the first single-quoted f-string on `line` whose `{…}` contains that
/// same quote.
fn reused_quote(line: &str) -> Option<char> {
    let chars: Vec<char> = line.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        if c == '#' {
            return None;
        }
        if c != '"' && c != '\'' {
            at += 1;
            continue;
        }
        let prefix: String = chars[..at]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        let is_f = prefix.len() <= 2 && prefix.chars().any(|c| c == 'f' || c == 'F');
        let triple = chars.get(at + 1) == Some(&c) && chars.get(at + 2) == Some(&c);
        if triple {
            // Triple-quoted strings may span lines; this line alone cannot say.
            return None;
        }
        match scan_string(&chars, at + 1, c, is_f) {
            Scan::Reused => return Some(c),
            Scan::EndsAt(end) => at = end + 1,
            Scan::Unclosed => return None,
        }
    }
    None
}

enum Scan {
    /// The string closes at this index.
    EndsAt(usize),
    /// An f-string's replacement field holds the string's own quote.
    Reused,
    Unclosed,
}

/// Reads a single-quoted string from `start` (past its opening `quote`).
fn scan_string(chars: &[char], start: usize, quote: char, is_f: bool) -> Scan {
    let mut depth = 0usize;
    let mut at = start;
    while at < chars.len() {
        let c = chars[at];
        if depth == 0 {
            match c {
                '\\' => at += 1,
                '{' if is_f && chars.get(at + 1) == Some(&'{') => at += 1,
                '{' if is_f => depth = 1,
                c if c == quote => return Scan::EndsAt(at),
                _ => {}
            }
        } else {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                c if c == quote => return Scan::Reused,
                '"' | '\'' => {
                    // A string of the other quote inside the field: skip it whole.
                    match chars[at + 1..].iter().position(|&d| d == c) {
                        Some(length) => at += length + 1,
                        None => return Scan::Unclosed,
                    }
                }
                _ => {}
            }
        }
        at += 1;
    }
    Scan::Unclosed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_quote_inside_a_replacement_field_is_recognised() {
        assert_eq!(reused_quote(r#"print(f"{"hello"}")"#), Some('"'));
        assert_eq!(reused_quote("y = f'{d['k']}'"), Some('\''));
        assert_eq!(reused_quote(r#"x = rf"{x!r:>{"w"}}""#), Some('"'));
        assert_eq!(
            reused_quote(r#"s = "{" + f"{'ok'}" + f"{"no"}""#),
            Some('"')
        );
    }

    #[test]
    fn ordinary_strings_and_fstrings_are_not() {
        for line in [
            r#"print(f"{'hello'}")"#,
            r#"print(f"{{literal}} {x}")"#,
            r#"print("{"hello"}")"#,
            r#"print(f"{x}") # f"{"comment"}""#,
            r#"d = {"a": f"{b}"}"#,
        ] {
            assert_eq!(reused_quote(line), None, "{line}");
        }
    }
}
