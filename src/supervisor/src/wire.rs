//! The bytes between the server and the supervisor, both ways, on the box's attached
//! stdin and stdout: frames of `[kind: u8][length: u32, little-endian][payload]`, whose
//! payload is a sequence of fields (a byte string is `[length: u32][bytes]`, a number
//! is 8 bytes little-endian). Both ends use this one module, so the format is written
//! once. Nothing the program in the box writes reaches these streams: its output comes
//! to the supervisor through pipes, and the supervisor frames it.
//!
//! Server → box: [`ToBox`]. Box → server: [`FromBox`].

use std::io::{self, Read, Write};

/// The largest frame either end accepts: a program with its files, or a file returned,
/// is bounded by the policy's limits far below this.
pub const MAX_FRAME: usize = 512 << 20;

/// A program for the interpreter: a stateless run's (its file is named) or one call of
/// a session (numbered from 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    /// The file name under the working directory (`main.py`); empty for a session call.
    pub file: String,
    /// The call's number in its session; 0 for a stateless run.
    pub call: u64,
    /// A session call whose value is a promise to wait for (JavaScript).
    pub awaits: bool,
    pub env: Vec<(String, String)>,
    pub code: Vec<u8>,
    /// Files written under the working directory before the program starts.
    pub files: Vec<(String, Vec<u8>)>,
}

/// What the server sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToBox {
    Program(Program),
}

/// How a run or call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The process exited with this code (a stateless run).
    Exited(i32),
    /// The process was killed by this signal.
    Signaled(i32),
    /// A session call finished with this status (the interpreter goes on).
    Finished(i32),
}

impl Status {
    /// The exit code a shell would show: the code, or 128 + the signal.
    pub fn exit_code(self) -> i64 {
        match self {
            Status::Exited(code) | Status::Finished(code) => i64::from(code),
            Status::Signaled(signal) => 128 + i64::from(signal),
        }
    }
}

/// One file the run created or changed, or a figure it drew.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative to the working directory; a figure's is `figure-N.png`.
    pub path: String,
    pub size: u64,
    pub figure: bool,
    /// Why its content is not here (the cap of `outputs:` that held it back, or an
    /// error); empty when it is.
    pub omitted: String,
    pub data: Vec<u8>,
}

/// What the supervisor sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromBox {
    /// A layer the settings require is missing here: nothing will run.
    Unavailable(String),
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// A run-time hook inside the interpreter stopped the program: its record (JSON).
    /// The interpreter's own word, so no more than an explanation.
    Explained(Vec<u8>),
    /// The kernel refused a system call (seccomp, answered by the supervisor).
    Refused {
        syscall: String,
        detail: String,
    },
    /// The files and figures the run left (within the caps), and how many more changed
    /// than are listed.
    Files {
        entries: Vec<FileEntry>,
        unlisted: u64,
    },
    /// The run or call is over. `gone`: the interpreter is no more (always after a
    /// stateless run). `oom`: the kernel's OOM killer struck in the box meanwhile.
    End {
        status: Status,
        oom: bool,
        gone: bool,
    },
}

mod kind {
    pub const PROGRAM: u8 = b'P';
    pub const UNAVAILABLE: u8 = b'U';
    pub const STDOUT: u8 = b'1';
    pub const STDERR: u8 = b'2';
    pub const EXPLAINED: u8 = b'X';
    pub const REFUSED: u8 = b'R';
    pub const FILES: u8 = b'F';
    pub const END: u8 = b'E';
}

/// Builds a payload field by field.
#[derive(Default)]
struct Fields(Vec<u8>);

impl Fields {
    fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0
            .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.0.extend_from_slice(bytes);
        self
    }

    fn number(mut self, n: u64) -> Self {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }

    fn frame(self, kind: u8) -> Vec<u8> {
        let mut frame = Vec::with_capacity(5 + self.0.len());
        frame.push(kind);
        frame.extend_from_slice(&(self.0.len() as u32).to_le_bytes());
        frame.extend_from_slice(&self.0);
        frame
    }
}

/// Reads a payload field by field; any shortfall is an error, never a panic.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize;
        self.take(len)
    }

    fn text(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| invalid("a field is not UTF-8"))
    }

    fn number(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(invalid("a frame ends inside a field"));
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(taken)
    }

    fn done(&self) -> io::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(invalid("a frame has bytes past its last field"))
        }
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// The status as two numbers: its kind and value.
fn status_fields(status: Status) -> (u64, u64) {
    match status {
        Status::Exited(code) => (0, code as u32 as u64),
        Status::Signaled(signal) => (1, signal as u32 as u64),
        Status::Finished(code) => (2, code as u32 as u64),
    }
}

impl ToBox {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ToBox::Program(program) => {
                let mut fields = Fields::default()
                    .bytes(program.file.as_bytes())
                    .number(program.call)
                    .number(u64::from(program.awaits))
                    .number(program.env.len() as u64);
                for (name, value) in &program.env {
                    fields = fields.bytes(name.as_bytes()).bytes(value.as_bytes());
                }
                fields = fields
                    .bytes(&program.code)
                    .number(program.files.len() as u64);
                for (path, bytes) in &program.files {
                    fields = fields.bytes(path.as_bytes()).bytes(bytes);
                }
                fields.frame(kind::PROGRAM)
            }
        }
    }

    /// Reads one frame; `Ok(None)` at a clean end of the stream.
    pub fn read(from: &mut impl Read) -> io::Result<Option<ToBox>> {
        match read_frame(from)? {
            Some((kind, payload)) => ToBox::decode(kind, &payload).map(Some),
            None => Ok(None),
        }
    }

    /// Takes one whole frame off the front of `buffer`, if it holds one.
    pub fn take(buffer: &mut Vec<u8>) -> io::Result<Option<ToBox>> {
        if buffer.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_le_bytes(buffer[1..5].try_into().expect("4 bytes")) as usize;
        if len > MAX_FRAME {
            return Err(invalid("a frame over the size limit"));
        }
        if buffer.len() < 5 + len {
            return Ok(None);
        }
        let message = ToBox::decode(buffer[0], &buffer[5..5 + len]);
        buffer.drain(..5 + len);
        message.map(Some)
    }

    /// Decodes one frame's `kind` and `payload`.
    pub fn decode(kind: u8, payload: &[u8]) -> io::Result<ToBox> {
        let mut reader = Reader(payload);
        let message = match kind {
            kind::PROGRAM => {
                let file = reader.text()?;
                let call = reader.number()?;
                let awaits = reader.number()? != 0;
                let mut env = Vec::new();
                for _ in 0..reader.number()? {
                    env.push((reader.text()?, reader.text()?));
                }
                let code = reader.bytes()?.to_vec();
                let mut files = Vec::new();
                for _ in 0..reader.number()? {
                    files.push((reader.text()?, reader.bytes()?.to_vec()));
                }
                ToBox::Program(Program {
                    file,
                    call,
                    awaits,
                    env,
                    code,
                    files,
                })
            }
            other => return Err(invalid(&format!("unknown frame kind {other}"))),
        };
        reader.done()?;
        Ok(message)
    }
}

impl FromBox {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            FromBox::Unavailable(reason) => Fields::default()
                .bytes(reason.as_bytes())
                .frame(kind::UNAVAILABLE),
            FromBox::Stdout(bytes) => Fields::default().bytes(bytes).frame(kind::STDOUT),
            FromBox::Stderr(bytes) => Fields::default().bytes(bytes).frame(kind::STDERR),
            FromBox::Explained(bytes) => Fields::default().bytes(bytes).frame(kind::EXPLAINED),
            FromBox::Refused { syscall, detail } => Fields::default()
                .bytes(syscall.as_bytes())
                .bytes(detail.as_bytes())
                .frame(kind::REFUSED),
            FromBox::Files { entries, unlisted } => {
                let mut fields = Fields::default()
                    .number(*unlisted)
                    .number(entries.len() as u64);
                for entry in entries {
                    fields = fields
                        .bytes(entry.path.as_bytes())
                        .number(entry.size)
                        .number(u64::from(entry.figure))
                        .bytes(entry.omitted.as_bytes())
                        .bytes(&entry.data);
                }
                fields.frame(kind::FILES)
            }
            FromBox::End { status, oom, gone } => {
                let (kind_of_status, value) = status_fields(*status);
                Fields::default()
                    .number(kind_of_status)
                    .number(value)
                    .number(u64::from(*oom))
                    .number(u64::from(*gone))
                    .frame(kind::END)
            }
        }
    }

    /// Decodes one frame's `kind` and `payload` (as [`read_frame`] or a [`Decoder`]
    /// found them).
    pub fn decode(kind: u8, payload: &[u8]) -> io::Result<FromBox> {
        let mut reader = Reader(payload);
        let message = match kind {
            kind::UNAVAILABLE => FromBox::Unavailable(reader.text()?),
            kind::STDOUT => FromBox::Stdout(reader.bytes()?.to_vec()),
            kind::STDERR => FromBox::Stderr(reader.bytes()?.to_vec()),
            kind::EXPLAINED => FromBox::Explained(reader.bytes()?.to_vec()),
            kind::REFUSED => FromBox::Refused {
                syscall: reader.text()?,
                detail: reader.text()?,
            },
            kind::FILES => {
                let unlisted = reader.number()?;
                let mut entries = Vec::new();
                for _ in 0..reader.number()? {
                    entries.push(FileEntry {
                        path: reader.text()?,
                        size: reader.number()?,
                        figure: reader.number()? != 0,
                        omitted: reader.text()?,
                        data: reader.bytes()?.to_vec(),
                    });
                }
                FromBox::Files { entries, unlisted }
            }
            kind::END => {
                let kind_of_status = reader.number()?;
                let value = reader.number()? as u32 as i32;
                let status = match kind_of_status {
                    0 => Status::Exited(value),
                    1 => Status::Signaled(value),
                    2 => Status::Finished(value),
                    _ => return Err(invalid("an unknown end status")),
                };
                FromBox::End {
                    status,
                    oom: reader.number()? != 0,
                    gone: reader.number()? != 0,
                }
            }
            other => return Err(invalid(&format!("unknown frame kind {other}"))),
        };
        reader.done()?;
        Ok(message)
    }

    /// Writes this frame whole.
    pub fn write(&self, to: &mut impl Write) -> io::Result<()> {
        to.write_all(&self.encode())?;
        to.flush()
    }
}

/// Reads one frame: its kind and payload; `Ok(None)` at a clean end of the stream.
pub fn read_frame(from: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    let mut filled = 0;
    while filled < head.len() {
        match from.read(&mut head[filled..])? {
            0 if filled == 0 => return Ok(None),
            0 => return Err(invalid("the stream ends inside a frame's head")),
            n => filled += n,
        }
    }
    let len = u32::from_le_bytes(head[1..].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME {
        return Err(invalid("a frame over the size limit"));
    }
    let mut payload = vec![0u8; len];
    from.read_exact(&mut payload)?;
    Ok(Some((head[0], payload)))
}

/// Frames out of a byte stream that arrives in chunks of any size (the server's side:
/// the engine hands the box's stdout over in pieces that split frames anywhere).
#[derive(Debug, Default)]
pub struct Decoder {
    pending: Vec<u8>,
}

impl Decoder {
    /// Takes a chunk; returns the frames it completed.
    pub fn push(&mut self, chunk: &[u8]) -> io::Result<Vec<FromBox>> {
        self.pending.extend_from_slice(chunk);
        let mut frames = Vec::new();
        let mut at = 0;
        while self.pending.len() - at >= 5 {
            let len = u32::from_le_bytes(self.pending[at + 1..at + 5].try_into().expect("4 bytes"))
                as usize;
            if len > MAX_FRAME {
                return Err(invalid("a frame over the size limit"));
            }
            if self.pending.len() - at - 5 < len {
                break;
            }
            let kind = self.pending[at];
            frames.push(FromBox::decode(kind, &self.pending[at + 5..at + 5 + len])?);
            at += 5 + len;
        }
        self.pending.drain(..at);
        Ok(frames)
    }

    /// True when no part of a frame is waiting for the rest.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_reads_back_as_it_was_written() {
        let program = ToBox::Program(Program {
            file: "main.py".into(),
            call: 3,
            awaits: true,
            env: vec![("A".into(), "it's \"x\"\n".into())],
            code: "print('é')\n".as_bytes().to_vec(),
            files: vec![("in/data.bin".into(), vec![0, 255, 10])],
        });
        let bytes = program.encode();
        let mut reader = bytes.as_slice();
        assert_eq!(ToBox::read(&mut reader).unwrap(), Some(program));
        assert_eq!(ToBox::read(&mut reader).unwrap(), None);
    }

    #[test]
    fn every_message_of_the_box_survives_any_chunking() {
        let messages = vec![
            FromBox::Stdout(b"out\n".to_vec()),
            FromBox::Stderr(vec![0x1e, b'x', b'\n']),
            FromBox::Explained(b"{\"rule\":\"x\"}".to_vec()),
            FromBox::Refused {
                syscall: "execve".into(),
                detail: "/bin/sh".into(),
            },
            FromBox::Files {
                entries: vec![FileEntry {
                    path: "figure-1.png".into(),
                    size: 3,
                    figure: true,
                    omitted: String::new(),
                    data: vec![1, 2, 3],
                }],
                unlisted: 7,
            },
            FromBox::Unavailable("no landlock".into()),
            FromBox::End {
                status: Status::Signaled(9),
                oom: true,
                gone: true,
            },
        ];
        let bytes: Vec<u8> = messages.iter().flat_map(FromBox::encode).collect();
        for size in [1, 2, 5, 7, 64, bytes.len()] {
            let mut decoder = Decoder::default();
            let mut got = Vec::new();
            for chunk in bytes.chunks(size) {
                got.extend(decoder.push(chunk).unwrap());
            }
            assert_eq!(got, messages, "chunks of {size}");
            assert!(decoder.is_empty());
        }
    }

    #[test]
    fn short_or_unknown_frames_are_errors_not_panics() {
        assert!(FromBox::decode(b'E', &[1, 2, 3]).is_err());
        assert!(FromBox::decode(b'?', &[]).is_err());
        let mut extra = FromBox::Stdout(b"x".to_vec()).encode();
        extra[1] += 1;
        extra.push(0);
        assert!(Decoder::default().push(&extra).is_err());
        let huge = [b'1', 0xff, 0xff, 0xff, 0xff];
        assert!(Decoder::default().push(&huge).is_err());
        let mut cut: &[u8] = &[b'P', 10, 0, 0, 0, 1];
        assert!(ToBox::read(&mut cut).is_err());
    }

    #[test]
    fn exit_codes_read_as_a_shell_shows_them() {
        assert_eq!(Status::Exited(4).exit_code(), 4);
        assert_eq!(Status::Signaled(9).exit_code(), 137);
        assert_eq!(Status::Finished(1).exit_code(), 1);
    }
}
