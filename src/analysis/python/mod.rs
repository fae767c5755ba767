//! The Python frontend: source text in, `Fact`s out.
//!
//! The pipeline, one file per concern (as in ruff):
//! - `encoding`: refuse a non-UTF-8 coding cookie; NFKC-normalise identifiers.
//! - `depth`: refuse trees too deep to parse safely, before parsing.
//! - parse with `rustpython-parser`; a syntax error is the only fact (fail closed).
//! - `scope`: which names each scope binds (Python's scoping rules).
//! - `resolve`: what every use resolves to, and the facts, with help from
//!   `fold` (constant strings), `dynamic` (getattr, `__import__`, introspection),
//!   `loading` (the import path, module files written), `modes` (calls an argument
//!   makes unsafe) and `paths` (filesystem calls).
//! - `fstring`: a syntax error from a Python 3.12 f-string gets a hint.

mod depth;
mod dynamic;
mod encoding;
mod fold;
mod fstring;
mod indent;
mod loading;
mod modes;
mod paths;
mod resolve;
mod scope;

use super::{Fact, FactKind, LineIndex};
use rustpython_parser::{ast, Parse};

/// Deepest statement/expression nesting the resolver walks; deeper code is refused
/// (no ordinary program comes close, and every recursive walk stays bounded).
pub(crate) const MAX_DEPTH: usize = 200;

/// Turns Python source into facts. Never panics; on anything it cannot analyse it
/// returns a single [`FactKind::Unparseable`].
pub fn analyze(source: &str) -> Vec<Fact> {
    let index = LineIndex::new(source);
    let refuse = |start: usize, end: usize, reason: String| {
        vec![Fact {
            kind: FactKind::Unparseable { reason },
            span: index.span(start, end),
        }]
    };
    if let Some(cookie) = encoding::refused_cookie(source) {
        return refuse(
            cookie.start,
            cookie.end,
            format!(
                "source encoding `{}` is refused: only UTF-8 source is checked, and Python \
                 would decode this file differently",
                cookie.encoding
            ),
        );
    }
    if let Some(offset) = depth::too_deep(source) {
        return refuse(offset, offset + 1, "nesting too deep".to_string());
    }
    let body = match ast::Suite::parse(source, "<snippet>") {
        Ok(body) => body,
        Err(error) if error.error.to_string().contains(indent::REFUSED) => {
            // Indentation CPython accepts and rustpython does not: parse it as CPython
            // measures it (see `indent`).
            if let Some(respelled) = indent::respell(source) {
                let mut facts = analyze(&respelled.source);
                respelled.map_back(&mut facts);
                return facts;
            }
            let offset = error.offset.to_usize();
            return refuse(offset, offset + 1, format!("syntax error: {}", error.error));
        }
        Err(error) => {
            let mut offset = error.offset.to_usize();
            let message = error.error.to_string();
            // An unterminated string is reported after its line's newline: point at
            // the end of the line it is on instead.
            if message.starts_with("EOL")
                && offset > 0
                && source.as_bytes().get(offset - 1) == Some(&b'\n')
            {
                offset -= 1;
            }
            let (line, _) = index.position(offset);
            let line = source.lines().nth(line as usize - 1).unwrap_or("");
            let hint = fstring::hint(line)
                .map(|hint| format!("; {hint}"))
                .unwrap_or_default();
            return refuse(offset, offset + 1, format!("syntax error: {message}{hint}"));
        }
    };
    match resolve::resolve(&body, &index) {
        Ok(facts) => facts,
        Err(resolve::Refusal::TooDeep(offset)) => {
            refuse(offset, offset + 1, "nesting too deep".to_string())
        }
        Err(resolve::Refusal::TooManyMeanings(offset)) => refuse(
            offset,
            offset + 1,
            "a name takes too many possible meanings to follow".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests;
