//! Running the code in a started container: the interpreter is already running there,
//! waiting on its attached stdin (`Interpreter`); a run writes the program to it and
//! collects the two output streams apart, under a wall-clock limit and cancellation,
//! then the exit code and the OOM evidence.
//!
//! Why the code goes in through stdin and not as a tar upload: on Docker 20.10 (API
//! 1.41) `PUT /containers/{id}/archive` into a read-only container is refused
//! ("container rootfs is marked read-only") when `/sandbox` is a `HostConfig.Tmpfs`
//! mount, and when it is a `Mounts` tmpfs the upload reports success but the files land
//! in the container's own layer under the mount, invisible to the code (checked on this
//! daemon with `docker cp`). The bootstrap inside writes the file into the real tmpfs.
//!
//! The program is one header line of JSON (`file`, `len`, `env`, `end`; in a session
//! also `call`) and then exactly `len` bytes of code. The run ends at the line
//! `\x1e<end> <status>` the bootstrap writes on both streams when the program is done
//! (after its exit handlers), or, where it writes none (a kill, `os._exit`, a failing
//! Node program, whose error Node prints last), when the process ends. A stateless run
//! closes stdin after the program; a session keeps it open for the next call. Waiting
//! for the end line rather than the container's stop saves the engine's ~40 ms of
//! stopping it.

use super::container::{engine_error, remove, short};
use super::output::{Capture, Stream};
use super::SandboxError;
use crate::policy::ByteSize;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::Docker;
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// The interpreter started as a container's main process and waiting for its program
/// on the stdin it is attached to.
pub struct Interpreter {
    pub container: String,
    output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
    input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
}

impl Interpreter {
    /// The interpreter of container `id`, through the attachment made before its start.
    pub fn attached(
        id: String,
        attached: bollard::container::AttachContainerResults,
    ) -> Interpreter {
        Interpreter {
            container: id,
            output: attached.output,
            input: attached.input,
        }
    }
}

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreter")
            .field("container", &short(&self.container))
            .finish()
    }
}

/// True while container `id` still runs: a pooled one that died (the engine restarted,
/// say) is not handed a program.
pub async fn waiting(docker: &Docker, id: &str) -> bool {
    docker
        .inspect_container(id, None)
        .await
        .is_ok_and(|info| info.state.and_then(|state| state.running) == Some(true))
}

/// What one run or session call sends: the header line and the code.
#[derive(Debug, Clone)]
pub struct Program {
    /// File name inside `/sandbox`, e.g. `main.py` (a session call has none).
    pub file: &'static str,
    pub code: Vec<u8>,
    pub env: Vec<(String, String)>,
    /// Where output also goes as it arrives.
    pub tap: Option<super::OutputTap>,
    /// A session call: its number, and whether its value is a promise to wait for.
    pub call: Option<(u64, bool)>,
    /// Files to write under `/sandbox` first; their bytes follow the code.
    pub files: Vec<super::files::InputFile>,
}

impl Program {
    /// The bytes written to the interpreter's stdin; `end` is the run's end token.
    fn input(&self, end: &str) -> Vec<u8> {
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
struct Tap<'a> {
    sender: &'a super::OutputTap,
    stderr: GuardLines,
}

impl Tap<'_> {
    fn send(&mut self, stream: Stream, bytes: &[u8]) {
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
        let marker = super::guard::MARKER.as_bytes();
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

/// How a run (or session call) ended.
#[derive(Debug)]
pub struct Executed {
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub truncated: bool,
    pub duration: Duration,
    /// The interpreter is gone: always after a stateless run; after a session call,
    /// only when the program exited (or was killed) instead of finishing the call.
    pub ended: bool,
    /// The bootstrap's record of the files and figures the program left (JSON).
    pub files: Option<Vec<u8>>,
}

/// How often a running container is asked whether its program has exited (for a
/// program that writes no end line).
const EXIT_POLL: Duration = Duration::from_millis(500);
/// Output still arriving after the program exited is collected for this long.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// Exit code reported when the run was killed (SIGKILL), like a shell reports it.
pub const KILLED_EXIT_CODE: i64 = 137;

/// Finds a run's records in one stream, wherever chunks split them, and passes
/// everything before the end line on, without the records. A record is a line
/// `\x1e<token> <body>`: the end line's body is the status; the files record's
/// (stdout only, before the end line) is `files <json>`.
struct EndLine {
    pattern: Vec<u8>,
    /// Bytes that may be the start of a record, held until that is decided, or a
    /// record's start (the pattern and more) until its newline comes.
    pending: Vec<u8>,
    status: Option<i64>,
    /// The files record's JSON.
    files: Option<Vec<u8>>,
}

impl EndLine {
    fn new(token: &str) -> EndLine {
        EndLine {
            pattern: format!("\u{1e}{token} ").into_bytes(),
            pending: Vec::new(),
            status: None,
            files: None,
        }
    }

    fn done(&self) -> bool {
        self.status.is_some()
    }

    fn filter(&mut self, bytes: &[u8]) -> Vec<u8> {
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

/// Sends `program` to the waiting `interpreter` and collects its output until the end
/// lines carrying `end` (a token the code cannot know in advance), or the process's
/// end. `Executed::ended` says whether the interpreter is gone (always, for a
/// stateless run). On timeout or cancellation the container is removed (that kills
/// every process in it); on cancellation `Err(Cancelled)` returns once it is gone.
pub async fn execute(
    docker: &Docker,
    interpreter: &mut Interpreter,
    program: &Program,
    end: &str,
    timeout: Duration,
    output_limit: ByteSize,
    cancel: &CancellationToken,
) -> Result<Executed, SandboxError> {
    let started = Instant::now();
    let id = interpreter.container.clone();
    let mut tap = program.tap.as_ref().map(|sender| Tap {
        sender,
        stderr: GuardLines::default(),
    });
    let mut ends = [EndLine::new(end), EndLine::new(end)];
    let bytes = program.input(end);
    let session = program.call.is_some();
    let input = &mut interpreter.input;
    let write = async move {
        input.write_all(&bytes).await?;
        if session {
            input.flush().await
        } else {
            input.shutdown().await
        }
    };
    tokio::pin!(write);
    let mut written = false;

    let mut capture = Capture::new(output_limit);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut timed_out = false;
    let mut stream_error = None;
    // The output ends when every holder of the pipes has exited, which a background
    // child can delay past the program's own exit. The exec is polled now and then so
    // that the run ends (shortly after the program does, with its exit code) instead of
    // at the wall-clock limit; the container's removal then ends the children too.
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + EXIT_POLL, EXIT_POLL);
    let mut exited: Option<i64> = None;
    let grace = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                remove(docker, &id).await;
                return Err(SandboxError::Cancelled);
            }
            _ = &mut deadline => {
                timed_out = true;
                break;
            }
            result = &mut write, if !written => {
                written = true;
                if let Err(error) = result {
                    // The interpreter is gone (it died while waiting, or exited): what
                    // it said, and its exit code, come through the output as usual.
                    tracing::debug!(container = short(&id), %error, "writing the program");
                }
            }
            _ = &mut grace, if exited.is_some() => {
                tracing::debug!(container = short(&id), "the program exited; its children still hold the output");
                break;
            }
            _ = poll.tick(), if exited.is_none() => {
                if let Some(code) = exited_with(docker, &id).await {
                    exited = Some(code);
                    grace.as_mut().reset(tokio::time::Instant::now() + EXIT_GRACE);
                }
            }
            item = interpreter.output.next() => {
                let (stream, message) = match item {
                    Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message })) => (Stream::Stdout, message),
                    Some(Ok(LogOutput::StdErr { message })) => (Stream::Stderr, message),
                    Some(Ok(LogOutput::StdIn { .. })) => continue,
                    Some(Err(error)) => {
                        stream_error = Some(error);
                        break;
                    }
                    None => break,
                };
                let message = ends[stream as usize].filter(&message);
                if let Some(tap) = &mut tap {
                    tap.send(stream, &message);
                }
                capture.push(stream, &message);
                if ends.iter().all(EndLine::done) {
                    break;
                }
            }
        }
    }
    let duration = started.elapsed();

    if timed_out {
        tracing::debug!(
            container = short(&id),
            ?timeout,
            "wall-clock limit reached: killing"
        );
        remove(docker, &id).await;
        let (stdout, stderr, truncated) = capture.finish();
        return Ok(Executed {
            exit_code: KILLED_EXIT_CODE,
            stdout,
            stderr,
            timed_out: true,
            truncated,
            duration,
            ended: true,
            files: None,
        });
    }

    let call_status = ends[0].status;
    let known = match (call_status, exited) {
        (Some(status), _) => Some(status),
        (None, Some(code)) => Some(code),
        (None, None) => exit_code(docker, &id).await,
    };
    let exit_code = match known {
        Some(code) => code,
        None => {
            let reason = stream_error
                .map(|e| e.to_string())
                .unwrap_or_else(|| "the exit code never came".into());
            return Err(SandboxError::Engine(format!(
                "reading the run's output: {reason}"
            )));
        }
    };
    let (stdout, stderr, truncated) = capture.finish();
    Ok(Executed {
        exit_code,
        stdout,
        stderr,
        timed_out: false,
        truncated,
        duration,
        ended: !session || call_status.is_none(),
        files: ends[0].files.take(),
    })
}

/// Feeds `input` to a setup container's script (attached before its start) and returns
/// its stdout once it has exited; a non-zero exit is an error carrying its stderr.
pub async fn run_setup(
    docker: &Docker,
    id: &str,
    attached: bollard::container::AttachContainerResults,
    input: Vec<u8>,
) -> Result<String, SandboxError> {
    let bollard::container::AttachContainerResults {
        mut output,
        input: mut stdin,
    } = attached;
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    while let Some(item) = output.next().await {
        match item {
            Ok(LogOutput::StdOut { message }) => stdout.extend_from_slice(&message),
            Ok(LogOutput::StdErr { message }) => stderr.extend_from_slice(&message),
            Ok(_) => {}
            Err(error) => return Err(engine_error("reading the setup".into(), error)),
        }
    }
    writer.abort();
    match exit_code(docker, id).await {
        Some(0) => Ok(String::from_utf8_lossy(&stdout).into_owned()),
        code => Err(SandboxError::Engine(format!(
            "setting the guard files up failed (exit {code:?}): {}",
            String::from_utf8_lossy(&stderr).trim()
        ))),
    }
}

/// What the engine says of container `id` now: `Ok(Some(code))` once its main process
/// has exited, `Ok(None)` while it runs, `Err` when it cannot be asked (or is gone).
async fn exit_state(docker: &Docker, id: &str) -> Result<Option<i64>, ()> {
    let info = docker.inspect_container(id, None).await.map_err(|error| {
        tracing::debug!(%error, "inspecting the container");
    })?;
    let state = info.state.ok_or(())?;
    Ok(match state.running {
        Some(true) => None,
        _ => Some(state.exit_code.ok_or(())?),
    })
}

/// The container's exit code once its main process has exited; `None` while it runs.
async fn exited_with(docker: &Docker, id: &str) -> Option<i64> {
    exit_state(docker, id).await.ok().flatten()
}

/// The container's exit code. The output stream can close a moment before the engine
/// records the exit, so a still-running answer is asked again, briefly.
async fn exit_code(docker: &Docker, id: &str) -> Option<i64> {
    for attempt in 0..200u32 {
        match exit_state(docker, id).await {
            Ok(Some(code)) => return Some(code),
            Ok(None) => {}
            Err(()) => return None,
        }
        tokio::time::sleep(Duration::from_millis(if attempt < 20 { 2 } else { 10 })).await;
    }
    None
}

/// Whether the kernel's OOM killer struck inside the container: the engine's flag, set
/// for a kill anywhere in the container's memory cgroup, or, for a session whose
/// container still runs, the cgroup's own counter (`oom_kill` in cgroup v2's
/// `memory.events`).
pub async fn oom_killed(docker: &Docker, id: &str) -> bool {
    let Ok(info) = docker.inspect_container(id, None).await else {
        return false;
    };
    let state = info.state.unwrap_or_default();
    if state.oom_killed == Some(true) {
        return true;
    }
    if state.running != Some(true) {
        return false;
    }
    let options = CreateExecOptions {
        attach_stdout: Some(true),
        attach_stderr: Some(false),
        cmd: Some(vec![
            "cat".to_string(),
            "/sys/fs/cgroup/memory.events".to_string(),
            "/sys/fs/cgroup/memory/memory.oom_control".to_string(),
        ]),
        ..Default::default()
    };
    let Ok(exec) = docker.create_exec(id, options).await else {
        return false;
    };
    let Ok(StartExecResults::Attached { mut output, .. }) = docker.start_exec(&exec.id, None).await
    else {
        return false;
    };
    let mut text = Vec::new();
    while let Some(Ok(chunk)) = output.next().await {
        text.extend_from_slice(chunk.as_ref());
        if text.len() > 64 * 1024 {
            break;
        }
    }
    oom_kills(&String::from_utf8_lossy(&text)) > 0
}

/// The `oom_kill N` count in cgroup memory statistics (0 when absent).
fn oom_kills(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("oom_kill "))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .sum()
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
            files: vec![crate::sandbox::files::InputFile {
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
    fn counts_oom_kills_in_both_cgroup_versions() {
        let v2 = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(oom_kills(v2), 1);
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(oom_kills(v1), 2);
        assert_eq!(
            oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
            0
        );
        assert_eq!(oom_kills(""), 0);
    }

    #[test]
    fn guard_lines_are_kept_out_of_the_tap_wherever_chunks_split_them() {
        let marker = crate::sandbox::guard::MARKER;
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
