//! Progress notifications for long runs. When a call carries a progress token, the
//! client hears every second how long the run has taken against its time limit (so a
//! user, or a client-side timeout that resets on progress, knows it is still alive), and
//! hears the program's output as it is written, a few times a second at most.

use crate::sandbox::{OutputTap, Stream};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How often a running call reports progress when it prints nothing.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// The least time between two notifications carrying output.
pub const OUTPUT_THROTTLE: Duration = Duration::from_millis(250);
/// The most output one notification carries; the rest is counted, not sent (the
/// result has it all, within the policy's output cap).
pub const OUTPUT_PER_NOTIFICATION: usize = 4096;
/// Chunks buffered between the run and the reporter; more are dropped from progress.
const TAP_CAPACITY: usize = 256;

/// Sends progress until dropped.
pub struct ProgressReporter {
    task: Option<JoinHandle<()>>,
}

impl ProgressReporter {
    /// Starts reporting for `token`, with the tap the run's output should go to; does
    /// nothing (and gives no tap) when the call carried no token.
    pub fn start(
        peer: Peer<RoleServer>,
        token: Option<ProgressToken>,
        limit: Duration,
    ) -> (ProgressReporter, Option<OutputTap>) {
        let Some(token) = token else {
            return (ProgressReporter { task: None }, None);
        };
        let (tap, chunks) = mpsc::channel(TAP_CAPACITY);
        let task = tokio::spawn(report(peer, token, limit, chunks));
        (ProgressReporter { task: Some(task) }, Some(tap))
    }
}

impl Drop for ProgressReporter {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn report(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    limit: Duration,
    mut chunks: mpsc::Receiver<(Stream, Vec<u8>)>,
) {
    let started = Instant::now();
    let total = limit.as_secs_f64();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
    let mut pending = Output::default();
    let mut last_output = tokio::time::Instant::now() - OUTPUT_THROTTLE;
    let mut flush = Box::pin(tokio::time::sleep(Duration::MAX / 4));
    let mut last_progress = 0.0f64;
    loop {
        let message = tokio::select! {
            _ = ticks.tick() => pending.take().unwrap_or_else(|| {
                format!("running: {:.0}s of {:.0}s", started.elapsed().as_secs_f64(), total)
            }),
            chunk = chunks.recv(), if !chunks.is_closed() || !chunks.is_empty() => {
                if let Some((stream, bytes)) = chunk {
                    pending.push(stream, &bytes);
                }
                if !pending.is_empty() {
                    flush.as_mut().reset((last_output + OUTPUT_THROTTLE).max(tokio::time::Instant::now()));
                }
                continue;
            }
            _ = &mut flush => match pending.take() {
                Some(message) => message,
                None => continue,
            },
        };
        flush
            .as_mut()
            .reset(tokio::time::Instant::now() + Duration::MAX / 4);
        last_output = tokio::time::Instant::now();
        ticks.reset();
        // Progress must increase from one notification to the next.
        let progress = started.elapsed().as_secs_f64().max(last_progress + 0.001);
        last_progress = progress;
        let param = ProgressNotificationParam::new(token.clone(), progress)
            .with_total(total)
            .with_message(message);
        if let Err(error) = peer.notify_progress(param).await {
            tracing::debug!(%error, "could not send a progress notification; stopping");
            return;
        }
    }
}

/// Output not yet sent: its text (stderr lines marked), and what did not fit.
#[derive(Default)]
struct Output {
    text: String,
    left_out: usize,
    /// The last piece pushed left a line open, and which stream wrote it: a stderr line
    /// split over chunks is marked once.
    open_line: Option<Stream>,
}

impl Output {
    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        let chunk = String::from_utf8_lossy(bytes);
        let mut marked = String::with_capacity(chunk.len());
        for piece in chunk.split_inclusive('\n') {
            if stream == Stream::Stderr && self.open_line != Some(Stream::Stderr) {
                marked.push_str("stderr| ");
            }
            marked.push_str(piece);
            self.open_line = (!piece.ends_with('\n')).then_some(stream);
        }
        let room = OUTPUT_PER_NOTIFICATION.saturating_sub(self.text.len());
        if marked.len() <= room {
            self.text.push_str(&marked);
        } else {
            let mut cut = room;
            while !marked.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&marked[..cut]);
            self.left_out += marked.len() - cut;
        }
    }

    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.left_out == 0
    }

    fn take(&mut self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut text = std::mem::take(&mut self.text);
        if self.left_out > 0 {
            text.push_str(&format!(
                "\n[… {} more bytes of output; all of it is in the result]",
                self.left_out
            ));
            self.left_out = 0;
        }
        Some(text)
    }
}
