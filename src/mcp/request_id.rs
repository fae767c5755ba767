//! The `id` of a JSON-RPC request too large to hold: found by scanning its bytes as
//! they stream past, without keeping them, so that the answer to an oversize request
//! can name the request it answers (and the client stops waiting for it) while the
//! server's memory stays bounded.
//!
//! The scan follows JSON's structure just enough: strings (with their escapes),
//! nesting, and the keys of the top-level object. The value of the first top-level key
//! that reads as `id` is kept (up to [`LONGEST_ID`] bytes) and taken when it is a
//! string or a number, as JSON-RPC ids are.

use serde_json::Value;

/// Longest id kept, in bytes of JSON.
const LONGEST_ID: usize = 256;
/// Longest key read, in bytes of JSON (a longer one is not `id`).
const LONGEST_KEY: usize = 64;

/// Scans one message; feed it every byte of the line, then ask [`IdScanner::id`].
#[derive(Debug, Default)]
pub struct IdScanner {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Outside strings at depth 1: a key comes next (after `{` or `,`).
    expect_key: bool,
    /// The key being read (raw JSON string content), when reading one.
    key: Option<Vec<u8>>,
    /// The last key read at depth 1 was `id`, and its value has not started.
    id_value_next: bool,
    /// The id's value being read, when reading it.
    capture: Option<Vec<u8>>,
    /// The id's value, complete.
    id: Option<Vec<u8>>,
    /// The first thing seen was not an object: there is no id to find.
    not_an_object: bool,
    started: bool,
}

impl IdScanner {
    pub fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.not_an_object || self.id.is_some() {
                return;
            }
            self.step(byte);
        }
    }

    fn step(&mut self, byte: u8) {
        if !self.started {
            if byte.is_ascii_whitespace() || matches!(byte, 0xEF | 0xBB | 0xBF) {
                return;
            }
            self.started = true;
            if byte != b'{' {
                self.not_an_object = true;
                return;
            }
        }
        if let Some(capture) = &mut self.capture {
            let ends_value = !self.in_string && self.depth == 1 && matches!(byte, b',' | b'}');
            if ends_value {
                self.id = Some(std::mem::take(capture));
                self.capture = None;
                return;
            }
            if capture.len() < LONGEST_ID {
                capture.push(byte);
            } else {
                self.capture = None; // too long for an id: none is taken
                self.id = Some(Vec::new());
                return;
            }
        }
        if self.in_string {
            if let Some(key) = &mut self.key {
                if (self.escaped || byte != b'"') && key.len() <= LONGEST_KEY {
                    key.push(byte);
                }
            }
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.id_value_next = is_id(&key);
                }
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.key = Some(Vec::new());
                    self.expect_key = false;
                } else {
                    self.begin_value(byte);
                }
            }
            b'{' | b'[' => {
                self.begin_value(byte);
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = true;
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => self.expect_key = true,
            b':' | b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => self.begin_value(byte),
        }
    }

    /// The first byte of a value at depth 1: the id's, when its key was `id`.
    fn begin_value(&mut self, byte: u8) {
        if self.depth == 1 && self.id_value_next && self.capture.is_none() {
            self.id_value_next = false;
            self.capture = Some(vec![byte]);
        }
    }

    /// The id found, when it is a string or a number.
    pub fn id(&self) -> Option<Value> {
        let raw = self.id.as_ref().or(self.capture.as_ref())?;
        match serde_json::from_slice::<Value>(raw.trim_ascii()) {
            Ok(id @ (Value::String(_) | Value::Number(_))) => Some(id),
            _ => None,
        }
    }
}

/// Whether a key's raw JSON content reads as `id` (escapes included: `"\u0069d"`).
fn is_id(raw: &[u8]) -> bool {
    if raw.len() > LONGEST_KEY {
        return false;
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted).is_ok_and(|key| key == "id")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id_of(text: &str) -> Option<Value> {
        let mut scanner = IdScanner::default();
        // Fed in small pieces, as a stream arrives.
        for chunk in text.as_bytes().chunks(3) {
            scanner.feed(chunk);
        }
        scanner.id()
    }

    #[test]
    fn finds_the_top_level_id_wherever_it_is() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{}}"#),
            Some(json!(42))
        );
        assert_eq!(
            id_of(
                r#"{"method":"x","params":{"id":1,"arguments":{"code":"\"id\": 7"}},"id":"abc"}"#
            ),
            Some(json!("abc"))
        );
        assert_eq!(id_of(r#"{"\u0069d" : 5 , "method":"x"}"#), Some(json!(5)));
        assert_eq!(id_of("\u{feff}{\"id\":-3.5}"), Some(json!(-3.5)));
    }

    #[test]
    fn finds_none_where_there_is_none_to_trust() {
        assert_eq!(
            id_of(r#"{"method":"notifications/x","params":{"id":1}}"#),
            None
        );
        assert_eq!(id_of(r#"[{"id":1}]"#), None);
        assert_eq!(id_of(r#"{"id":{"nested":1}}"#), None);
        assert_eq!(id_of(r#"{"id":null}"#), None);
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(1000));
        assert_eq!(id_of(&long), None);
        // A line cut short (the rest never came) still yields an id that was complete.
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":9,"params":{"code":"xxxx"#),
            Some(json!(9))
        );
    }
}
