//! What an image offers, remembered on disk per image id, so that a server that starts
//! can describe its images at once instead of waiting for a probe.
//!
//! The probe (see [`super::environment`]) runs in the container that puts an image's
//! assets in place: seconds after start, longer under load or while an image is pulled.
//! A client lists the tools right after `initialize` and gives up after a few seconds,
//! so the listing must not wait for it. The probe's report is a function of the image's
//! content, which the engine's image id names (a content digest): the report kept under
//! that id is true for as long as the id exists, and an image rebuilt under the same tag
//! has a new id, so nothing here ever needs invalidating. Files are small (a few KiB)
//! and one per image id.
//!
//! Where: `CODE_SANDBOX_CACHE_DIR` when set, else `$XDG_CACHE_HOME/code-sandbox-mcp`,
//! else `~/.cache/code-sandbox-mcp`; under it `environments/<id>.json`. Every failure
//! here (no home, a read-only disk, a file from another version) is a cache miss, never
//! an error: the probe still runs and the descriptions catch up.

use super::backend::{Backend, Prepared};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The variable naming the cache directory (tests and benchmarks point it elsewhere).
pub const CACHE_DIR_VAR: &str = "CODE_SANDBOX_CACHE_DIR";

/// The version of the file format; a file of another one is a miss.
const FORMAT: u32 = 1;

/// One image's probe, as kept on disk.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    format: u32,
    probe: String,
    headline_label: Option<String>,
}

/// The cache directory of this user (see the module doc), if one can be named.
pub fn cache_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = set(CACHE_DIR_VAR) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = set("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("code-sandbox-mcp"));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".cache").join("code-sandbox-mcp"))
}

/// The file of image `id` under `dir`; `None` for an id that is not a plain digest
/// (`sha256:…`): an id never becomes a path of its own choosing.
fn entry_path(dir: &Path, id: &str) -> Option<PathBuf> {
    let name = id.replace(':', "-");
    let plain = !name.is_empty()
        && name.len() <= 200
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    plain.then(|| dir.join("environments").join(format!("{name}.json")))
}

/// The probe kept for image `id` under `dir`, if any.
pub fn load(dir: &Path, id: &str) -> Option<Prepared> {
    let text = std::fs::read_to_string(entry_path(dir, id)?).ok()?;
    let entry: Entry = serde_json::from_str(&text).ok()?;
    (entry.format == FORMAT).then_some(Prepared {
        probe: entry.probe,
        headline_label: entry.headline_label,
    })
}

/// Keeps `prepared` for image `id` under `dir` (written whole, then renamed, so a
/// reader never sees half a file).
pub fn store(dir: &Path, id: &str, prepared: &Prepared) -> std::io::Result<()> {
    let path = entry_path(dir, id).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a plain image id")
    })?;
    let folder = path.parent().expect("an entry has a folder");
    std::fs::create_dir_all(folder)?;
    let entry = Entry {
        format: FORMAT,
        probe: prepared.probe.clone(),
        headline_label: prepared.headline_label.clone(),
    };
    let temporary = folder.join(format!(".{}.{}", std::process::id(), unique()));
    std::fs::write(
        &temporary,
        serde_json::to_vec(&entry).expect("an entry serializes"),
    )?;
    std::fs::rename(&temporary, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Keeps what the probe of `image` found, under the image's id (best effort).
pub async fn remember(backend: &dyn Backend, image: &str, prepared: &Prepared) {
    let Some(dir) = cache_dir() else { return };
    let id = match backend.local_image(image).await {
        Ok(Some(found)) => found.id,
        Ok(None) => return,
        Err(error) => {
            tracing::debug!(%error, image, "the image's id is unknown: its probe is not kept");
            return;
        }
    };
    if let Err(error) = store(&dir, &id, prepared) {
        tracing::debug!(%error, dir = %dir.display(), "could not keep an image's probe");
    }
}

/// The image among `choices` the engine would choose (the first it has), with the probe
/// kept for its id; `None` when that image has none kept, when the engine has none of
/// them, or cannot be asked.
pub async fn recall(backend: &dyn Backend, choices: &[String]) -> Option<(String, Prepared)> {
    let dir = cache_dir()?;
    for image in choices {
        match backend.local_image(image).await {
            Ok(Some(found)) => return load(&dir, &found.id).map(|p| (image.clone(), p)),
            Ok(None) => continue,
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_kept_per_image_id_and_odd_ids_are_never_paths() {
        let dir = tempfile::tempdir().unwrap();
        let prepared = Prepared {
            probe: "python-version=3.13.5\npackage=python numpy 2.2.4\n".into(),
            headline_label: Some("numpy".into()),
        };
        let id = "sha256:0123456789abcdef";
        assert!(load(dir.path(), id).is_none());
        store(dir.path(), id, &prepared).unwrap();
        let back = load(dir.path(), id).unwrap();
        assert_eq!(back.probe, prepared.probe);
        assert_eq!(back.headline_label.as_deref(), Some("numpy"));
        assert!(load(dir.path(), "sha256:fedcba").is_none());
        for odd in ["../../etc/passwd", "a/b", "", "x.json"] {
            assert!(store(dir.path(), odd, &prepared).is_err(), "{odd}");
            assert!(load(dir.path(), odd).is_none(), "{odd}");
        }
        // A file of another format is a miss, not an error.
        let path = entry_path(dir.path(), id).unwrap();
        std::fs::write(&path, r#"{"format":0,"probe":"","headline_label":null}"#).unwrap();
        assert!(load(dir.path(), id).is_none());
        std::fs::write(&path, "not json").unwrap();
        assert!(load(dir.path(), id).is_none());
    }
}
