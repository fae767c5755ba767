//! The warm pool: started containers waiting, per image, so a run pays only for the
//! exec. A container is handed out once and never returns (each run gets a fresh one,
//! so nothing a run leaves behind reaches the next); the pool refills in the background.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::Notify;

/// Ready containers and containers being made, per image.
#[derive(Debug, Default)]
pub struct Pool {
    images: Mutex<HashMap<String, ImageSlots>>,
    /// Woken whenever a creation finishes (with a container or not).
    finished: Notify,
}

#[derive(Debug, Default)]
struct ImageSlots {
    ready: VecDeque<String>,
    /// Creations under way for this image; counted so a refill never overshoots.
    filling: usize,
    /// Runs waiting for one of those creations instead of starting their own.
    waiting: usize,
}

/// What a run should do to get a container.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// A ready container, now the run's.
    Ready(String),
    /// None ready, none coming for this run: create one.
    Create,
}

impl Pool {
    /// Takes a ready container of `image`, oldest first.
    #[cfg(test)]
    pub fn take(&self, image: &str) -> Option<String> {
        self.lock().get_mut(image)?.ready.pop_front()
    }

    /// A ready container of `image`; when none is ready but a refill is under way that
    /// no other run is already waiting for, waits for it: it started earlier than a new
    /// creation would, so it is ready sooner, and calls that come faster than the pool
    /// refills do not pile extra containers onto the engine.
    pub async fn claim(&self, image: &str) -> Claim {
        loop {
            let notified = self.finished.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut images = self.lock();
                let slots = images.entry(image.to_string()).or_default();
                if let Some(id) = slots.ready.pop_front() {
                    return Claim::Ready(id);
                }
                if slots.filling <= slots.waiting {
                    return Claim::Create;
                }
                slots.waiting += 1;
            }
            // Unregisters the wait even if this future is dropped (a cancelled run).
            let _waiting = WaitGuard { pool: self, image };
            notified.await;
        }
    }

    /// Reserves the creations needed to bring `image` up to `size` (ready plus under
    /// way); the caller makes that many and reports each with [`Pool::finished`].
    pub fn reserve(&self, image: &str, size: usize) -> usize {
        let mut images = self.lock();
        let slots = images.entry(image.to_string()).or_default();
        let missing = size.saturating_sub(slots.ready.len() + slots.filling);
        slots.filling += missing;
        missing
    }

    /// One reserved creation is over; `Some(id)` joins the ready queue.
    pub fn finished(&self, image: &str, created: Option<String>) {
        let mut images = self.lock();
        let slots = images.entry(image.to_string()).or_default();
        slots.filling = slots.filling.saturating_sub(1);
        if let Some(id) = created {
            slots.ready.push_back(id);
        }
        drop(images);
        self.finished.notify_waiters();
    }

    /// Empties the pool, returning every ready container (for removal).
    pub fn drain(&self) -> Vec<String> {
        self.lock()
            .values_mut()
            .flat_map(|slots| slots.ready.drain(..))
            .collect()
    }

    /// Ready containers of `image`, for tests and logs.
    pub fn ready(&self, image: &str) -> usize {
        self.lock().get(image).map_or(0, |slots| slots.ready.len())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ImageSlots>> {
        // A panic while holding the lock leaves the map consistent (every mutation is a
        // single step), so a poisoned lock is still usable.
        self.images.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes one waiting run from the count when it stops waiting.
struct WaitGuard<'a> {
    pool: &'a Pool,
    image: &'a str,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if let Some(slots) = self.pool.lock().get_mut(self.image) {
            slots.waiting = slots.waiting.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Claim, Pool};
    use std::sync::Arc;

    #[test]
    fn refills_never_overshoot_and_containers_are_handed_out_once() {
        let pool = Pool::default();
        assert_eq!(pool.reserve("img", 2), 2);
        // A second refill while the first is under way asks for nothing more.
        assert_eq!(pool.reserve("img", 2), 0);
        pool.finished("img", Some("a".into()));
        pool.finished("img", Some("b".into()));
        assert_eq!(pool.ready("img"), 2);
        assert_eq!(pool.take("img").as_deref(), Some("a"));
        assert_eq!(pool.reserve("img", 2), 1);
        pool.finished("img", None); // a failed creation frees its slot
        assert_eq!(pool.reserve("img", 2), 1);
        assert_eq!(pool.take("other"), None);
        assert_eq!(pool.drain(), vec!["b".to_string()]);
        assert_eq!(pool.take("img"), None);
    }

    #[tokio::test]
    async fn a_run_waits_for_a_refill_under_way_rather_than_creating_its_own() {
        let pool = Arc::new(Pool::default());
        assert_eq!(pool.claim("img").await, Claim::Create, "nothing under way");
        assert_eq!(pool.reserve("img", 1), 1);
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.claim("img").await }
        });
        // One creation under way and one run waiting for it: the next run creates.
        while pool.lock()["img"].waiting == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(pool.claim("img").await, Claim::Create);
        pool.finished("img", Some("a".into()));
        assert_eq!(waiter.await.unwrap(), Claim::Ready("a".into()));
        assert_eq!(pool.lock()["img"].waiting, 0);

        // A failed creation sends its waiter off to create one.
        assert_eq!(pool.reserve("img", 1), 1);
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.claim("img").await }
        });
        while pool.lock()["img"].waiting == 0 {
            tokio::task::yield_now().await;
        }
        pool.finished("img", None);
        assert_eq!(waiter.await.unwrap(), Claim::Create);
    }
}
