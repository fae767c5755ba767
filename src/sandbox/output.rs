//! Output capture with a hard cap: stdout and stderr kept apart, their sum bounded by
//! `limits.output`. Past the cap nothing more is buffered (a flood cannot grow the
//! server's memory), the stream that crossed it gets a marker line, and the caller keeps
//! draining the exec stream so the program can still finish and report its exit code.

use crate::policy::ByteSize;

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The two streams of one run, bounded together.
#[derive(Debug)]
pub struct Capture {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    limit: ByteSize,
    kept: u64,
    truncated: bool,
}

impl Capture {
    pub fn new(limit: ByteSize) -> Capture {
        Capture {
            stdout: Vec::new(),
            stderr: Vec::new(),
            limit,
            kept: 0,
            truncated: false,
        }
    }

    /// Adds a chunk; once the cap is reached every later chunk is dropped.
    pub fn push(&mut self, stream: Stream, bytes: &[u8]) {
        if self.truncated || bytes.is_empty() {
            return;
        }
        let room = self.limit.bytes().saturating_sub(self.kept);
        let buffer = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        if bytes.len() as u64 <= room {
            buffer.extend_from_slice(bytes);
            self.kept += bytes.len() as u64;
            return;
        }
        buffer.extend_from_slice(&bytes[..room as usize]);
        self.kept += room;
        trim_incomplete_utf8_tail(buffer);
        if !buffer.is_empty() && !buffer.ends_with(b"\n") {
            buffer.push(b'\n');
        }
        buffer.extend_from_slice(format!("[output truncated at {}]\n", self.limit).as_bytes());
        self.truncated = true;
    }

    #[cfg(test)]
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Both streams as text; bytes that are not UTF-8 become U+FFFD.
    pub fn finish(self) -> (String, String, bool) {
        (
            String::from_utf8_lossy(&self.stdout).into_owned(),
            String::from_utf8_lossy(&self.stderr).into_owned(),
            self.truncated,
        )
    }
}

/// Drops a multi-byte character cut in half by the cap, so the kept text ends cleanly
/// instead of with a replacement character the program never wrote.
fn trim_incomplete_utf8_tail(buffer: &mut Vec<u8>) {
    let start = buffer.len().saturating_sub(3);
    for index in (start..buffer.len()).rev() {
        let byte = buffer[index];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: keep looking for the lead byte
        }
        let needed = match byte {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return,
        };
        if buffer.len() - index < needed {
            buffer.truncate(index);
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_both_streams_apart_under_the_cap() {
        let mut capture = Capture::new(ByteSize(100));
        capture.push(Stream::Stdout, b"out 1\n");
        capture.push(Stream::Stderr, b"err 1\n");
        capture.push(Stream::Stdout, b"out 2\n");
        assert_eq!(
            capture.finish(),
            ("out 1\nout 2\n".into(), "err 1\n".into(), false)
        );
    }

    #[test]
    fn cuts_at_the_cap_counting_both_streams_and_marks_the_cut() {
        let mut capture = Capture::new(ByteSize(1024));
        capture.push(Stream::Stderr, &[b'e'; 1000]);
        capture.push(Stream::Stdout, b"0123456789abcdefghijklmnopqrstuvwxyz");
        capture.push(Stream::Stdout, b"dropped");
        capture.push(Stream::Stderr, b"dropped");
        let (stdout, stderr, truncated) = capture.finish();
        assert!(truncated);
        assert_eq!(
            stdout,
            "0123456789abcdefghijklmn\n[output truncated at 1KiB]\n"
        );
        assert_eq!(stderr.len(), 1000);
    }

    #[test]
    fn exactly_at_the_cap_is_not_truncated() {
        let mut capture = Capture::new(ByteSize(4));
        capture.push(Stream::Stdout, b"abcd");
        assert!(!capture.truncated());
        capture.push(Stream::Stdout, b"e");
        assert!(capture.truncated());
    }

    #[test]
    fn a_character_cut_by_the_cap_is_dropped_whole() {
        let mut capture = Capture::new(ByteSize(5));
        capture.push(Stream::Stdout, "abcé€".as_bytes()); // é is 2 bytes, € is 3
        let (stdout, _, _) = capture.finish();
        assert_eq!(stdout, "abcé\n[output truncated at 5B]\n");

        let mut capture = Capture::new(ByteSize(4));
        capture.push(Stream::Stdout, "abcé".as_bytes());
        let (stdout, _, _) = capture.finish();
        assert_eq!(stdout, "abc\n[output truncated at 4B]\n");
    }

    #[test]
    fn invalid_utf8_is_kept_with_replacement_characters() {
        let mut capture = Capture::new(ByteSize(100));
        capture.push(Stream::Stdout, b"ok \xff\xfe end\n");
        let (stdout, _, _) = capture.finish();
        assert_eq!(stdout, "ok \u{FFFD}\u{FFFD} end\n");
    }
}
