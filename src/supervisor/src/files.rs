//! The files of a box's working directory, as the supervisor handles them: the
//! program's own file and the files handed in, written before the program starts, and
//! what the run created or changed, listed and read afterwards. Never through a link:
//! in a session, code of an earlier call may have put `out -> /etc` or a FIFO in the
//! directory, so every path is walked one component at a time from the directory
//! itself (`openat` with `O_NOFOLLOW`), and only regular files are read (opened
//! without blocking, checked with `fstat`).

use crate::wire::FileEntry;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const O_NOFOLLOW: i32 = 0o400000;
const O_DIRECTORY: i32 = 0o200000;
const O_NONBLOCK: i32 = 0o4000;

/// Past this many entries the walk stops: a program that makes 100 000 files must not
/// make the listing itself the cost.
pub const WALK_LIMIT: usize = 20_000;
/// At most this many entries are listed; the rest are counted.
pub const LISTED: usize = 100;

/// A relative path made of plain components, or why not.
fn components(path: &str) -> Result<Vec<&str>, String> {
    let parts: Vec<&str> = path.split('/').collect();
    if path.is_empty()
        || path.starts_with('/')
        || parts.iter().any(|part| matches!(*part, "" | "." | ".."))
    {
        return Err(format!("`{path}` is not a plain relative path"));
    }
    Ok(parts)
}

/// Opens the folder `parts` beneath `root` (making missing folders when `make`),
/// following no link on the way.
fn open_folder(root: &Path, parts: &[&str], make: bool) -> Result<File, String> {
    let mut folder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_DIRECTORY | O_NOFOLLOW)
        .open(root)
        .map_err(|e| format!("{}: {e}", root.display()))?;
    let mut here = root.to_path_buf();
    for part in parts {
        here.push(part);
        // Relative to the folder opened last, through /proc/self/fd: `openat` with the
        // folder's fd, which the standard library does not offer.
        let at = PathBuf::from(format!("/proc/self/fd/{}", raw(&folder))).join(part);
        if make {
            match std::fs::DirBuilder::new().mode(0o755).create(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("{}: {e}", here.display())),
            }
        }
        folder = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_DIRECTORY | O_NOFOLLOW)
            .open(&at)
            .map_err(|e| {
                if e.raw_os_error() == Some(40) || e.raw_os_error() == Some(20) {
                    format!(
                        "{} leads out through a link, or is not a folder",
                        here.display()
                    )
                } else {
                    format!("{}: {e}", here.display())
                }
            })?;
    }
    Ok(folder)
}

fn raw(file: &File) -> i32 {
    use std::os::fd::AsRawFd;
    file.as_raw_fd()
}

/// Writes `bytes` as `relative` beneath `root`, making its folders, replacing a
/// regular file there, never following a link.
pub fn write(root: &Path, relative: &str, bytes: &[u8]) -> Result<(), String> {
    let parts = components(relative)?;
    let (name, folders) = parts.split_last().expect("at least one component");
    let folder = open_folder(root, folders, true)?;
    let at = PathBuf::from(format!("/proc/self/fd/{}", raw(&folder))).join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(O_NOFOLLOW | O_NONBLOCK)
        .open(&at)
        .map_err(|e| {
            if e.raw_os_error() == Some(40) {
                format!("`{relative}` is a link; not written through it")
            } else {
                format!("`{relative}`: {e}")
            }
        })?;
    let meta = file.metadata().map_err(|e| format!("`{relative}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("`{relative}` is not a regular file; not written"));
    }
    file.write_all(bytes)
        .map_err(|e| format!("`{relative}`: {e}"))
}

/// What a listing remembers of a file: its modification time and size.
pub type Stamp = (i64, i64, u64);

/// The regular files beneath `root` (relative path → stamp), links not followed, the
/// folders in `skip` (absolute) not entered; at most [`WALK_LIMIT`] entries looked at.
pub fn listing(root: &Path, skip: &[String]) -> BTreeMap<String, Stamp> {
    let mut found = BTreeMap::new();
    let mut folders = vec![root.to_path_buf()];
    let mut seen = 0;
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > WALK_LIMIT {
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                let skipped = skip.iter().any(|s| Path::new(s) == path);
                let name = entry.file_name();
                if !skipped
                    && name.as_bytes() != b"__pycache__"
                    && name.as_bytes() != b"node_modules"
                {
                    folders.push(path);
                }
            } else if kind.is_file() {
                if let (Ok(meta), Ok(relative)) = (entry.metadata(), path.strip_prefix(root)) {
                    found.insert(
                        relative.to_string_lossy().into_owned(),
                        (meta.mtime(), meta.mtime_nsec(), meta.size()),
                    );
                }
            }
        }
    }
    found
}

/// The caps of the policy's `outputs:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    pub max_files: usize,
    pub max_file_size: u64,
    pub max_total_size: u64,
}

/// Reads a regular file beneath `root` (no link followed), at most `limit + 1` bytes.
fn read_capped(root: &Path, relative: &str, limit: u64) -> Result<Vec<u8>, String> {
    let parts = components(relative)?;
    let (name, folders) = parts.split_last().expect("at least one component");
    let folder = open_folder(root, folders, false)?;
    let at = PathBuf::from(format!("/proc/self/fd/{}", raw(&folder))).join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NOFOLLOW | O_NONBLOCK)
        .open(&at)
        .map_err(|e| e.to_string())?;
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a regular file".into());
    }
    let mut data = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    Ok(data)
}

/// The entries for what changed between `before` and `after` (figures first, then the
/// files in path order), with the content of those within `caps`; a file over a cap is
/// listed with the cap's name. Returns the entries listed and how many more there are.
pub fn collect(
    root: &Path,
    before: &BTreeMap<String, Stamp>,
    after: &BTreeMap<String, Stamp>,
    figures: Vec<Vec<u8>>,
    caps: Caps,
) -> (Vec<FileEntry>, u64) {
    let mut entries: Vec<FileEntry> = figures
        .into_iter()
        .enumerate()
        .map(|(index, png)| FileEntry {
            path: format!("figure-{}.png", index + 1),
            size: png.len() as u64,
            figure: true,
            omitted: String::new(),
            data: png,
        })
        .collect();
    entries.extend(
        after
            .iter()
            .filter(|(path, stamp)| before.get(*path) != Some(*stamp))
            .map(|(path, stamp)| FileEntry {
                path: path.clone(),
                size: stamp.2,
                ..FileEntry::default()
            }),
    );
    let mut room = caps.max_total_size;
    let mut returned = 0;
    let mut listed = Vec::new();
    let total = entries.len();
    for mut entry in entries {
        let data = std::mem::take(&mut entry.data);
        if returned >= caps.max_files {
            entry.omitted = "max_files".into();
        } else if entry.size > caps.max_file_size {
            entry.omitted = "max_file_size".into();
        } else if entry.size > room {
            entry.omitted = "max_total_size".into();
        } else {
            let read = if entry.figure {
                Ok(data)
            } else {
                read_capped(root, &entry.path, caps.max_file_size)
            };
            match read {
                Ok(data) if data.len() as u64 > caps.max_file_size => {
                    entry.omitted = "max_file_size".into()
                }
                Ok(data) if data.len() as u64 > room => entry.omitted = "max_total_size".into(),
                Ok(data) => {
                    entry.size = data.len() as u64;
                    room -= entry.size;
                    returned += 1;
                    entry.data = data;
                }
                Err(error) => entry.omitted = format!("unreadable: {error}"),
            }
        }
        if listed.len() < LISTED {
            listed.push(entry);
        }
    }
    let unlisted = (total - listed.len()) as u64;
    (listed, unlisted)
}

/// The PNG files in `folder` (the figures the interpreter saved), in name order, then
/// removed.
pub fn take_figures(folder: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "png"))
        .collect();
    names.sort();
    let mut figures = Vec::new();
    for path in names {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name {
            if let Ok(data) = read_capped(folder, &name, 64 << 20) {
                figures.push(data);
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("supervisor-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn files_go_beneath_the_root_and_never_through_a_link() {
        let dir = root("write");
        let outside = root("outside");
        write(&dir, "a/b/c.txt", b"x").unwrap();
        assert_eq!(std::fs::read(dir.join("a/b/c.txt")).unwrap(), b"x");
        std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
        assert!(write(&dir, "out/planted.txt", b"x").is_err());
        std::os::unix::fs::symlink(outside.join("target"), dir.join("link.txt")).unwrap();
        assert!(write(&dir, "link.txt", b"x").is_err());
        assert!(!outside.join("planted.txt").exists() && !outside.join("target").exists());
        for bad in ["/etc/x", "../x", "a/../x", "a//x", "", "."] {
            assert!(write(&dir, bad, b"x").is_err(), "{bad}");
        }
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(outside);
    }

    #[test]
    fn what_changed_comes_back_within_the_caps() {
        let dir = root("collect");
        write(&dir, "kept.txt", b"old").unwrap();
        let before = listing(&dir, &[]);
        write(&dir, "new.txt", b"hello").unwrap();
        write(&dir, "big.bin", &[0u8; 100]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
        let after = listing(&dir, &[]);
        let caps = Caps {
            max_files: 10,
            max_file_size: 50,
            max_total_size: 1000,
        };
        let (entries, unlisted) = collect(&dir, &before, &after, vec![vec![1, 2]], caps);
        assert_eq!(unlisted, 0);
        let names: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, ["figure-1.png", "big.bin", "new.txt"]);
        assert_eq!(entries[1].omitted, "max_file_size");
        assert_eq!(entries[2].data, b"hello");
        assert!(entries[0].figure);
        let _ = std::fs::remove_dir_all(dir);
    }
}
