//! Makes every incoming line valid JSON text before the MCP layer parses it (the line
//! discipline that calls it is [`super::stdio`]).
//!
//! A client can send code that is not valid Unicode: raw bytes that are not UTF-8, or a
//! JSON escape of a lone UTF-16 surrogate (`"\udc80"`, which Python's `json.dumps`
//! writes for strings decoded with `surrogateescape`). The JSON parser refuses such a
//! line as a syntax error and the transport drops it, so the client would wait forever
//! for an answer. Instead, the bad parts are replaced with U+FFFD and, when the line is a
//! `tools/call`, the hidden argument `__invalid_utf8` is added with the reason, so the
//! tool answers with `isError` and says what was wrong.

use serde_json::Value;
use std::borrow::Cow;

/// The hidden argument a tool reads to learn its input was not valid UTF-8.
pub const MARKER: &str = "__invalid_utf8";

/// `line` unchanged when it is valid, else a repaired copy (see module docs).
pub fn fix_line(line: &[u8]) -> Cow<'_, [u8]> {
    if std::str::from_utf8(line).is_ok() && !may_hold_surrogate_escape(line) {
        return Cow::Borrowed(line);
    }
    let mut problem = None;
    let text = match String::from_utf8_lossy(line) {
        Cow::Borrowed(text) => Cow::Borrowed(text),
        Cow::Owned(text) => {
            problem = Some("it contains bytes that are not UTF-8".to_string());
            Cow::Owned(text)
        }
    };
    let (text, lone) = replace_lone_surrogates(&text);
    if let Some(escape) = lone {
        problem.get_or_insert(format!("it contains {escape}, a lone UTF-16 surrogate"));
    }
    let Some(problem) = problem else {
        return Cow::Borrowed(line);
    };
    let reason = format!(
        "the request's text is not valid UTF-8 ({problem}); send the code as plain Unicode text"
    );
    let mut fixed = match mark_tool_call(&text, &reason) {
        Some(marked) => marked.into_bytes(),
        None => text.into_bytes(),
    };
    if line.ends_with(b"\n") && !fixed.ends_with(b"\n") {
        fixed.push(b'\n');
    }
    Cow::Owned(fixed)
}

/// A cheap test that lets almost every line skip the full scan.
fn may_hold_surrogate_escape(line: &[u8]) -> bool {
    line.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && (w[2] == b'd' || w[2] == b'D')
            && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
    })
}

/// Replaces every `\uXXXX` escape of a surrogate that is not half of a proper pair with
/// `\ufffd`; returns the new text and the first escape replaced.
fn replace_lone_surrogates(text: &str) -> (String, Option<String>) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut first = None;
    let mut in_string = false;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => {
                if bytes.get(i + 1) != Some(&b'u') {
                    i += 2;
                    continue;
                }
                let Some(unit) = hex_unit(bytes, i + 2) else {
                    i += 2;
                    continue;
                };
                let paired_low = hex_unit_escape(bytes, i + 6);
                if (0xD800..0xDC00).contains(&unit)
                    && paired_low.is_some_and(|low| (0xDC00..0xE000).contains(&low))
                {
                    i += 12;
                } else if (0xD800..0xE000).contains(&unit) {
                    out.push_str(&text[copied..i]);
                    out.push_str("\\ufffd");
                    first.get_or_insert_with(|| text[i..i + 6].to_string());
                    i += 6;
                    copied = i;
                } else {
                    i += 6;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied.min(text.len())..]);
    (out, first)
}

/// The UTF-16 unit of the four hex digits at `at`.
fn hex_unit(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// The UTF-16 unit of a `\uXXXX` escape starting at `at`.
fn hex_unit_escape(bytes: &[u8], at: usize) -> Option<u32> {
    (bytes.get(at..at + 2)? == b"\\u")
        .then(|| hex_unit(bytes, at + 2))
        .flatten()
}

/// Adds the marker argument when `text` is a `tools/call` request.
fn mark_tool_call(text: &str, reason: &str) -> Option<String> {
    let mut message: Value = serde_json::from_str(text.trim_end()).ok()?;
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let params = message.get_mut("params")?.as_object_mut()?;
    let arguments = params
        .entry("arguments")
        .or_insert_with(|| Value::Object(Default::default()));
    arguments
        .as_object_mut()?
        .insert(MARKER.to_string(), Value::String(reason.to_string()));
    serde_json::to_string(&message).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(line: &[u8]) -> Value {
        let fixed = fix_line(line);
        let message: Value = serde_json::from_slice(&fixed).expect("the fixed line parses");
        message["params"]["arguments"].clone()
    }

    #[test]
    fn valid_lines_pass_untouched() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"code":"print('\ud83d\ude00 \\ud800')"}}}"#;
        assert!(matches!(fix_line(line), Cow::Borrowed(_)));
    }

    #[test]
    fn a_lone_surrogate_marks_the_call() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"code":"a\udc80b"}}}"#;
        let args = arguments(line);
        assert_eq!(args["code"], "a\u{fffd}b");
        assert!(args[MARKER].as_str().unwrap().contains("\\udc80"), "{args}");
    }

    #[test]
    fn raw_bytes_that_are_not_utf8_mark_the_call() {
        let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"code":"a"#.to_vec();
        line.push(0xff);
        line.extend_from_slice(b"b\"}}}\n");
        let args = arguments(&line);
        assert!(
            args[MARKER].as_str().unwrap().contains("not UTF-8"),
            "{args}"
        );
    }
}
