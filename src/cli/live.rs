//! `run --format text` prints the program's output as it comes, the way a terminal user
//! expects, escaped like the rest of its text ([`escape_controls`], which `run` also
//! uses for the output it prints afterwards). The live view is best effort: if it
//! missed anything (the terminal could not keep up, or the output passed the policy's
//! cap), `run` says so afterwards and prints the output the sandbox kept.

use crate::sandbox::{OutputTap, Stream};
use std::io::Write;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Chunks buffered between the run and the terminal.
const CAPACITY: usize = 4096;

/// Prints output chunks as they arrive, until the run ends.
pub struct LiveView {
    task: JoinHandle<Shown>,
}

/// How much of each stream the live view printed.
#[derive(Debug, Default, Clone, Copy)]
pub struct Shown {
    pub stdout: usize,
    pub stderr: usize,
    /// Output past the cap was received but not printed.
    pub cut: bool,
}

impl LiveView {
    /// Starts printing; output past `cap` bytes (both streams together) is not printed.
    pub fn start(cap: usize) -> (LiveView, OutputTap) {
        let (tap, mut chunks) = mpsc::channel::<(Stream, Vec<u8>)>(CAPACITY);
        let task = tokio::spawn(async move {
            let mut shown = Shown::default();
            let mut carry = [Vec::new(), Vec::new()];
            while let Some((stream, bytes)) = chunks.recv().await {
                if shown.stdout + shown.stderr + bytes.len() > cap {
                    shown.cut = true;
                    continue;
                }
                let (count, pending) = match stream {
                    Stream::Stdout => (&mut shown.stdout, &mut carry[0]),
                    Stream::Stderr => (&mut shown.stderr, &mut carry[1]),
                };
                *count += bytes.len();
                pending.extend_from_slice(&bytes);
                print(stream, &take_complete_utf8(pending));
            }
            for (pending, stream) in carry.iter().zip([Stream::Stdout, Stream::Stderr]) {
                print(stream, &String::from_utf8_lossy(pending));
            }
            shown
        });
        (LiveView { task }, tap)
    }

    /// Waits until everything received is printed (call once the run is over and the
    /// tap is gone), and says how much that was.
    pub async fn finish(self) -> Shown {
        self.task.await.unwrap_or(Shown {
            cut: true,
            ..Shown::default()
        })
    }
}

/// Writes `text`, escaped, to our own stream of the same name. A terminal that went
/// away is not an error worth stopping the run for.
fn print(stream: Stream, text: &str) {
    if text.is_empty() {
        return;
    }
    let escaped = escape_controls(text);
    let _ = match stream {
        Stream::Stdout => write_flushed(&mut std::io::stdout().lock(), &escaped),
        Stream::Stderr => write_flushed(&mut std::io::stderr().lock(), &escaped),
    };
}

/// The sandboxed program's text with terminal control sequences made visible: an
/// untrusted program must not move the cursor, retitle the window or hide lines in the
/// terminal of the person running it. Newlines and tabs stay as they are.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let is_control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_control(c) {
            escaped.push_str(&format!("\\x{{{:02x}}}", c as u32));
        } else {
            escaped.push(c);
        }
    }
    std::borrow::Cow::Owned(escaped)
}

fn write_flushed(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The longest valid UTF-8 prefix of `pending` as text (a character split over two
/// chunks waits for its second half); invalid bytes become U+FFFD.
fn take_complete_utf8(pending: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(pending) {
        Ok(_) => 0,
        // An incomplete character at the end: keep it for the next chunk.
        Err(error) if error.error_len().is_none() => pending.len() - error.valid_up_to(),
        Err(_) => 0,
    };
    let rest = pending.split_off(pending.len() - keep);
    let text = String::from_utf8_lossy(pending).into_owned();
    *pending = rest;
    text
}

#[cfg(test)]
mod tests {
    use super::{escape_controls, take_complete_utf8};

    #[test]
    fn terminal_controls_are_shown_not_obeyed() {
        assert_eq!(escape_controls("plain\tline\n"), "plain\tline\n");
        assert_eq!(
            escape_controls("\u{1b}[2Jgone\r\u{9b}31m\u{7}"),
            "\\x{1b}[2Jgone\\x{0d}\\x{9b}31m\\x{07}"
        );
    }

    #[test]
    fn a_character_split_over_chunks_waits_for_its_second_half() {
        let bytes = "é€".as_bytes();
        let mut pending = bytes[..1].to_vec();
        assert_eq!(take_complete_utf8(&mut pending), "");
        pending.extend_from_slice(&bytes[1..3]);
        assert_eq!(take_complete_utf8(&mut pending), "é");
        pending.extend_from_slice(&bytes[3..]);
        assert_eq!(take_complete_utf8(&mut pending), "€");
        assert!(pending.is_empty());
    }
}
