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
//! The program is one header line of JSON (`file`, `len`, `env`; in a session also
//! `call` and `end`) and then exactly `len` bytes of code. A stateless run closes stdin
//! after it and ends when the process does; a session call ends at the line
//! `\x1e<end> <status>` the bootstrap writes on both streams when the call is done.

use super::container::{engine_error, remove, short};
use super::output::{Capture, Stream};
use super::SandboxError;
use crate::policy::ByteSize;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::Docker;
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// The interpreter started in a container and waiting for its program on stdin.
pub struct Interpreter {
    pub container: String,
    exec_id: String,
    output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
    input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
}

impl Interpreter {
    pub fn exec_id(&self) -> &str {
        &self.exec_id
    }
}

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreter")
            .field("container", &short(&self.container))
            .finish()
    }
}

/// Starts `argv` (the interpreter under the guard, which reads the program from stdin)
/// in container `id` as the sandbox user, attached, and returns it waiting.
pub async fn start(
    docker: &Docker,
    id: &str,
    argv: Vec<String>,
    env: &[(String, String)],
) -> Result<Interpreter, SandboxError> {
    let mut vars: Vec<String> = vec!["HOME=/tmp".into(), "PYTHONDONTWRITEBYTECODE=1".into()];
    vars.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    let options = CreateExecOptions {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(vars),
        cmd: Some(argv),
        working_dir: Some(super::container::WORKDIR.to_string()),
        ..Default::default()
    };
    let exec_id = docker
        .create_exec(id, options)
        .await
        .map_err(|e| engine_error("creating the interpreter's exec".into(), e))?
        .id;
    let start = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(64 * 1024),
    };
    match docker
        .start_exec(&exec_id, Some(start))
        .await
        .map_err(|e| engine_error("starting the interpreter".into(), e))?
    {
        StartExecResults::Attached { output, input } => Ok(Interpreter {
            container: id.to_string(),
            exec_id,
            output,
            input,
        }),
        StartExecResults::Detached => Err(SandboxError::Engine(
            "the engine started the interpreter detached".into(),
        )),
    }
}

/// True while `interpreter` still waits: a pooled one whose container died (the engine
/// restarted, say) is not handed a program.
pub async fn waiting(docker: &Docker, exec_id: &str) -> bool {
    docker
        .inspect_exec(exec_id)
        .await
        .is_ok_and(|info| info.running == Some(true))
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
}

impl Program {
    /// The bytes written to the interpreter's stdin; `end` is the session call's token.
    fn input(&self, end: Option<&str>) -> Vec<u8> {
        let env: serde_json::Map<String, serde_json::Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let mut header = serde_json::json!({
            "file": self.file,
            "len": self.code.len(),
            "env": env,
        });
        if let (Some((call, awaits)), Some(end)) = (self.call, end) {
            header["call"] = call.into();
            header["awaits"] = awaits.into();
            header["end"] = end.into();
        }
        let mut bytes = header.to_string().into_bytes();
        bytes.push(b'\n');
        bytes.extend_from_slice(&self.code);
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

/// How an exec ended.
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
}

/// How often a running exec is asked whether its program has exited.
const EXIT_POLL: Duration = Duration::from_millis(500);
/// Output still arriving after the program exited is collected for this long.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// Exit code reported when the run was killed (SIGKILL), like a shell reports it.
pub const KILLED_EXIT_CODE: i64 = 137;

/// Finds a session call's end line (`\x1e<token> <status>\n`) in one stream, wherever
/// chunks split it, and passes everything before it on.
struct EndLine {
    pattern: Vec<u8>,
    /// Bytes that may be the start of the end line, held until that is decided.
    pending: Vec<u8>,
    status: Option<i64>,
}

impl EndLine {
    fn new(token: &str) -> EndLine {
        EndLine {
            pattern: format!("\u{1e}{token} ").into_bytes(),
            pending: Vec::new(),
            status: None,
        }
    }

    fn done(&self) -> bool {
        self.status.is_some()
    }

    fn filter(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.done() {
            // Written after the call ended (a background thread): not this call's.
            return Vec::new();
        }
        let mut data = std::mem::take(&mut self.pending);
        data.extend_from_slice(bytes);
        if let Some(at) = data
            .windows(self.pattern.len())
            .position(|window| window == self.pattern)
        {
            let rest = &data[at + self.pattern.len()..];
            if let Some(newline) = rest.iter().position(|&b| b == b'\n') {
                let status = String::from_utf8_lossy(&rest[..newline]);
                self.status = Some(status.trim().parse().unwrap_or(1));
            } else {
                self.pending = data[at..].to_vec();
            }
            data.truncate(at);
            return data;
        }
        let keep = (1..=self.pattern.len().min(data.len()))
            .rev()
            .find(|&n| data.ends_with(&self.pattern[..n]))
            .unwrap_or(0);
        self.pending = data.split_off(data.len() - keep);
        data
    }
}

/// Sends `program` to the waiting `interpreter` and collects its output. Stateless
/// (`end` is `None`): stdin is closed after the program and the run ends with the
/// process. A session call (`end` is its token): the run ends at the end lines, and
/// `Executed::ended` says whether the interpreter exited instead. On timeout or
/// cancellation the container is removed (that kills every process in it); on
/// cancellation `Err(Cancelled)` returns once it is gone.
pub async fn execute(
    docker: &Docker,
    interpreter: &mut Interpreter,
    program: &Program,
    end: Option<&str>,
    timeout: Duration,
    output_limit: ByteSize,
    cancel: &CancellationToken,
) -> Result<Executed, SandboxError> {
    let started = Instant::now();
    let id = interpreter.container.clone();
    let exec_id = interpreter.exec_id.clone();
    let mut tap = program.tap.as_ref().map(|sender| Tap {
        sender,
        stderr: GuardLines::default(),
    });
    let mut ends = end.map(|token| [EndLine::new(token), EndLine::new(token)]);
    let bytes = program.input(end);
    let session = end.is_some();
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
                if let Ok(info) = docker.inspect_exec(&exec_id).await {
                    if info.running == Some(false) {
                        exited = info.exit_code;
                        grace.as_mut().reset(tokio::time::Instant::now() + EXIT_GRACE);
                    }
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
                let message = match &mut ends {
                    Some(ends) => ends[stream as usize].filter(&message),
                    None => message.to_vec(),
                };
                if let Some(tap) = &mut tap {
                    tap.send(stream, &message);
                }
                capture.push(stream, &message);
                if ends.as_ref().is_some_and(|ends| ends.iter().all(EndLine::done)) {
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
        });
    }

    let call_status = ends.as_ref().and_then(|ends| ends[0].status);
    let known = match (call_status, exited) {
        (Some(status), _) => Some(status),
        (None, Some(code)) => Some(code),
        (None, None) => exit_code(docker, &exec_id).await,
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
        ended: call_status.is_none(),
    })
}

/// Runs `script` with `sh -c` as root in container `id`, feeding it `input`, and
/// returns its stdout; a non-zero exit is an error carrying its stderr. For setting a
/// container up (the guard files), never for the snippet.
pub async fn run_as_root(
    docker: &Docker,
    id: &str,
    script: &str,
    input: Vec<u8>,
) -> Result<String, SandboxError> {
    let options = CreateExecOptions {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        user: Some("0".to_string()),
        cmd: Some(vec!["sh".to_string(), "-c".to_string(), script.to_string()]),
        ..Default::default()
    };
    let exec = docker
        .create_exec(id, options)
        .await
        .map_err(|e| engine_error("creating the setup exec".into(), e))?;
    let (mut output, mut stdin) = match docker
        .start_exec(&exec.id, None)
        .await
        .map_err(|e| engine_error("starting the setup exec".into(), e))?
    {
        StartExecResults::Attached { output, input } => (output, input),
        StartExecResults::Detached => {
            return Err(SandboxError::Engine(
                "the setup exec started detached".into(),
            ))
        }
    };
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
            Err(error) => return Err(engine_error("reading the setup exec".into(), error)),
        }
    }
    writer.abort();
    match exit_code(docker, &exec.id).await {
        Some(0) => Ok(String::from_utf8_lossy(&stdout).into_owned()),
        code => Err(SandboxError::Engine(format!(
            "setting the container up failed (exit {code:?}): {}",
            String::from_utf8_lossy(&stderr).trim()
        ))),
    }
}

/// The exec's exit code. The output stream can close a moment before the engine records
/// the exit, so a still-running answer is asked again, briefly.
async fn exit_code(docker: &Docker, exec_id: &str) -> Option<i64> {
    for attempt in 0..200u32 {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running != Some(true) => return info.exit_code,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "inspecting the exec");
                return None;
            }
        }
        tokio::time::sleep(Duration::from_millis(if attempt < 20 { 2 } else { 10 })).await;
    }
    None
}

/// Whether the kernel's OOM killer struck inside the container: the engine's flag
/// (set when PID 1 itself was killed) or, since an exec'd process dying does not set
/// it, the container's memory cgroup counter (`oom_kill` in cgroup v2's
/// `memory.events`, cgroup v1's `memory.oom_control`). The container is single-use, so
/// any kill counted there belongs to this run.
pub async fn oom_killed(docker: &Docker, id: &str) -> bool {
    if let Ok(info) = docker.inspect_container(id, None).await {
        if info.state.and_then(|s| s.oom_killed) == Some(true) {
            return true;
        }
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
        };
        let input = program.input(None);
        let newline = input.iter().position(|&b| b == b'\n').unwrap();
        let header: serde_json::Value = serde_json::from_slice(&input[..newline]).unwrap();
        assert_eq!(header["file"], "main.py");
        assert_eq!(header["len"], 12);
        assert_eq!(header["env"]["A"], "it's \"x\"");
        assert_eq!(&input[newline + 1..], program.code.as_slice());
        assert!(header.get("end").is_none());
        let call = Program {
            call: Some((3, true)),
            ..program
        };
        let input = call.input(Some("tok"));
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
