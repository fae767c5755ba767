//! Running the code in a started container: one `exec` that writes the code to a file
//! and runs it, its two output streams captured apart, a wall-clock limit, cancellation,
//! the exit code, and the OOM evidence.
//!
//! Why the code goes in through the exec's stdin and not as a tar upload: on Docker 20.10
//! (API 1.41) `PUT /containers/{id}/archive` into a read-only container is refused
//! ("container rootfs is marked read-only") when `/sandbox` is a `HostConfig.Tmpfs`
//! mount, and when it is a `Mounts` tmpfs the upload reports success but the files
//! land in the container's own layer under the mount, invisible to the code (checked
//! on this daemon with `docker cp`). Piping the bytes through the exec's stdin into
//! `head -c N` writes them into the real tmpfs, uses no host temp files, and costs no
//! extra round trip: the same exec then runs the interpreter.

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

/// What to run: the file the code is written to and the command line that runs it.
#[derive(Debug, Clone)]
pub struct Program {
    /// File name inside `/sandbox`, e.g. `main.py`.
    pub file: &'static str,
    /// The whole command line (the interpreter, under the guard, with the file).
    pub argv: Vec<String>,
    pub code: Vec<u8>,
    pub env: Vec<(String, String)>,
    /// Where output also goes as it arrives.
    pub tap: Option<super::OutputTap>,
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
}

/// How often a running exec is asked whether its program has exited.
const EXIT_POLL: Duration = Duration::from_millis(500);
/// Output still arriving after the program exited is collected for this long.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// Exit code reported when the run was killed (SIGKILL), like a shell reports it.
pub const KILLED_EXIT_CODE: i64 = 137;

/// The shell line that stores exactly `len` bytes of stdin as `file`, then replaces
/// itself with the interpreter (stdin from /dev/null, as for any non-interactive run).
fn shell_line(program: &Program) -> String {
    let mut line = format!("head -c {} > {} && exec", program.code.len(), program.file);
    for word in &program.argv {
        line.push(' ');
        line.push_str(&shell_quote(word));
    }
    line.push_str(" </dev/null");
    line
}

/// One word for `sh`, quoted unless it is plainly safe.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=,*".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
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

/// Creates the exec that will store and run `program` in container `id`. Kept apart
/// from [`execute`] so a pooled container that died while waiting shows up here, before
/// anything ran, and can be replaced.
pub async fn create(
    docker: &Docker,
    id: &str,
    program: &Program,
) -> Result<String, bollard::errors::Error> {
    let mut env: Vec<String> = vec!["HOME=/tmp".into(), "PYTHONDONTWRITEBYTECODE=1".into()];
    env.extend(program.env.iter().map(|(k, v)| format!("{k}={v}")));
    let options = CreateExecOptions {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(env),
        cmd: Some(vec![
            "sh".to_string(),
            "-c".to_string(),
            shell_line(program),
        ]),
        working_dir: Some(super::container::WORKDIR.to_string()),
        ..Default::default()
    };
    Ok(docker.create_exec(id, options).await?.id)
}

/// Starts exec `exec_id` (from [`create`]) in container `id`, feeds it the code and
/// collects its output. On timeout or cancellation the container is removed (that kills
/// every process in it); on cancellation `Err(Cancelled)` returns once it is gone.
pub async fn execute(
    docker: &Docker,
    id: &str,
    exec_id: &str,
    program: &Program,
    timeout: Duration,
    output_limit: ByteSize,
    cancel: &CancellationToken,
) -> Result<Executed, SandboxError> {
    let started = Instant::now();
    let mut tap = program.tap.as_ref().map(|sender| Tap {
        sender,
        stderr: GuardLines::default(),
    });
    let mut tap_chunk = |stream: Stream, message: &[u8]| {
        if let Some(tap) = &mut tap {
            tap.send(stream, message);
        }
    };
    let start = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(64 * 1024),
    };
    let (mut output, mut input) = match docker
        .start_exec(exec_id, Some(start))
        .await
        .map_err(|e| engine_error("starting the exec".into(), e))?
    {
        StartExecResults::Attached { output, input } => (output, input),
        StartExecResults::Detached => {
            return Err(SandboxError::Engine(
                "the engine started the exec detached".into(),
            ))
        }
    };

    // Feed the code concurrently with reading the output, so neither side can stall
    // the other on a full pipe.
    let code = program.code.clone();
    let writer = tokio::spawn(async move {
        let written = input.write_all(&code).await;
        let _ = input.shutdown().await;
        written
    });

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
                writer.abort();
                remove(docker, id).await;
                return Err(SandboxError::Cancelled);
            }
            _ = &mut deadline => {
                timed_out = true;
                break;
            }
            _ = &mut grace, if exited.is_some() => {
                tracing::debug!(container = short(id), "the program exited; its children still hold the output");
                break;
            }
            _ = poll.tick(), if exited.is_none() => {
                if let Ok(info) = docker.inspect_exec(exec_id).await {
                    if info.running == Some(false) {
                        exited = info.exit_code;
                        grace.as_mut().reset(tokio::time::Instant::now() + EXIT_GRACE);
                    }
                }
            }
            item = output.next() => match item {
                Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message })) => {
                    tap_chunk(Stream::Stdout, &message);
                    capture.push(Stream::Stdout, &message)
                }
                Some(Ok(LogOutput::StdErr { message })) => {
                    tap_chunk(Stream::Stderr, &message);
                    capture.push(Stream::Stderr, &message)
                }
                Some(Ok(LogOutput::StdIn { .. })) => {}
                Some(Err(error)) => {
                    stream_error = Some(error);
                    break;
                }
                None => break,
            },
        }
    }
    let duration = started.elapsed();
    writer.abort();

    if timed_out {
        tracing::debug!(
            container = short(id),
            ?timeout,
            "wall-clock limit reached: killing"
        );
        remove(docker, id).await;
        let (stdout, stderr, truncated) = capture.finish();
        return Ok(Executed {
            exit_code: KILLED_EXIT_CODE,
            stdout,
            stderr,
            timed_out: true,
            truncated,
            duration,
        });
    }

    let known = match exited {
        Some(code) => Some(code),
        None => exit_code(docker, exec_id).await,
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
    })
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
    fn the_shell_line_stores_exactly_the_code_then_runs_it() {
        let program = Program {
            file: "main.py",
            argv: vec![
                "/usr/bin/python3".into(),
                "-u".into(),
                "{\"a\": \"it's\"}".into(),
                "/sandbox/main.py".into(),
            ],
            code: b"print(1)\n".to_vec(),
            tap: None,
            env: Vec::new(),
        };
        assert_eq!(
            shell_line(&program),
            "head -c 9 > main.py && exec /usr/bin/python3 -u '{\"a\": \"it'\\''s\"}' /sandbox/main.py </dev/null"
        );
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
