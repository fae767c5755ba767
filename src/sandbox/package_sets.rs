//! When each package set was last used, and the pruning of the ones unused for long
//! (`code-sandbox-mcp cleanup --packages DAYS`).
//!
//! A set's storage outlives the server that installed it (it is the cache of the next
//! run that asks for the same set), so nothing else ever removes it. Its last use is
//! recorded on this host, in the cache directory (see [`super::environment_cache`]), as
//! the modification time of `package-sets/<storage>`, touched on every run that uses the
//! set: the engine cannot hold it (a volume's labels are fixed when it is made, and runs
//! mount the set read-only). A set with no record here (installed by a server of
//! another user, whose cache directory is elsewhere, or before records were kept)
//! counts as last used when its storage was made. So a user who prunes can remove a
//! set another user of the same engine used lately but installed long ago; the next
//! run that asks for it installs it again.

use super::backend::Backend;
use super::environment_cache::cache_dir;
use super::SandboxError;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// The record of the set stored in `storage`, if a cache directory can be named.
fn record(storage: &str) -> Option<PathBuf> {
    let plain = storage
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (plain && !storage.is_empty())
        .then(|| cache_dir().map(|dir| dir.join("package-sets").join(storage)))?
}

/// Records that a run uses the set in `storage` now (best effort: a set without a
/// record is judged by its age).
pub fn record_use(storage: &str) {
    let Some(path) = record(storage) else { return };
    let touched = std::fs::create_dir_all(path.parent().expect("a record has a folder"))
        .and_then(|()| std::fs::write(&path, b""));
    if let Err(error) = touched {
        tracing::debug!(%error, path = %path.display(), "could not record a package set's use");
    }
}

/// When the set in `storage` was last used by a server of this user, if recorded.
pub fn last_use(storage: &str) -> Option<SystemTime> {
    std::fs::metadata(record(storage)?).ok()?.modified().ok()
}

/// Forgets the record of the set in `storage` (its storage is gone).
pub fn forget(storage: &str) {
    if let Some(path) = record(storage) {
        let _ = std::fs::remove_file(path);
    }
}

/// What a prune did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Sets removed (unused for longer than asked).
    pub removed: Vec<String>,
    /// Sets unused for longer than asked that a box still uses: kept.
    pub in_use: Vec<String>,
    /// Sets used more recently: kept.
    pub kept: usize,
}

/// Removes every package set unused for longer than `unused_for`.
pub async fn prune(backend: &dyn Backend, unused_for: Duration) -> Result<Pruned, SandboxError> {
    let now = SystemTime::now();
    let mut pruned = Pruned::default();
    for storage in backend.package_storage().await? {
        let used = last_use(&storage.name).or(storage.created);
        let idle = used.and_then(|used| now.duration_since(used).ok());
        // A set whose age nobody can tell is not removed on a guess.
        if idle.is_none_or(|idle| idle <= unused_for) {
            pruned.kept += 1;
            continue;
        }
        if backend.remove_package_storage(&storage.name).await? {
            forget(&storage.name);
            pruned.removed.push(storage.name);
        } else {
            pruned.in_use.push(storage.name);
        }
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_only_ever_a_plain_name_in_the_cache() {
        assert!(record("../etc").is_none());
        assert!(record("a/b").is_none());
        assert!(record("").is_none());
        if let Some(path) = record("code-sandbox-mcp-packages-0123abcd") {
            assert!(path.ends_with("package-sets/code-sandbox-mcp-packages-0123abcd"));
        }
    }
}
