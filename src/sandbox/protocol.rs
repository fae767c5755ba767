//! The program protocol between the core and the bootstrap waiting in a box, apart
//! from how a backend carries the bytes.
//!
//! Why the code goes in through the main process's stdin and not as a file upload: on
//! Docker 20.10 (API 1.41) an archive upload into a read-only container is refused
//! when `/sandbox` is a tmpfs, or lands under the mount, invisible to the code; the
//! bootstrap inside writes the file into the real scratch space.
//!
//! In: one header line of JSON (`file`, `len`, `env`, `end`; in a session also `call`
//! and `awaits`; `files` when files are handed in) and then exactly `len` bytes of
//! code, then each file's bytes. A stateless run closes the input after the program; a
//! session keeps it open for the next call.
//!
//! Out: both streams as the program writes them. The run ends at the line
//! `\x1e<end> <status>` the bootstrap writes on both streams when the program is done
//! (after its exit handlers); before it, on stdout, the line `\x1e<end> files <json>`
//! records the files and figures the program left. Where no end line comes (a kill,
//! `os._exit`, a failing Node program, whose error Node prints last), the run ends
//! with the process. The run-time layers' block lines (stderr lines starting with
//! [`MARKER`]) become findings, not output.

use super::assets::MARKER;
use super::capture::Stream;
use super::files_in::InputFile;
use super::OutputTap;

/// What one run or session call sends: the header line and the code.
#[derive(Debug, Clone)]
pub struct Program {
    /// File name inside `/sandbox`, e.g. `main.py` (a session call has none).
    pub file: &'static str,
    pub code: Vec<u8>,
    pub env: Vec<(String, String)>,
    /// Where output also goes as it arrives.
    pub tap: Option<OutputTap>,
    /// A session call: its number, and whether its value is a promise to wait for.
    pub call: Option<(u64, bool)>,
    /// Files to write under `/sandbox` first; their bytes follow the code.
    pub files: Vec<InputFile>,
}

impl Program {
    /// The bytes written to the interpreter's stdin; `end` is the run's end token.
    pub fn input(&self, end: &str) -> Vec<u8> {
        let env: serde_json::Map<String, serde_json::Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let mut header = serde_json::json!({
            "file": self.file,
            "len": self.code.len(),
            "env": env,
            "end": end,
        });
        if !self.files.is_empty() {
            header["files"] = self
                .files
                .iter()
                .map(|file| serde_json::json!({"path": file.path, "len": file.bytes.len()}))
                .collect();
        }
        if let Some((call, awaits)) = self.call {
            header["call"] = call.into();
            header["awaits"] = awaits.into();
        }
        let mut bytes = header.to_string().into_bytes();
        bytes.push(b'\n');
        bytes.extend_from_slice(&self.code);
        for file in &self.files {
            bytes.extend_from_slice(&file.bytes);
        }
        bytes
    }
}

/// The run's output as it arrives, for an [`super::OutputTap`]: best effort (a chunk
/// the receiver has no room for is skipped there; the outcome has everything), and
/// without the guard's block lines, which become findings rather than output.
pub struct Tap<'a> {
    sender: &'a OutputTap,
    stderr: GuardLines,
}

impl<'a> Tap<'a> {
    pub fn new(sender: &'a OutputTap) -> Tap<'a> {
        Tap {
            sender,
            stderr: GuardLines::default(),
        }
    }

    pub fn send(&mut self, stream: Stream, bytes: &[u8]) {
        let bytes = match stream {
            Stream::Stdout => bytes.to_vec(),
            Stream::Stderr => self.stderr.filter(bytes),
        };
        if !bytes.is_empty() {
            let _ = self.sender.try_send((stream, bytes));
        }
    }
}

/// Removes the guard's block lines from a byte stream as it passes. A line starting
/// with the marker's first byte (a control character no ordinary output starts a line
/// with) is held until its end; everything else passes at once.
#[derive(Default)]
struct GuardLines {
    mid_line: bool,
    held: Option<Vec<u8>>,
}

impl GuardLines {
    fn filter(&mut self, bytes: &[u8]) -> Vec<u8> {
        let marker = MARKER.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        for &byte in bytes {
            if let Some(held) = &mut self.held {
                held.push(byte);
                if byte == b'\n' {
                    let line = self.held.take().unwrap_or_default();
                    if !line.starts_with(marker) {
                        out.extend_from_slice(&line);
                    }
                    self.mid_line = false;
                }
                continue;
            }
            if !self.mid_line && byte == marker[0] {
                self.held = Some(vec![byte]);
                continue;
            }
            out.push(byte);
            self.mid_line = byte != b'\n';
        }
        out
    }
}

/// Finds a run's records in one stream, wherever chunks split them, and passes
/// everything before the end line on, without the records. A record is a line
/// `\x1e<token> <body>`: the end line's body is the status; the files record's
/// (stdout only, before the end line) is `files <json>`.
pub struct EndLine {
    pattern: Vec<u8>,
    /// Bytes that may be the start of a record, held until that is decided, or a
    /// record's start (the pattern and more) until its newline comes.
    pending: Vec<u8>,
    pub status: Option<i64>,
    /// The files record's JSON.
    pub files: Option<Vec<u8>>,
}

impl EndLine {
    pub fn new(token: &str) -> EndLine {
        EndLine {
            pattern: format!("\u{1e}{token} ").into_bytes(),
            pending: Vec::new(),
            status: None,
            files: None,
        }
    }

    pub fn done(&self) -> bool {
        self.status.is_some()
    }

    pub fn filter(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut data = std::mem::take(&mut self.pending);
        // A record already started needs only its newline: the new bytes are searched,
        // not the whole (possibly megabytes long) record again.
        let mut searched = if data.starts_with(&self.pattern) {
            data.len()
        } else {
            0
        };
        data.extend_from_slice(bytes);
        while !self.done() {
            let at = if searched > 0 {
                Some(0)
            } else {
                data.windows(self.pattern.len())
                    .position(|window| window == self.pattern)
            };
            let Some(at) = at else {
                let keep = (1..=self.pattern.len().min(data.len()))
                    .rev()
                    .find(|&n| data.ends_with(&self.pattern[..n]))
                    .unwrap_or(0);
                self.pending = data.split_off(data.len() - keep);
                out.extend_from_slice(&data);
                return out;
            };
            out.extend_from_slice(&data[..at]);
            let body_start = at + self.pattern.len();
            let from = body_start.max(searched);
            let Some(newline) = data[from..].iter().position(|&b| b == b'\n') else {
                self.pending = data[at..].to_vec();
                return out;
            };
            let body = &data[body_start..from + newline];
            match body.strip_prefix(b"files ") {
                Some(record) => self.files = Some(record.to_vec()),
                None => {
                    let status = String::from_utf8_lossy(body);
                    self.status = Some(status.trim().parse().unwrap_or(1));
                }
            }
            data = data.split_off(from + newline + 1);
            searched = 0;
        }
        // Written after the call ended (a background thread): not this call's.
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_a_header_line_then_exactly_the_code() {
        let program = Program {
            file: "main.py",
            code: "print('é')\n".as_bytes().to_vec(),
            env: vec![("A".into(), "it's \"x\"".into())],
            tap: None,
            call: None,
            files: vec![crate::sandbox::files_in::InputFile {
                path: "in/data.bin".into(),
                bytes: vec![0, 255],
            }],
        };
        let input = program.input("tok");
        let newline = input.iter().position(|&b| b == b'\n').unwrap();
        let header: serde_json::Value = serde_json::from_slice(&input[..newline]).unwrap();
        assert_eq!(header["file"], "main.py");
        assert_eq!(header["len"], 12);
        assert_eq!(header["env"]["A"], "it's \"x\"");
        assert_eq!(
            &input[newline + 1..input.len() - 2],
            program.code.as_slice()
        );
        assert_eq!(&input[input.len() - 2..], &[0, 255]);
        assert_eq!(
            header["files"],
            serde_json::json!([{"path": "in/data.bin", "len": 2}])
        );
        assert_eq!(header["end"], "tok");
        assert!(header.get("call").is_none());
        let call = Program {
            call: Some((3, true)),
            ..program
        };
        let input = call.input("tok");
        let newline = input.iter().position(|&b| b == b'\n').unwrap();
        let header: serde_json::Value = serde_json::from_slice(&input[..newline]).unwrap();
        assert_eq!(
            (header["call"].as_u64(), header["end"].as_str()),
            (Some(3), Some("tok"))
        );
        assert_eq!(header["awaits"], true);
    }

    #[test]
    fn a_call_ends_at_its_end_line_wherever_chunks_split_it() {
        let text = "out 1\nout \u{1e}2\n\u{1e}tok 7\nlater\n";
        for size in [1, 2, 3, 7, 64] {
            let mut end = EndLine::new("tok");
            let mut out = Vec::new();
            for chunk in text.as_bytes().chunks(size) {
                out.extend(end.filter(chunk));
            }
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "out 1\nout \u{1e}2\n",
                "chunks of {size}"
            );
            assert_eq!(end.status, Some(7));
        }
        let record = "out\n\u{1e}tok files {\"files\":[]}\nmore\n\u{1e}tok 0\n";
        for size in [1, 3, 9, 64] {
            let mut end = EndLine::new("tok");
            let out: Vec<u8> = record
                .as_bytes()
                .chunks(size)
                .flat_map(|chunk| end.filter(chunk))
                .collect();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "out\nmore\n",
                "chunks of {size}"
            );
            assert_eq!(end.files.as_deref(), Some(&b"{\"files\":[]}"[..]));
            assert_eq!(end.status, Some(0));
        }
        let mut other = EndLine::new("tok");
        assert_eq!(
            other.filter("\u{1e}tok2 0\n".as_bytes()),
            "\u{1e}tok2 0\n".as_bytes()
        );
        assert!(!other.done());
    }

    #[test]
    fn guard_lines_are_kept_out_of_the_tap_wherever_chunks_split_them() {
        let marker = crate::sandbox::assets::MARKER;
        let text = format!("warn 1\n{marker}{{\"rule\":\"x\"}}\nwarn 2\n\u{1e}not ours\npartial");
        let bytes = text.as_bytes();
        for size in [1, 2, 5, 64] {
            let mut lines = GuardLines::default();
            let out: Vec<u8> = bytes.chunks(size).flat_map(|c| lines.filter(c)).collect();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "warn 1\nwarn 2\n\u{1e}not ours\npartial",
                "chunks of {size}"
            );
        }
    }
}
