//! The stdio line discipline around the MCP transport: every line a client sends gets
//! through to the server or gets an answer, and none is held past a bound.
//!
//! - A line is held up to [`request_limit`] bytes, which is at least the largest request
//!   the policy allows (the largest snippet, JSON-escaped, and files up to
//!   `limits.tmpfs`, base64-encoded). A longer line is not kept: its bytes are scanned as
//!   they pass for the request's `id` ([`super::request_id`]) and dropped, and the client
//!   gets a JSON-RPC error for that id (`-32600`) saying how large it was and what the
//!   limit is, instead of waiting for an answer that never comes.
//! - A JSON-RPC batch (a line that is a JSON array) is refused: each request in it gets
//!   an error (one array, as JSON-RPC answers a batch), since MCP has no batches.
//! - A line that is not JSON gets the parse error (`-32700`, id null); bytes that are not
//!   UTF-8 are repaired first ([`super::sanitize`]).
//!
//! The transport (rmcp's) is given the same limit, so that it never drops a line this
//! layer passed on. Outgoing messages reach the output whole, so an answer written here
//! never lands inside one of the transport's.

use super::request_id::IdScanner;
use super::sanitize::fix_line;
use crate::policy::Policy;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

/// Bytes of buffering between the real input and the MCP transport.
const PIPE_BUFFER: usize = 256 * 1024;
/// The least request limit: rmcp's own default, which a client may already rely on.
const LEAST_LIMIT: usize = 16 << 20;
/// What a request carries besides its code and files: the JSON-RPC envelope, the other
/// arguments, and up to 100 file paths of 1 KiB, JSON-escaped.
const ENVELOPE: usize = 1 << 20;
/// A line whose buffer grew past this is given back once it is handled.
const KEEP_CAPACITY: usize = 1 << 20;

/// The largest request line taken: the largest snippet the policy allows
/// (`limits.code`), with every byte escaped as JSON can (`\u00XX`, six bytes), plus files
/// filling `limits.tmpfs` in base64, plus the envelope; never less than 16 MiB.
pub fn request_limit(policy: &Policy) -> usize {
    let code = usize::try_from(policy.limits.code.bytes()).unwrap_or(usize::MAX);
    let files = usize::try_from(policy.limits.tmpfs.bytes()).unwrap_or(usize::MAX);
    code.saturating_mul(6)
        .saturating_add(files.div_ceil(3).saturating_mul(4))
        .saturating_add(ENVELOPE)
        .max(LEAST_LIMIT)
}

/// Wraps `input` and `output` for the transport (see the module docs): returns the
/// reader and writer the transport gets, and the task that writes `output`, which ends
/// once the transport's writer is dropped and everything is written.
pub fn stdio_lines<R, W>(
    input: R,
    output: W,
    limit: usize,
) -> (DuplexStream, DuplexStream, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_transport, transport_reader) = tokio::io::duplex(PIPE_BUFFER);
    let (transport_writer, from_transport) = tokio::io::duplex(PIPE_BUFFER);
    let (answers, answer_lines) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(read_input(input, to_transport, answers, limit));
    let written = tokio::spawn(write_output(output, from_transport, answer_lines));
    (transport_reader, transport_writer, written)
}

/// Reads `input` line by line, holding at most `limit` bytes of one; passes good lines
/// to the transport and sends answers for the rest. Dropping `to_transport` at the end
/// is the end of input for the transport.
async fn read_input<R: AsyncRead + Unpin>(
    input: R,
    mut to_transport: DuplexStream,
    answers: tokio::sync::mpsc::Sender<Vec<u8>>,
    limit: usize,
) {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut line: Vec<u8> = Vec::new();
    // Set while the current line is over the limit: its bytes are scanned, not kept.
    let mut oversize: Option<(IdScanner, u64)> = None;
    loop {
        let (taken, ended) = {
            let available = match input.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    tracing::warn!(%error, "reading the MCP input failed");
                    break;
                }
            };
            if available.is_empty() {
                break;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let taken = newline.map_or(available.len(), |at| at + 1);
            let piece = &available[..taken];
            match &mut oversize {
                Some((scanner, size)) => {
                    scanner.feed(piece);
                    *size += taken as u64;
                }
                None if line.len() + taken > limit.saturating_add(2) => {
                    let mut scanner = IdScanner::default();
                    scanner.feed(&line);
                    scanner.feed(piece);
                    oversize = Some((scanner, (line.len() + taken) as u64));
                    line = Vec::new();
                }
                None => line.extend_from_slice(piece),
            }
            (taken, newline.is_some())
        };
        input.consume(taken);
        if !ended {
            continue;
        }
        let answer = match oversize.take() {
            Some((scanner, size)) => Some(too_large(scanner.id(), size, limit)),
            None => match pass_on(&line, limit) {
                Ok(Some(good)) => {
                    if to_transport.write_all(&good).await.is_err() {
                        break;
                    }
                    None
                }
                Ok(None) => None,
                Err(answer) => answer,
            },
        };
        if line.capacity() > KEEP_CAPACITY {
            line = Vec::new();
        } else {
            line.clear();
        }
        if let Some(answer) = answer {
            if answers.send(answer).await.is_err() {
                break;
            }
        }
    }
}

/// What becomes of one whole line: `Ok(Some(line))` to pass on (repaired), `Ok(None)`
/// to skip (blank), `Err(answer)` to answer here instead (or `Err(None)`: nothing to
/// answer, as for a batch of notifications).
fn pass_on(line: &[u8], limit: usize) -> Result<Option<Vec<u8>>, Option<Vec<u8>>> {
    let fixed = fix_line(line);
    let text = fixed.trim_ascii();
    if text.is_empty() {
        return Ok(None);
    }
    if text.starts_with(b"[") {
        return Err(refuse_batch(text));
    }
    if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
        tracing::warn!(%error, "a line of input is not JSON; answered with a parse error");
        return Err(Some(parse_error(&error)));
    }
    if fixed.len() > limit {
        // Repairing bad bytes made it longer than the transport takes.
        let mut scanner = IdScanner::default();
        scanner.feed(&fixed);
        return Err(Some(too_large(scanner.id(), fixed.len() as u64, limit)));
    }
    let mut fixed = fixed.into_owned();
    if !fixed.ends_with(b"\n") {
        fixed.push(b'\n');
    }
    Ok(Some(fixed))
}

/// The answer to a request line of `size` bytes over `limit`.
fn too_large(id: Option<Value>, size: u64, limit: usize) -> Vec<u8> {
    tracing::warn!(
        size,
        limit,
        ?id,
        "a request line is over the limit; answered with an error"
    );
    line_of(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": format!(
                "the request is {size} bytes, more than this server takes in one message \
                 ({limit} bytes: the policy's limits.code, JSON-escaped, and files up to \
                 limits.tmpfs as base64); send smaller code or fewer files, binary files \
                 with \"encoding\": \"base64\""
            ),
            "data": {"size": size, "limit": limit},
        },
    }))
}

/// The answer to a batch: an error for each request in it (MCP has no batches); none
/// when it holds no request, as JSON-RPC says; one error when it is empty or not JSON.
fn refuse_batch(text: &[u8]) -> Option<Vec<u8>> {
    let message = "JSON-RPC batches are not supported (MCP has none since 2025-06-18): \
                   send each message on a line of its own";
    let items: Vec<Value> = match serde_json::from_slice(text) {
        Ok(items) => items,
        Err(error) => return Some(parse_error(&error)),
    };
    tracing::warn!(messages = items.len(), "a JSON-RPC batch was refused");
    let error = |id: &Value| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": message}});
    if items.is_empty() {
        return Some(line_of(&error(&Value::Null)));
    }
    let answers: Vec<Value> = items
        .iter()
        .filter(|item| item.get("method").is_some())
        .filter_map(|item| item.get("id"))
        .filter(|id| !id.is_null())
        .map(error)
        .collect();
    (!answers.is_empty()).then(|| line_of(&Value::Array(answers)))
}

/// The JSON-RPC answer to a line that is not JSON.
fn parse_error(error: &serde_json::Error) -> Vec<u8> {
    line_of(&json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: the line is not JSON ({error})")},
    }))
}

fn line_of(message: &Value) -> Vec<u8> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Writes the transport's messages and this layer's answers to `output`, each whole.
async fn write_output<W: AsyncWrite + Unpin>(
    mut output: W,
    from_transport: DuplexStream,
    mut answers: tokio::sync::mpsc::Receiver<Vec<u8>>,
) {
    let mut messages = BufReader::new(from_transport);
    let mut line = Vec::new();
    let mut answers_open = true;
    loop {
        tokio::select! {
            read = messages.read_until(b'\n', &mut line) => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                            break;
                        }
                        line.clear();
                    }
                }
            }
            answer = answers.recv(), if answers_open && line.is_empty() => {
                match answer {
                    Some(answer) => {
                        if output.write_all(&answer).await.is_err() || output.flush().await.is_err() {
                            break;
                        }
                    }
                    None => answers_open = false,
                }
            }
        }
    }
    let _ = output.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Sends `input` through the discipline with `limit`; returns what reached the
    /// transport and what was answered.
    async fn through(input: Vec<u8>, limit: usize) -> (String, Vec<Value>) {
        let (mut client, server_input) = tokio::io::duplex(1 << 16);
        let (server_output, mut client_output) = tokio::io::duplex(1 << 16);
        let (mut transport_reader, transport_writer, written) =
            stdio_lines(server_input, server_output, limit);
        let writer = tokio::spawn(async move {
            client.write_all(&input).await.unwrap();
            client.shutdown().await.unwrap();
        });
        let mut passed = String::new();
        transport_reader.read_to_string(&mut passed).await.unwrap();
        writer.await.unwrap();
        drop(transport_writer);
        written.await.unwrap();
        let mut answered = String::new();
        client_output.read_to_string(&mut answered).await.unwrap();
        let answers = answered
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        (passed, answers)
    }

    #[tokio::test]
    async fn an_oversize_request_is_answered_for_its_id_and_the_next_one_passes() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"code\":\"{}\"}}}}\n",
            "x".repeat(10_000)
        );
        let next = "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n";
        let (passed, answers) = through(format!("{big}{next}").into_bytes(), 1000).await;
        assert_eq!(passed, next);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], 7);
        assert_eq!(answers[0]["error"]["code"], -32600);
        assert_eq!(answers[0]["error"]["data"]["limit"], 1000);
        assert_eq!(answers[0]["error"]["data"]["size"], big.len() as u64);
    }

    #[tokio::test]
    async fn a_batch_gets_an_error_for_each_request_in_it() {
        let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#;
        let (passed, answers) = through(format!("{batch}\n[]\n").into_bytes(), 1 << 20).await;
        assert_eq!(passed, "");
        assert_eq!(answers.len(), 2, "{answers:?}");
        let ids: Vec<&Value> = answers[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| &a["id"])
            .collect();
        assert_eq!(ids, [&json!(1), &json!("b")]);
        assert_eq!(answers[0][0]["error"]["code"], -32600);
        assert_eq!(answers[1]["id"], Value::Null);
    }

    #[tokio::test]
    async fn a_line_that_never_ends_is_not_held() {
        // 50 MB without a newline under a 1 MB limit: scanned and dropped as it comes;
        // at the end of input there is nothing to answer, and nothing was passed on.
        let mut input = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"params\":\"".to_vec();
        input.resize(50 << 20, b'a');
        let (passed, answers) = through(input, 1 << 20).await;
        assert_eq!(passed, "");
        assert!(answers.is_empty(), "{answers:?}");
    }

    #[test]
    fn the_limit_covers_the_largest_request_the_policy_allows() {
        let policy = Policy::preset("default").unwrap();
        let limit = request_limit(&policy);
        let code = policy.limits.code.bytes() as usize;
        let tmpfs = policy.limits.tmpfs.bytes() as usize;
        assert!(limit >= 6 * code + tmpfs / 3 * 4, "{limit}");
        assert!(limit >= 16 << 20);
    }
}
