//! Annotations and type parameters: code written to run later, outside the snippet's
//! control flow.
//!
//! `typing.get_type_hints`, dataclasses and pydantic evaluate string annotations
//! (`def f(x: "__import__('os').system('id')")`), `typing.ForwardRef("…")` evaluates its
//! string, and a PEP 695 bound runs when `f.__type_params__[0].__bound__` is read. The
//! checker cannot know whether they will be evaluated, so it reads them as the code they
//! are, in the scope where they stand.

use super::*;
use rustpython_parser::Parse;

impl Walker<'_> {
    /// An annotation: its expression, and every string in it read as an expression.
    pub(super) fn annotation(&mut self, expr: &Expr) {
        self.expr(expr, false);
        self.strings_as_code(expr);
    }

    /// PEP 695 type parameters: a `TypeVar`'s bound is an annotation evaluated lazily.
    pub(super) fn type_params(&mut self, params: &[ast::TypeParam]) {
        for param in params {
            if let ast::TypeParam::TypeVar(var) = param {
                if let Some(bound) = &var.bound {
                    self.annotation(bound);
                }
            }
        }
    }

    /// Calls that keep a string to evaluate later: `typing.ForwardRef("…")`, and the
    /// `bound=` of `typing.TypeVar`.
    pub(super) fn evaluated_later(&mut self, call: &ast::ExprCall, names: &[String]) {
        for name in names {
            match name.as_str() {
                "typing.ForwardRef" => {
                    if let Some(arg) = call.args.first() {
                        self.strings_as_code(arg);
                    }
                }
                "typing.TypeVar" => {
                    for keyword in &call.keywords {
                        if keyword.arg.as_ref().is_some_and(|a| a.as_str() == "bound") {
                            self.strings_as_code(&keyword.value);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The strings of an annotation (`"Foo"`, `list["Foo"]`, `"A" | None`), walked as code.
    fn strings_as_code(&mut self, expr: &Expr) {
        match expr {
            Expr::Constant(c) => {
                if let ast::Constant::Str(text) = &c.value {
                    self.string_annotation(c.range, text);
                }
            }
            Expr::Subscript(s) => {
                self.strings_as_code(&s.value);
                self.strings_as_code(&s.slice);
            }
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                for e in elts {
                    self.strings_as_code(e);
                }
            }
            Expr::BinOp(b) => {
                self.strings_as_code(&b.left);
                self.strings_as_code(&b.right);
            }
            _ => {}
        }
    }

    fn string_annotation(&mut self, literal: TextRange, text: &str) {
        if self.depth >= MAX_DEPTH {
            self.too_deep.get_or_insert(literal.start().to_usize());
            return;
        }
        if super::super::depth::too_deep(text).is_some() {
            // Too deep to parse safely: refused like any code that cannot be checked.
            self.too_deep.get_or_insert(literal.start().to_usize());
            return;
        }
        let exact = content_offset(self.index.source(), literal, text);
        let start = exact.unwrap_or(literal.start());
        // Not Python: the annotation is a plain label, and evaluating it would fail.
        let Ok(parsed) = Expr::parse_starts_at(text, "<annotation>", start) else {
            return;
        };
        let outer = self.within.replace(Within {
            literal,
            exact: exact.is_some(),
        });
        self.depth += 1;
        self.annotation(&parsed);
        self.depth -= 1;
        self.within = outer;
    }
}

/// Where a string literal's text starts in the source, when the literal spells it
/// as is (no escapes, no implicit concatenation), so facts inside get exact columns.
fn content_offset(source: &str, literal: TextRange, text: &str) -> Option<TextSize> {
    let spelled = source.get(literal.start().to_usize()..literal.end().to_usize())?;
    let unprefixed = spelled.trim_start_matches(|c: char| "rRuU".contains(c));
    let prefix = spelled.len() - unprefixed.len();
    let quote = ["\"\"\"", "'''", "\"", "'"]
        .into_iter()
        .find(|q| unprefixed.starts_with(q) && unprefixed.ends_with(q))?;
    let inner = unprefixed.get(quote.len()..unprefixed.len().checked_sub(quote.len())?)?;
    if inner != text {
        return None;
    }
    Some(literal.start() + TextSize::try_from(prefix + quote.len()).ok()?)
}
