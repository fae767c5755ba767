//! The warm pool: started containers waiting, per image, so a run pays only for the
//! exec. A container is handed out once and never returns (each run gets a fresh one,
//! so nothing a run leaves behind reaches the next); the pool refills in the background.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Ready containers and containers being made, per image.
#[derive(Debug, Default)]
pub struct Pool {
    images: Mutex<HashMap<String, ImageSlots>>,
}

#[derive(Debug, Default)]
struct ImageSlots {
    ready: VecDeque<String>,
    /// Creations under way for this image; counted so a refill never overshoots.
    filling: usize,
}

impl Pool {
    /// Takes a ready container of `image`, oldest first.
    pub fn take(&self, image: &str) -> Option<String> {
        self.lock().get_mut(image)?.ready.pop_front()
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

#[cfg(test)]
mod tests {
    use super::Pool;

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
}
