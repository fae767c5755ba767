//! One program sent to a box whose interpreter is waiting for it, and collected: the
//! supervisor's frames read off the box's stdout ([`FromBox`]): both output streams
//! apart and capped, the hooks' records, the kernel's refusals, the files the run left,
//! and the end, under a wall-clock limit and cancellation. Engine-agnostic: the box is
//! a [`BoxIo`], and what the engine says of it comes from the [`Backend`].
//!
//! Only the supervisor writes these frames: the program's own output reaches them
//! framed, so nothing it prints can end the run, forge its status or its files. The
//! box's stderr is the supervisor's own diagnostics, logged.

use super::backend::{short, Backend, BoxIo, BoxStatus};
use super::capture::{Capture, Stream};
use super::protocol::Program;
use super::SandboxError;
use crate::policy::ByteSize;
use futures_util::StreamExt;
use sandbox_supervisor::wire::{Decoder, FileEntry, FromBox};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// How a run (or session call) ended.
#[derive(Debug, Default)]
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
    /// The kernel's OOM killer struck in the box during the run (the supervisor's
    /// word); `None` when no end came from it (the box died: the backend decides).
    pub oom: Option<bool>,
    /// The files and figures the run left, and how many more were not listed.
    pub files: Option<(Vec<FileEntry>, u64)>,
    /// The run-time hooks' records (JSON), in order: the first [`MAX_REPORTS`].
    pub explained: Vec<Vec<u8>>,
    /// The system calls the kernel refused: which, and what they named; the first
    /// [`MAX_REPORTS`].
    pub refused: Vec<(String, String)>,
    /// Records and refusals past [`MAX_REPORTS`], counted: a program that tries ten
    /// thousand forks fills no memory with them.
    pub unreported: u64,
}

/// How many of a run's hook records, and how many of its refusals, are kept.
pub const MAX_REPORTS: usize = 64;

/// How often the box is asked whether it still runs (a supervisor that died without
/// its end frame: killed from outside).
const STATUS_POLL: Duration = Duration::from_secs(2);
/// How much of the supervisor's own stderr is kept for the log.
const DIAGNOSTICS: usize = 16 * 1024;

/// Exit code reported when the run was killed (SIGKILL), like a shell reports it.
pub const KILLED_EXIT_CODE: i64 = 137;

/// Sends `program` to the waiting interpreter of `io` and collects its frames until
/// the end. On timeout or cancellation the box is removed (that kills every process in
/// it); on cancellation `Err(Cancelled)` returns once it is gone.
pub async fn execute(
    backend: &dyn Backend,
    io: &mut BoxIo,
    program: &Program,
    timeout: Duration,
    output_limit: ByteSize,
    cancel: &CancellationToken,
) -> Result<Executed, SandboxError> {
    let started = Instant::now();
    let id = io.id.clone();
    let frame = program.frame();
    let input = &mut io.input;
    let write = async move {
        input.write_all(&frame).await?;
        input.flush().await
    };
    tokio::pin!(write);
    let mut written = false;

    let mut capture = Capture::new(output_limit);
    let mut decoder = Decoder::default();
    let mut executed = Executed::default();
    let mut diagnostics = Vec::new();
    let mut end = None;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + STATUS_POLL, STATUS_POLL);
    let mut stream_error = None;
    let mut box_stopped = false;
    'run: loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                backend.remove(&id).await;
                return Err(SandboxError::Cancelled);
            }
            _ = &mut deadline => {
                executed.timed_out = true;
                break;
            }
            result = &mut write, if !written => {
                written = true;
                if let Err(error) = result {
                    // The supervisor is gone: its end, if any, comes through the output.
                    tracing::debug!(container = short(&id), %error, "writing the program");
                }
            }
            _ = poll.tick() => {
                if matches!(backend.status(&id).await, BoxStatus::Exited(_) | BoxStatus::Gone) {
                    if box_stopped {
                        break;
                    }
                    // Give what is still on its way a moment, then stop.
                    box_stopped = true;
                    poll.reset_after(Duration::from_millis(200));
                }
            }
            item = io.output.next() => {
                let (stream, chunk) = match item {
                    Some(Ok(chunk)) => chunk,
                    Some(Err(error)) => {
                        stream_error = Some(error);
                        break;
                    }
                    None => break,
                };
                if stream == Stream::Stderr {
                    let room = DIAGNOSTICS.saturating_sub(diagnostics.len());
                    diagnostics.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    continue;
                }
                let frames = match decoder.push(&chunk) {
                    Ok(frames) => frames,
                    Err(error) => {
                        stream_error = Some(format!("the supervisor's frames: {error}"));
                        break;
                    }
                };
                for frame in frames {
                    match frame {
                        FromBox::Stdout(bytes) => pass(&mut capture, program, Stream::Stdout, &bytes),
                        FromBox::Stderr(bytes) => pass(&mut capture, program, Stream::Stderr, &bytes),
                        FromBox::Explained(record) if executed.explained.len() < MAX_REPORTS => {
                            executed.explained.push(record)
                        }
                        FromBox::Refused { syscall, detail } if executed.refused.len() < MAX_REPORTS => {
                            executed.refused.push((syscall, detail))
                        }
                        FromBox::Explained(_) | FromBox::Refused { .. } => executed.unreported += 1,
                        FromBox::Files { entries, unlisted } => executed.files = Some((entries, unlisted)),
                        FromBox::Unavailable(reason) => {
                            backend.remove(&id).await;
                            return Err(SandboxError::LayerUnavailable(reason));
                        }
                        FromBox::End { status, oom, gone } => {
                            end = Some((status.exit_code(), oom, gone));
                            break 'run;
                        }
                    }
                }
            }
        }
    }
    executed.duration = started.elapsed();
    if !diagnostics.is_empty() {
        tracing::debug!(
            container = short(&id),
            "the supervisor said: {}",
            String::from_utf8_lossy(&diagnostics).trim()
        );
    }
    if executed.timed_out {
        tracing::debug!(
            container = short(&id),
            ?timeout,
            "wall-clock limit reached: killing"
        );
        backend.remove(&id).await;
        (executed.stdout, executed.stderr, executed.truncated) = capture.finish();
        executed.exit_code = KILLED_EXIT_CODE;
        executed.ended = true;
        return Ok(executed);
    }
    match end {
        Some((exit_code, oom, gone)) => {
            executed.exit_code = exit_code;
            executed.oom = Some(oom);
            executed.ended = gone;
        }
        None => {
            // The box ended without the supervisor's word: killed or removed from
            // outside (or the supervisor ran out of memory). The engine says how.
            executed.ended = true;
            executed.exit_code = match exit_code(backend, &id).await {
                Some(code) => code,
                None => {
                    let reason = stream_error.unwrap_or_else(|| "the exit code never came".into());
                    return Err(SandboxError::Engine(format!(
                        "reading the run's output: {reason}"
                    )));
                }
            };
        }
    }
    (executed.stdout, executed.stderr, executed.truncated) = capture.finish();
    Ok(executed)
}

/// One chunk of the program's output: kept (within the cap), and sent to the tap.
fn pass(capture: &mut Capture, program: &Program, stream: Stream, bytes: &[u8]) {
    if let Some(tap) = &program.tap {
        // Best effort: a chunk the receiver has no room for is skipped there; the
        // outcome has everything.
        let _ = tap.try_send((stream, bytes.to_vec()));
    }
    capture.push(stream, bytes);
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
