//! Constant folding of strings, so that names built at run time are still names.
//!
//! `getattr(os, 'sys' + 'tem')`, `__import__(''.join(['o', 's']))`, `'metsys'[::-1]`,
//! `chr(111) + chr(115)`, `f'{a}{b}'`, `b'b3M='`-style decodes: each spells a constant
//! that bandit-style checks miss. Folding turns them back into the name; what cannot
//! be folded stays non-literal, and the caller reports *that* (fail closed). Callees
//! (`chr`, `base64.b64decode`, …) count only when they resolve to the real thing, so a
//! user's own `def chr(...)` cannot steer the result.

use rustpython_parser::ast::{self, Constant, Expr, Operator};

/// Longest string or sequence folded; beyond it folding gives up (and callers fail closed).
const MAX_LENGTH: usize = 4096;
/// Deepest expression folded.
const MAX_DEPTH: usize = 64;

/// A folded constant.
#[derive(Debug, Clone, PartialEq)]
pub enum Const {
    Str(String),
    Bytes(Vec<u8>),
    Int(i64),
    Seq(Vec<Const>),
}

/// What folding needs to know about names.
pub trait FoldEnv {
    /// The one string constant a name is bound to here, if that is all it can be.
    fn string_of(&self, name: &str) -> Option<String>;
    /// The qualified name a callee resolves to, if it resolves to exactly one.
    fn callee(&self, func: &Expr) -> Option<String>;
}

/// The string an expression always evaluates to, if it can be computed statically.
pub fn fold_str(env: &dyn FoldEnv, expr: &Expr) -> Option<String> {
    match fold(env, expr, 0)? {
        Const::Str(s) => Some(s),
        _ => None,
    }
}

/// Any constant an expression always evaluates to.
pub fn fold(env: &dyn FoldEnv, expr: &Expr, depth: usize) -> Option<Const> {
    if depth > MAX_DEPTH {
        return None;
    }
    let depth = depth + 1;
    let folded = match expr {
        Expr::Constant(c) => constant(&c.value)?,
        Expr::Name(n) => Const::Str(env.string_of(&super::encoding::normalize(&n.id))?),
        Expr::BinOp(b) => binop(
            fold(env, &b.left, depth)?,
            &b.op,
            fold(env, &b.right, depth)?,
        )?,
        Expr::UnaryOp(u) => match (&u.op, fold(env, &u.operand, depth)?) {
            (ast::UnaryOp::USub, Const::Int(i)) => Const::Int(i.checked_neg()?),
            (ast::UnaryOp::UAdd, Const::Int(i)) => Const::Int(i),
            (ast::UnaryOp::Invert, Const::Int(i)) => Const::Int(!i),
            _ => return None,
        },
        Expr::JoinedStr(j) => {
            let mut out = String::new();
            for part in &j.values {
                match part {
                    Expr::FormattedValue(f) if f.format_spec.is_none() => {
                        match fold(env, &f.value, depth)? {
                            Const::Str(s) => out.push_str(&s),
                            Const::Int(i) => out.push_str(&i.to_string()),
                            _ => return None,
                        }
                    }
                    other => match fold(env, other, depth)? {
                        Const::Str(s) => out.push_str(&s),
                        _ => return None,
                    },
                }
            }
            Const::Str(out)
        }
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
            if elts.len() > MAX_LENGTH {
                return None;
            }
            Const::Seq(
                elts.iter()
                    .map(|e| fold(env, e, depth))
                    .collect::<Option<Vec<_>>>()?,
            )
        }
        Expr::Subscript(s) => subscript(fold(env, &s.value, depth)?, env, &s.slice, depth)?,
        Expr::Call(call) => self::call(env, call, depth)?,
        _ => return None,
    };
    within_limits(folded)
}

fn within_limits(c: Const) -> Option<Const> {
    let ok = match &c {
        Const::Str(s) => s.len() <= MAX_LENGTH,
        Const::Bytes(b) => b.len() <= MAX_LENGTH,
        Const::Seq(v) => v.len() <= MAX_LENGTH,
        Const::Int(_) => true,
    };
    ok.then_some(c)
}

fn constant(value: &Constant) -> Option<Const> {
    Some(match value {
        Constant::Str(s) if s.len() <= MAX_LENGTH => Const::Str(s.clone()),
        Constant::Bytes(b) if b.len() <= MAX_LENGTH => Const::Bytes(b.clone()),
        // Only small integers matter (`chr(115)`); huge ones are not even printed.
        Constant::Int(i) if i.bits() < 63 => Const::Int(i.to_string().parse().ok()?),
        Constant::Bool(b) => Const::Int(*b as i64),
        Constant::Tuple(items) => Const::Seq(items.iter().map(constant).collect::<Option<_>>()?),
        _ => return None,
    })
}

fn binop(left: Const, op: &Operator, right: Const) -> Option<Const> {
    use Const::*;
    Some(match (left, op, right) {
        (Str(a), Operator::Add, Str(b)) => Str(a + &b),
        (Bytes(mut a), Operator::Add, Bytes(b)) => {
            a.extend(b);
            Bytes(a)
        }
        (Seq(mut a), Operator::Add, Seq(b)) => {
            a.extend(b);
            Seq(a)
        }
        (Str(s), Operator::Mult, Int(n)) | (Int(n), Operator::Mult, Str(s)) => {
            let n = usize::try_from(n).unwrap_or(0);
            if s.len().saturating_mul(n) > MAX_LENGTH {
                return None;
            }
            Str(s.repeat(n))
        }
        (Str(format), Operator::Mod, args) => Str(percent_format(&format, args)?),
        (Int(a), op, Int(b)) => Int(match op {
            Operator::Add => a.checked_add(b)?,
            Operator::Sub => a.checked_sub(b)?,
            Operator::Mult => a.checked_mul(b)?,
            Operator::FloorDiv => a.checked_div_euclid(b)?,
            Operator::Mod => a.checked_rem_euclid(b)?,
            Operator::BitXor => a ^ b,
            Operator::BitAnd => a & b,
            Operator::BitOr => a | b,
            Operator::LShift => a.checked_shl(u32::try_from(b).ok()?)?,
            Operator::RShift => a.checked_shr(u32::try_from(b).ok()?)?,
            _ => return None,
        }),
        _ => return None,
    })
}

/// `'%s%s' % ('o', 's')` with `%s`, `%c`, `%d` and `%%` only.
fn percent_format(format: &str, args: Const) -> Option<String> {
    let args = match args {
        Const::Seq(v) => v,
        other => vec![other],
    };
    let mut args = args.into_iter();
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match (chars.next()?, args.next()) {
            ('%', None) => out.push('%'),
            ('s', Some(Const::Str(s))) => out.push_str(&s),
            ('s' | 'd', Some(Const::Int(i))) => out.push_str(&i.to_string()),
            ('c', Some(Const::Int(i))) => out.push(char::from_u32(u32::try_from(i).ok()?)?),
            ('c', Some(Const::Str(s))) if s.chars().count() == 1 => out.push_str(&s),
            _ => return None,
        }
    }
    args.next().is_none().then_some(out)
}

fn index(i: Option<i64>, len: usize, default: i64) -> i64 {
    match i {
        None => default,
        Some(i) if i < 0 => i + len as i64,
        Some(i) => i,
    }
}

fn subscript(base: Const, env: &dyn FoldEnv, slice: &Expr, depth: usize) -> Option<Const> {
    let items: Vec<Const> = match &base {
        Const::Str(s) => s.chars().map(|c| Const::Str(c.to_string())).collect(),
        Const::Bytes(b) => b.iter().map(|&x| Const::Int(x as i64)).collect(),
        Const::Seq(v) => v.clone(),
        Const::Int(_) => return None,
    };
    let len = items.len();
    let int = |e: &Option<Box<Expr>>| -> Option<Option<i64>> {
        match e {
            None => Some(None),
            Some(e) => match fold(env, e, depth)? {
                Const::Int(i) => Some(Some(i)),
                _ => None,
            },
        }
    };
    let picked: Vec<Const> = match slice {
        Expr::Slice(s) => {
            let step = int(&s.step)?.unwrap_or(1);
            if step == 0 {
                return None;
            }
            let (lower, upper) = (int(&s.lower)?, int(&s.upper)?);
            let mut out = Vec::new();
            if step > 0 {
                let start = index(lower, len, 0).clamp(0, len as i64);
                let stop = index(upper, len, len as i64).clamp(0, len as i64);
                let mut i = start;
                while i < stop {
                    out.push(items[i as usize].clone());
                    i = i.saturating_add(step);
                }
            } else {
                let start = index(lower, len, len as i64 - 1).clamp(-1, len as i64 - 1);
                let stop = index(upper, len, -1).clamp(-1, len as i64 - 1);
                let stop = if s.upper.is_none() { -1 } else { stop };
                let mut i = start;
                while i > stop {
                    out.push(items[i as usize].clone());
                    i = i.saturating_add(step);
                }
            }
            out
        }
        other => {
            let Const::Int(i) = fold(env, other, depth)? else {
                return None;
            };
            let i = index(Some(i), len, 0);
            if i < 0 || i as usize >= len {
                return None;
            }
            return Some(items[i as usize].clone());
        }
    };
    Some(match base {
        Const::Str(_) => Const::Str(
            picked
                .into_iter()
                .filter_map(|c| match c {
                    Const::Str(s) => Some(s),
                    _ => None,
                })
                .collect(),
        ),
        Const::Bytes(_) => Const::Bytes(
            picked
                .into_iter()
                .filter_map(|c| match c {
                    Const::Int(i) => u8::try_from(i).ok(),
                    _ => None,
                })
                .collect(),
        ),
        _ => Const::Seq(picked),
    })
}

fn strings_of(c: Const) -> Option<Vec<String>> {
    match c {
        Const::Str(s) => Some(s.chars().map(String::from).collect()),
        Const::Seq(v) => v
            .into_iter()
            .map(|c| match c {
                Const::Str(s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn call(env: &dyn FoldEnv, call: &ast::ExprCall, depth: usize) -> Option<Const> {
    if !call.keywords.is_empty() {
        return None;
    }
    let args = || -> Option<Vec<Const>> { call.args.iter().map(|a| fold(env, a, depth)).collect() };
    // Methods of folded constants: `''.join(…)`, `b'…'.decode()`, `'…'.replace(a, b)`.
    if let Expr::Attribute(attribute) = call.func.as_ref() {
        if let Some(receiver) = fold(env, &attribute.value, depth) {
            let args = args()?;
            return method(receiver, attribute.attr.as_str(), args);
        }
    }
    let callee = env.callee(&call.func)?;
    let args = args()?;
    let mut args_iter = args.into_iter();
    let first = args_iter.next();
    let second = args_iter.next();
    Some(match (callee.as_str(), first, second) {
        ("chr", Some(Const::Int(i)), None) => {
            Const::Str(char::from_u32(u32::try_from(i).ok()?)?.to_string())
        }
        ("str", Some(Const::Str(s)), None) => Const::Str(s),
        ("str", Some(Const::Int(i)), None) => Const::Str(i.to_string()),
        ("str", Some(Const::Bytes(b)), Some(Const::Str(_))) => {
            Const::Str(String::from_utf8(b).ok()?)
        }
        ("bytes" | "bytearray", Some(Const::Seq(v)), None) => Const::Bytes(
            v.into_iter()
                .map(|c| match c {
                    Const::Int(i) => u8::try_from(i).ok(),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ),
        ("bytes" | "bytearray", Some(Const::Str(s)), Some(Const::Str(_))) => {
            Const::Bytes(s.into_bytes())
        }
        ("bytes" | "bytearray", Some(Const::Bytes(b)), None) => Const::Bytes(b),
        ("reversed", Some(c), None) => {
            let mut items = match c {
                Const::Str(s) => s.chars().map(|c| Const::Str(c.to_string())).collect(),
                Const::Seq(v) => v,
                _ => return None,
            };
            items.reverse();
            Const::Seq(items)
        }
        ("list" | "tuple", Some(Const::Str(s)), None) => {
            Const::Seq(s.chars().map(|c| Const::Str(c.to_string())).collect())
        }
        ("list" | "tuple", Some(Const::Seq(v)), None) => Const::Seq(v),
        (
            "bytes.fromhex" | "bytearray.fromhex" | "binascii.unhexlify" | "binascii.a2b_hex",
            Some(c),
            None,
        ) => {
            let text = match c {
                Const::Str(s) => s,
                Const::Bytes(b) => String::from_utf8(b).ok()?,
                _ => return None,
            };
            Const::Bytes(unhex(&text)?)
        }
        (
            "base64.b64decode"
            | "base64.standard_b64decode"
            | "base64.urlsafe_b64decode"
            | "base64.decodebytes",
            Some(c),
            None,
        ) => {
            let text = match c {
                Const::Str(s) => s.into_bytes(),
                Const::Bytes(b) => b,
                _ => return None,
            };
            Const::Bytes(base64_decode(&text)?)
        }
        ("codecs.decode" | "codecs.encode", Some(Const::Str(s)), Some(Const::Str(codec)))
            if matches!(
                codec.to_ascii_lowercase().as_str(),
                "rot13" | "rot_13" | "rot-13"
            ) =>
        {
            Const::Str(rot13(&s))
        }
        ("os.path.join" | "posixpath.join", Some(Const::Str(first)), second) => {
            let mut path = first;
            for part in second.into_iter().chain(args_iter) {
                let Const::Str(part) = part else {
                    return None;
                };
                path = super::paths::join(&path, &part);
            }
            Const::Str(path)
        }
        _ => return None,
    })
}

/// `''.join(...)`, `.decode()`, `.encode()`, `.replace()`, case and strip methods,
/// and `map(chr, …)` arrives here as a sequence through `join`.
fn method(receiver: Const, name: &str, args: Vec<Const>) -> Option<Const> {
    let mut args = args.into_iter();
    let (first, second) = (args.next(), args.next());
    Some(match (receiver, name, first, second) {
        (Const::Str(sep), "join", Some(items), None) => Const::Str(strings_of(items)?.join(&sep)),
        (Const::Bytes(b), "decode", _, _) => Const::Str(String::from_utf8(b).ok()?),
        (Const::Str(s), "encode", _, _) => Const::Bytes(s.into_bytes()),
        (Const::Str(s), "replace", Some(Const::Str(a)), Some(Const::Str(b))) if !a.is_empty() => {
            Const::Str(s.replace(&a, &b))
        }
        (Const::Str(s), "lower" | "casefold", None, None) => Const::Str(s.to_lowercase()),
        (Const::Str(s), "upper", None, None) => Const::Str(s.to_uppercase()),
        (Const::Str(s), "strip", None, None) => Const::Str(s.trim().to_string()),
        (Const::Str(s), "lstrip", None, None) => Const::Str(s.trim_start().to_string()),
        (Const::Str(s), "rstrip", None, None) => Const::Str(s.trim_end().to_string()),
        (Const::Str(s), "format", first, second) => {
            let values: Vec<Const> = first.into_iter().chain(second).chain(args).collect();
            Const::Str(brace_format(&s, &values)?)
        }
        _ => return None,
    })
}

/// `'{}{}'.format('o', 's')` and `'{0}{1}'`; anything fancier is not folded.
fn brace_format(format: &str, values: &[Const]) -> Option<String> {
    let mut out = String::new();
    let mut next = 0usize;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut field = String::new();
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                    field.push(c);
                }
                let at = if field.is_empty() {
                    next += 1;
                    next - 1
                } else {
                    field.parse().ok()?
                };
                match values.get(at)? {
                    Const::Str(s) => out.push_str(s),
                    Const::Int(i) => out.push_str(&i.to_string()),
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .map(|b| (b as char).to_digit(16).map(|d| d as u8))
        .collect::<Option<_>>()?;
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    Some(digits.chunks(2).map(|p| p[0] * 16 + p[1]).collect())
}

fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let value = |b: u8| -> Option<u32> {
        Some(match b {
            b'A'..=b'Z' => (b - b'A') as u32,
            b'a'..=b'z' => (b - b'a' + 26) as u32,
            b'0'..=b'9' => (b - b'0' + 52) as u32,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        })
    };
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in text {
        if b == b'=' || b.is_ascii_whitespace() {
            continue;
        }
        buffer = (buffer << 6) | value(b)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a') + 13) % 26 + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A') + 13) % 26 + b'A') as char,
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustpython_parser::{ast, Parse};

    struct Builtins;
    impl FoldEnv for Builtins {
        fn string_of(&self, _: &str) -> Option<String> {
            None
        }
        fn callee(&self, func: &Expr) -> Option<String> {
            match func {
                Expr::Name(n) => Some(n.id.to_string()),
                Expr::Attribute(a) => Some(format!("{}.{}", self.callee(&a.value)?, a.attr)),
                _ => None,
            }
        }
    }

    fn folded(source: &str) -> Option<String> {
        let expr = ast::Expr::parse(source, "<test>").unwrap();
        fold_str(&Builtins, &expr)
    }

    #[test]
    fn folds_the_usual_disguises() {
        assert_eq!(folded("'sys' + 'tem'").as_deref(), Some("system"));
        assert_eq!(folded("''.join(['o', 's'])").as_deref(), Some("os"));
        assert_eq!(folded("'metsys'[::-1]").as_deref(), Some("system"));
        assert_eq!(folded("chr(111) + chr(115)").as_deref(), Some("os"));
        assert_eq!(folded("'%s%s' % ('o', 's')").as_deref(), Some("os"));
        assert_eq!(folded("f'{\"o\"}s'").as_deref(), Some("os"));
        assert_eq!(folded("b'os'.decode()").as_deref(), Some("os"));
        assert_eq!(
            folded("bytes.fromhex('6f73').decode()").as_deref(),
            Some("os")
        );
        assert_eq!(
            folded("base64.b64decode('b3M=').decode()").as_deref(),
            Some("os")
        );
        assert_eq!(
            folded("codecs.decode('flfgrz', 'rot13')").as_deref(),
            Some("system")
        );
        assert_eq!(folded("''.join(reversed('so'))").as_deref(), Some("os"));
        assert_eq!(folded("'{}{}'.format('o', 's')").as_deref(), Some("os"));
        assert_eq!(folded("'abcdef'[1:4]").as_deref(), Some("bcd"));
        assert_eq!(folded("'abcdef'[4:1:-1]").as_deref(), Some("edc"));
        assert_eq!(
            folded("os.path.join('/etc', 'passwd')").as_deref(),
            Some("/etc/passwd")
        );
        assert_eq!(folded("x + 'a'"), None);
        assert_eq!(
            folded("'abc'[1::1000000000000000000]").as_deref(),
            Some("b")
        );
        assert_eq!(
            folded("'abc'[::-1000000000000000000]").as_deref(),
            Some("c")
        );
        assert_eq!(
            folded("'abc'[-1000000000000000000:]").as_deref(),
            Some("abc")
        );
        assert_eq!(folded("'a' * 100000"), None);
    }
}
