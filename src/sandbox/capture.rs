//! Output capture with a hard cap: stdout and stderr kept apart, their sum bounded by
//! `limits.output`, and neither able to crowd the other out.
//!
//! What an agent needs from a long run is the beginning (what started) and the end (the
//! result, the traceback), so each stream keeps its head and its tail. The budget is
//! shared fairly: a stream gets what it wrote up to half the cap, and what one stream
//! leaves unused goes to the other; so a flood on stderr cannot hide a one-line result
//! on stdout, and a flood on stdout cannot hide the traceback. Where a stream is cut, a
//! marker line says how many bytes were left out. Memory stays bounded during the run:
//! each stream buffers at most the cap (its head) plus half the cap (a ring of its
//! latest bytes), whatever the program writes, and the caller keeps draining the output
//! stream so the program can still finish and report its exit code.

use crate::policy::ByteSize;
use std::collections::VecDeque;

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One stream: its first bytes, a ring of its latest bytes, and how much it wrote.
#[derive(Debug, Default)]
struct Kept {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Kept {
    fn push(&mut self, bytes: &[u8], head_room: usize, tail_room: usize) {
        self.total += bytes.len() as u64;
        let into_head = bytes.len().min(head_room.saturating_sub(self.head.len()));
        self.head.extend_from_slice(&bytes[..into_head]);
        let rest = &bytes[into_head..];
        let rest = &rest[rest.len().saturating_sub(tail_room)..];
        let overflow = (self.tail.len() + rest.len()).saturating_sub(tail_room);
        self.tail.drain(..overflow.min(self.tail.len()));
        self.tail.extend(rest);
    }

    /// The stream within `share` bytes: whole if it fits, else its first and last
    /// `share / 2` bytes around a marker.
    fn render(self, share: u64, limit: ByteSize) -> (Vec<u8>, bool) {
        if self.total <= share {
            let mut all = self.head;
            all.extend(self.tail);
            return (all, false);
        }
        let half = (share / 2) as usize;
        // The end: the ring's bytes, and where the ring holds fewer than wanted, the
        // end of the head (which the ring continues), never overlapping the start.
        let from_tail = half.min(self.tail.len());
        let head_end = self.head.len().saturating_sub(half - from_tail).max(half);
        let mut last: Vec<u8> = self.head.get(head_end..).unwrap_or_default().to_vec();
        last.extend(self.tail.iter().skip(self.tail.len() - from_tail));
        let mut first = self.head;
        first.truncate(half);
        trim_incomplete_utf8_tail(&mut first);
        let skip = last
            .iter()
            .take_while(|b| **b & 0b1100_0000 == 0b1000_0000)
            .count();
        last.drain(..skip);
        let cut = self.total - first.len() as u64 - last.len() as u64;
        let mut out = first;
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out.extend_from_slice(
            format!("[… {cut} bytes cut here: output is capped at {limit} (limits.output) …]\n")
                .as_bytes(),
        );
        out.extend(last);
        (out, true)
    }
}

/// The two streams of one run, bounded together.
#[derive(Debug)]
pub struct Capture {
    stdout: Kept,
    stderr: Kept,
    limit: ByteSize,
}

impl Capture {
    pub fn new(limit: ByteSize) -> Capture {
        Capture {
            stdout: Kept::default(),
            stderr: Kept::default(),
            limit,
        }
    }

    /// Adds a chunk of one stream.
    pub fn push(&mut self, stream: Stream, bytes: &[u8]) {
        let limit = usize::try_from(self.limit.bytes()).unwrap_or(usize::MAX);
        let kept = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        kept.push(bytes, limit, limit / 2);
    }

    /// Both streams as text within the cap, and whether anything was cut; bytes that
    /// are not UTF-8 become U+FFFD.
    pub fn finish(self) -> (String, String, bool) {
        let limit = self.limit.bytes();
        let (out, err) = (self.stdout.total, self.stderr.total);
        let (out_share, err_share) = fair_shares(out, err, limit);
        let (stdout, out_cut) = self.stdout.render(out_share, self.limit);
        let (stderr, err_cut) = self.stderr.render(err_share, self.limit);
        (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
            out_cut || err_cut,
        )
    }
}

/// How `limit` bytes are split between two streams that wrote `a` and `b` bytes: each
/// gets what it wrote up to half, and the other's unused half on top.
fn fair_shares(a: u64, b: u64, limit: u64) -> (u64, u64) {
    if a + b <= limit {
        return (a, b);
    }
    let half = limit / 2;
    match (a <= half, b <= half) {
        (true, _) => (a, limit - a),
        (_, true) => (limit - b, b),
        _ => (half, limit - half),
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

    fn capture(limit: u64, chunks: &[(Stream, &[u8])]) -> (String, String, bool) {
        let mut capture = Capture::new(ByteSize(limit));
        for (stream, bytes) in chunks {
            capture.push(*stream, bytes);
        }
        capture.finish()
    }

    #[test]
    fn keeps_both_streams_apart_under_the_cap() {
        assert_eq!(
            capture(
                100,
                &[
                    (Stream::Stdout, b"out 1\n"),
                    (Stream::Stderr, b"err 1\n"),
                    (Stream::Stdout, b"out 2\n"),
                ]
            ),
            ("out 1\nout 2\n".into(), "err 1\n".into(), false)
        );
    }

    #[test]
    fn exactly_at_the_cap_is_not_truncated() {
        assert!(!capture(4, &[(Stream::Stdout, b"abcd")]).2);
        assert!(capture(4, &[(Stream::Stdout, b"abcde")]).2);
    }

    #[test]
    fn a_stderr_flood_leaves_stdout_whole_and_keeps_the_flood_s_ends() {
        let mut flood = b"first error line\n".to_vec();
        flood.extend(std::iter::repeat_n(b'e', 100_000));
        flood.extend_from_slice(b"\nTraceback: the last line\n");
        let (stdout, stderr, cut) = capture(
            1000,
            &[(Stream::Stdout, b"result = 42\n"), (Stream::Stderr, &flood)],
        );
        assert!(cut);
        assert_eq!(stdout, "result = 42\n");
        assert!(stderr.starts_with("first error line\n"), "{stderr}");
        assert!(stderr.ends_with("Traceback: the last line\n"), "{stderr}");
        assert!(stderr.contains("bytes cut here"), "{stderr}");
        assert!(
            stdout.len() + stderr.len() <= 1000 + 100,
            "{}",
            stderr.len()
        );
    }

    #[test]
    fn two_floods_share_the_cap_evenly() {
        let big = vec![b'x'; 50_000];
        let (stdout, stderr, cut) =
            capture(1000, &[(Stream::Stdout, &big), (Stream::Stderr, &big)]);
        assert!(cut);
        let marker_room = 100;
        assert!(stdout.len() <= 500 + marker_room && stdout.len() >= 450);
        assert!(stderr.len() <= 500 + marker_room && stderr.len() >= 450);
        assert!(stdout.contains("49500 bytes cut here"), "{stdout}");
    }

    #[test]
    fn a_short_tail_joins_the_end_of_the_head() {
        // 12 bytes into a cap of 10: the head holds all of it but the last 2.
        let (stdout, _, cut) = capture(10, &[(Stream::Stdout, b"0123456789AB")]);
        assert!(cut);
        assert!(stdout.starts_with("01234\n"), "{stdout}");
        assert!(stdout.ends_with("789AB"), "{stdout}");
    }

    #[test]
    fn characters_cut_by_the_cap_are_dropped_whole() {
        let text = "é".repeat(100);
        let (stdout, _, _) = capture(21, &[(Stream::Stdout, text.as_bytes())]);
        assert!(!stdout.contains('\u{FFFD}'), "{stdout}");
        // A share of 20 bytes: 10 from the start and 10 from the end, 5 characters each.
        assert!(stdout.starts_with("ééééé\n["), "{stdout}");
        assert!(stdout.ends_with("]\nééééé"), "{stdout}");
        let (odd, _, _) = capture(19, &[(Stream::Stdout, text.as_bytes())]);
        assert!(odd.starts_with("éééé\n["), "{odd}");
        assert!(!odd.contains('\u{FFFD}'), "{odd}");
    }

    #[test]
    fn invalid_utf8_is_kept_with_replacement_characters() {
        let (stdout, _, _) = capture(100, &[(Stream::Stdout, b"ok \xff\xfe end\n")]);
        assert_eq!(stdout, "ok \u{FFFD}\u{FFFD} end\n");
    }

    #[test]
    fn memory_stays_bounded_whatever_is_written() {
        let mut capture = Capture::new(ByteSize(1000));
        for _ in 0..1000 {
            capture.push(Stream::Stdout, &[b'z'; 1000]);
        }
        assert!(capture.stdout.head.len() <= 1000);
        assert!(capture.stdout.tail.len() <= 500);
        assert_eq!(capture.stdout.total, 1_000_000);
    }

    #[test]
    fn shares_follow_what_each_stream_wrote() {
        assert_eq!(fair_shares(10, 20, 100), (10, 20));
        assert_eq!(fair_shares(10, 500, 100), (10, 90));
        assert_eq!(fair_shares(500, 10, 100), (90, 10));
        assert_eq!(fair_shares(500, 500, 100), (50, 50));
    }
}
