//! Progress notifications for long runs: when a call carries a progress token, the
//! client hears every second how long the run has taken against its time limit, so a
//! user (or a client-side timeout that resets on progress) knows it is still alive.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How often a running call reports progress.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Sends progress until dropped.
pub struct ProgressReporter {
    task: Option<JoinHandle<()>>,
}

impl ProgressReporter {
    /// Starts reporting for `token`, or does nothing when the call carried no token.
    pub fn start(
        peer: Peer<RoleServer>,
        token: Option<ProgressToken>,
        limit: Duration,
    ) -> ProgressReporter {
        let task = token.map(|token| tokio::spawn(report(peer, token, limit)));
        ProgressReporter { task }
    }
}

impl Drop for ProgressReporter {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn report(peer: Peer<RoleServer>, token: ProgressToken, limit: Duration) {
    let started = Instant::now();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
    let total = limit.as_secs_f64();
    loop {
        ticks.tick().await;
        let elapsed = started.elapsed().as_secs_f64();
        let message = format!("running: {:.0}s of {:.0}s", elapsed, total);
        let param = ProgressNotificationParam::new(token.clone(), elapsed)
            .with_total(total)
            .with_message(message);
        if let Err(error) = peer.notify_progress(param).await {
            tracing::debug!(%error, "could not send a progress notification; stopping");
            return;
        }
    }
}
