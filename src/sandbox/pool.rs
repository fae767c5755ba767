//! The warm pool: started containers, each with its interpreter waiting for a program,
//! per image and language, so a run pays only for sending the code. A container is handed out once and never returns (each run gets a fresh one,
//! so nothing a run leaves behind reaches the next); the pool refills in the background.
//!
//! The pool follows demand: a run that finds no container ready raises the image's
//! target by one, up to the policy's `max_concurrent` (more could never run at once),
//! so that the next burst of back-to-back or parallel calls finds them waiting instead
//! of queueing behind container creation. After a quiet spell without such misses the
//! target falls back to `pool.size`. A pool of size 0 stays empty: no warm containers
//! were asked for (the one-shot `run` command, a policy that wants none).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a raised target holds without a new miss.
pub const DEMAND_WINDOW: Duration = Duration::from_secs(120);

/// Ready containers and containers being made, per image.
#[derive(Debug)]
pub struct Pool<T> {
    images: Mutex<HashMap<String, ImageSlots<T>>>,
    /// Woken whenever a creation finishes (with a container or not).
    finished: Notify,
    /// Containers kept ready per image when nothing asks for more (`pool.size`).
    size: usize,
    /// The most a target can grow to (`pool.max_concurrent`, at least `size`).
    most: usize,
    window: Duration,
}

#[derive(Debug)]
struct ImageSlots<T> {
    ready: VecDeque<T>,
    /// Creations under way for this image; counted so a refill never overshoots.
    filling: usize,
    /// Runs waiting for one of those creations instead of starting their own.
    waiting: usize,
    /// Containers to keep ready plus under way; 0 until the first miss (then `size`).
    target: usize,
    /// When a run last found none ready.
    missed: Option<Instant>,
}

impl<T> Default for ImageSlots<T> {
    fn default() -> Self {
        ImageSlots {
            ready: VecDeque::new(),
            filling: 0,
            waiting: 0,
            target: 0,
            missed: None,
        }
    }
}

/// What a run should do to get a container.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim<T> {
    /// A ready container, now the run's.
    Ready(T),
    /// None ready, none coming for this run: create one.
    Create,
}

impl<T> Pool<T> {
    /// A pool keeping `size` containers ready per image, growing with demand up to
    /// `most`, and shrinking back after [`DEMAND_WINDOW`] without a miss.
    pub fn new(size: usize, most: usize) -> Pool<T> {
        Pool::with_window(size, most, DEMAND_WINDOW)
    }

    fn with_window(size: usize, most: usize, window: Duration) -> Pool<T> {
        Pool {
            images: Mutex::new(HashMap::new()),
            finished: Notify::new(),
            size,
            most: most.max(size),
            window,
        }
    }

    /// Takes a ready container of `image`, oldest first.
    #[cfg(test)]
    pub fn take(&self, image: &str) -> Option<T> {
        self.lock().get_mut(image)?.ready.pop_front()
    }

    /// A ready container of `image`; when none is ready but a refill is under way that
    /// no other run is already waiting for, waits for it: it started earlier than a new
    /// creation would, so it is ready sooner, and calls that come faster than the pool
    /// refills do not pile extra containers onto the engine.
    pub async fn claim(&self, image: &str) -> Claim<T> {
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
                if slots.waiting == 0 && self.size > 0 {
                    // Counted once per run: a run that waits comes round this loop again.
                    slots.target = (slots.target.max(self.size) + 1).min(self.most);
                    slots.missed = Some(Instant::now());
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

    /// Reserves the creations needed to bring `image` up to its target (ready plus
    /// under way); the caller makes that many and reports each with [`Pool::finished`].
    pub fn reserve(&self, image: &str) -> usize {
        let mut images = self.lock();
        let slots = images.entry(image.to_string()).or_default();
        if slots.missed.is_none_or(|at| at.elapsed() >= self.window) {
            slots.target = self.size;
        }
        let target = slots.target.max(self.size);
        let missing = target.saturating_sub(slots.ready.len() + slots.filling);
        slots.filling += missing;
        missing
    }

    /// One reserved creation is over; `Some(id)` joins the ready queue.
    pub fn finished(&self, image: &str, created: Option<T>) {
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
    pub fn drain(&self) -> Vec<T> {
        self.lock()
            .values_mut()
            .flat_map(|slots| slots.ready.drain(..))
            .collect()
    }

    /// What `image`'s pool is being kept at now (ready plus under way).
    pub fn target(&self, image: &str) -> usize {
        self.lock()
            .get(image)
            .map_or(self.size, |slots| slots.target.max(self.size))
    }

    /// Ready containers of `image`, for tests and logs.
    pub fn ready(&self, image: &str) -> usize {
        self.lock().get(image).map_or(0, |slots| slots.ready.len())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ImageSlots<T>>> {
        // A panic while holding the lock leaves the map consistent (every mutation is a
        // single step), so a poisoned lock is still usable.
        self.images.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes one waiting run from the count when it stops waiting.
struct WaitGuard<'a, T> {
    pool: &'a Pool<T>,
    image: &'a str,
}

impl<T> Drop for WaitGuard<'_, T> {
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
    use std::time::Duration;

    #[test]
    fn refills_never_overshoot_and_containers_are_handed_out_once() {
        let pool = Pool::<String>::new(2, 4);
        assert_eq!(pool.reserve("img"), 2);
        // A second refill while the first is under way asks for nothing more.
        assert_eq!(pool.reserve("img"), 0);
        pool.finished("img", Some("a".into()));
        pool.finished("img", Some("b".into()));
        assert_eq!(pool.ready("img"), 2);
        assert_eq!(pool.take("img").as_deref(), Some("a"));
        assert_eq!(pool.reserve("img"), 1);
        pool.finished("img", None); // a failed creation frees its slot
        assert_eq!(pool.reserve("img"), 1);
        assert_eq!(pool.take("other"), None);
        assert_eq!(pool.drain(), vec!["b".to_string()]);
        assert_eq!(pool.take("img"), None);
    }

    #[tokio::test]
    async fn the_target_follows_demand_up_to_the_limit_and_falls_back_when_quiet() {
        let pool = Pool::<String>::new(1, 3);
        assert_eq!(pool.reserve("img"), 1);
        pool.finished("img", Some("a".into()));
        // A burst of three: one finds a container, two find none (two misses).
        assert_eq!(pool.claim("img").await, Claim::Ready("a".into()));
        assert_eq!(pool.claim("img").await, Claim::Create);
        assert_eq!(pool.target("img"), 2);
        assert_eq!(pool.claim("img").await, Claim::Create);
        assert_eq!(pool.target("img"), 3);
        assert_eq!(pool.claim("img").await, Claim::Create);
        assert_eq!(pool.target("img"), 3, "never past max_concurrent");
        assert_eq!(pool.reserve("img"), 3, "refilled for the next burst");

        let none = Pool::<String>::new(0, 3);
        assert_eq!(none.claim("img").await, Claim::Create);
        assert_eq!(none.reserve("img"), 0, "a pool of size 0 never grows");

        let quiet = Pool::<String>::with_window(1, 3, Duration::ZERO);
        assert_eq!(quiet.claim("img").await, Claim::Create);
        assert_eq!(quiet.target("img"), 2);
        assert_eq!(
            quiet.reserve("img"),
            1,
            "no miss within the window: back to size"
        );
        assert_eq!(quiet.target("img"), 1);
    }

    #[tokio::test]
    async fn a_run_waits_for_a_refill_under_way_rather_than_creating_its_own() {
        let pool = Arc::new(Pool::<String>::new(1, 1));
        assert_eq!(pool.claim("img").await, Claim::Create, "nothing under way");
        assert_eq!(pool.reserve("img"), 1);
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
        assert_eq!(pool.reserve("img"), 1);
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
