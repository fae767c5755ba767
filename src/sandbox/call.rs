//! One program sent to a box whose interpreter is waiting for it, and collected: both
//! output streams apart and capped, under a wall-clock limit and cancellation, until
//! the end lines of the protocol ([`super::protocol`]) or the main process's end, then
//! the exit code. Engine-agnostic: the box is a [`BoxIo`], and what the engine says of
//! it comes from the [`Backend`].

use super::backend::{short, Backend, BoxIo, BoxStatus};
use super::capture::Capture;
use super::protocol::{EndLine, Program, Tap};
use super::SandboxError;
use crate::policy::ByteSize;
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

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

/// How often a running box is asked whether its program has exited (for a program
/// that writes no end line).
const EXIT_POLL: Duration = Duration::from_millis(500);
/// Output still arriving after the program exited is collected for this long.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// Exit code reported when the run was killed (SIGKILL), like a shell reports it.
pub const KILLED_EXIT_CODE: i64 = 137;

/// Sends `program` to the waiting interpreter of `io` and collects its output until
/// the end lines carrying `end` (a token the code cannot know in advance), or the
/// process's end. `Executed::ended` says whether the interpreter is gone (always, for a
/// stateless run). On timeout or cancellation the box is removed (that kills every
/// process in it); on cancellation `Err(Cancelled)` returns once it is gone.
pub async fn execute(
    backend: &dyn Backend,
    io: &mut BoxIo,
    program: &Program,
    end: &str,
    timeout: Duration,
    output_limit: ByteSize,
    cancel: &CancellationToken,
) -> Result<Executed, SandboxError> {
    let started = Instant::now();
    let id = io.id.clone();
    let mut tap = program.tap.as_ref().map(Tap::new);
    let mut ends = [EndLine::new(end), EndLine::new(end)];
    let bytes = program.input(end);
    let session = program.call.is_some();
    let input = &mut io.input;
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
    // child can delay past the program's own exit. The box is polled now and then so
    // that the run ends (shortly after the program does, with its exit code) instead of
    // at the wall-clock limit; the box's removal then ends the children too.
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + EXIT_POLL, EXIT_POLL);
    let mut exited: Option<i64> = None;
    let grace = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                backend.remove(&id).await;
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
                if let BoxStatus::Exited(code) = backend.status(&id).await {
                    exited = Some(code);
                    grace.as_mut().reset(tokio::time::Instant::now() + EXIT_GRACE);
                }
            }
            item = io.output.next() => {
                let (stream, message) = match item {
                    Some(Ok(chunk)) => chunk,
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
        backend.remove(&id).await;
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
        (None, None) => exit_code(backend, &id).await,
    };
    let exit_code = match known {
        Some(code) => code,
        None => {
            let reason = stream_error.unwrap_or_else(|| "the exit code never came".into());
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

/// The box's exit code. The output stream can close a moment before the engine
/// records the exit, so a still-running answer is asked again, briefly.
async fn exit_code(backend: &dyn Backend, id: &str) -> Option<i64> {
    for attempt in 0..200u32 {
        match backend.status(id).await {
            BoxStatus::Exited(code) => return Some(code),
            BoxStatus::Running => {}
            BoxStatus::Gone => return None,
        }
        let pause = if attempt < 20 { 2 } else { 10 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    None
}
