//! Python frontend (placeholder until the resolver lands).
use super::Fact;

pub fn analyze(_source: &str) -> Vec<Fact> {
    Vec::new()
}
