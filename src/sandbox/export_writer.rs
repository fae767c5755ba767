//! Writes one exported file inside the export folder and nowhere else.
//!
//! The name comes from the run, so it is judged as an attacker's: a plain relative path
//! (no `..`, no absolute path, no control or invisible character, no part longer than a
//! filesystem takes), not a protected name (`policy::protected_names`) unless the policy
//! lists it. Then every step is taken relative to a folder already open, never by a path
//! the kernel would resolve again: the export folder is walked from `/` along the real
//! path pinned when the policy loaded, and the file's own folders below it, each opened
//! with `O_NOFOLLOW` (a link anywhere on the way is refused, not followed) and made with
//! `mkdirat` when missing. The bytes go to a fresh file of a random name opened with
//! `O_CREAT|O_EXCL|O_NOFOLLOW` (a link or file planted at that name makes the open
//! fail), which is then renamed into place: without `overwrite`, by a rename that
//! refuses to replace anything (`RENAME_NOREPLACE`, or a hard link where the filesystem
//! lacks it); with it, by a rename, which replaces a link itself rather than writing
//! through it. The policy's files and the audit log are never replaced, whatever their
//! name there.

use std::path::{Component, Path, PathBuf};

/// Longest path taken, in bytes (as for files handed in).
const LONGEST_PATH: usize = 1024;
/// Longest part of a path most filesystems take, in bytes.
const LONGEST_PART: usize = 255;

/// Writes `bytes` at `path` under `folder` (see the module docs); `keep` are files that
/// must never be replaced (the policy's and the audit log), `allow` the policy's globs
/// of protected names it exports anyway. The error is the reason, for the result.
pub fn write(
    folder: &Path,
    path: &str,
    bytes: &[u8],
    overwrite: bool,
    keep: &[PathBuf],
    allow: &[String],
) -> Result<(), String> {
    check_name(path)?;
    if let Some(why) = crate::policy::protected_names::refusal(path, allow) {
        return Err(why);
    }
    imp::write(folder, path, bytes, overwrite, keep)
}

/// A plain relative path whose every part a filesystem takes as written.
fn check_name(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the name is empty".into());
    }
    if path.len() > LONGEST_PATH {
        return Err(format!("the name is longer than {LONGEST_PATH} bytes"));
    }
    if path.starts_with('/') || path.contains('\\') {
        return Err("not a plain relative path".into());
    }
    if crate::analysis::display::has_hidden_characters(path) || path.contains('\t') {
        return Err("the name holds a control, invisible or direction-changing character".into());
    }
    for part in path.split('/') {
        if matches!(part, "" | "." | "..") {
            return Err("not a plain relative path".into());
        }
        if part.len() > LONGEST_PART {
            return Err(format!(
                "a part of the name is longer than {LONGEST_PART} bytes"
            ));
        }
    }
    Ok(())
}

#[cfg(unix)]
mod imp {
    use super::*;
    use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
    use rustix::io::Errno;
    use std::io::Write;
    use std::os::fd::OwnedFd;

    /// How many random names are tried before giving up (each taken one is a file
    /// someone else made there: a collision, or a plant).
    const TEMPORARY_TRIES: usize = 8;

    pub fn write(
        folder: &Path,
        path: &str,
        bytes: &[u8],
        overwrite: bool,
        keep: &[PathBuf],
    ) -> Result<(), String> {
        let mut dir = open_folder(folder)?;
        let (parents, name) = match path.rsplit_once('/') {
            Some((parents, name)) => (Some(parents), name),
            None => (None, path),
        };
        for part in parents.into_iter().flat_map(|p| p.split('/')) {
            dir = enter(&dir, part, true).map_err(|why| format!("at `{part}`: {why}"))?;
        }
        let existing = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        if let Some(existing) = &existing {
            if !overwrite {
                return Err("a file is already there (outputs.export.overwrite is false)".into());
            }
            if is_kept(existing, keep) {
                return Err(
                    "it is the policy file or the audit log, which no export replaces".into(),
                );
            }
        }
        let temporary = write_temporary(&dir, bytes)?;
        let placed = if overwrite {
            rustix::fs::renameat(&dir, temporary.as_str(), &dir, name)
        } else {
            rename_no_replace(&dir, &temporary, name)
        };
        if let Err(errno) = placed {
            let _ = rustix::fs::unlinkat(&dir, temporary.as_str(), AtFlags::empty());
            return Err(match errno {
                Errno::EXIST | Errno::NOTEMPTY => {
                    "a file is already there (outputs.export.overwrite is false)".into()
                }
                Errno::ISDIR => "a folder of that name is there".into(),
                other => std::io::Error::from(other).to_string(),
            });
        }
        Ok(())
    }

    /// The export folder, opened by walking its real path from `/` without following a
    /// link; missing folders at its end are made (it need not exist before the first
    /// export).
    fn open_folder(folder: &Path) -> Result<OwnedFd, String> {
        let mut dir = rustix::fs::open("/", directory_flags(), Mode::empty())
            .map_err(|e| format!("cannot open `/`: {e}"))?;
        for component in folder.components() {
            match component {
                Component::RootDir => {}
                Component::Normal(part) => {
                    let part = part
                        .to_str()
                        .ok_or("the export folder's path is not UTF-8")?;
                    dir = enter(&dir, part, true).map_err(|why| {
                        format!("the export folder cannot be opened at `{part}`: {why}")
                    })?;
                }
                _ => return Err("the export folder's path is not a real path".into()),
            }
        }
        Ok(dir)
    }

    /// The folder `part` of `dir`, made first when `make` and missing; a link there is
    /// refused.
    fn enter(dir: &OwnedFd, part: &str, make: bool) -> Result<OwnedFd, String> {
        for _ in 0..2 {
            match rustix::fs::openat(dir, part, directory_flags(), Mode::empty()) {
                Ok(opened) => return Ok(opened),
                Err(Errno::NOENT) if make => {
                    match rustix::fs::mkdirat(dir, part, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => continue,
                        Err(error) => return Err(format!("cannot make a folder there: {error}")),
                    }
                }
                Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
                    return Err("a link or a file is there, where a folder should be".into())
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        Err("the folder there keeps changing".into())
    }

    fn directory_flags() -> OFlags {
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
    }

    /// Writes `bytes` to a new file of a random name in `dir`; returns the name.
    fn write_temporary(dir: &OwnedFd, bytes: &[u8]) -> Result<String, String> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        for _ in 0..TEMPORARY_TRIES {
            let name = format!(".code-sandbox-export-{:016x}.part", random());
            let file =
                match rustix::fs::openat(dir, name.as_str(), flags, Mode::from_raw_mode(0o644)) {
                    Ok(file) => file,
                    Err(Errno::EXIST) => continue,
                    Err(error) => return Err(format!("cannot create the file: {error}")),
                };
            let mut file = std::fs::File::from(file);
            if let Err(error) = file.write_all(bytes) {
                drop(file);
                let _ = rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty());
                return Err(format!("cannot write the file: {error}"));
            }
            return Ok(name);
        }
        Err("no fresh name could be had for the file (something keeps taking them)".into())
    }

    /// Renames `from` to `to` in `dir` unless `to` exists, atomically: a rename that
    /// refuses to replace, or, where the filesystem has none, a hard link (which
    /// refuses too) and the removal of the temporary name.
    fn rename_no_replace(dir: &OwnedFd, from: &str, to: &str) -> Result<(), Errno> {
        #[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
        match rustix::fs::renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
            done => return done,
        }
        rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())?;
        let _ = rustix::fs::unlinkat(dir, from, AtFlags::empty());
        Ok(())
    }

    /// Whether `existing` is one of `keep` (the same file, by device and inode).
    fn is_kept(existing: &rustix::fs::Stat, keep: &[PathBuf]) -> bool {
        keep.iter().any(|path| {
            rustix::fs::stat(path)
                .is_ok_and(|kept| kept.st_dev == existing.st_dev && kept.st_ino == existing.st_ino)
        })
    }

    /// 64 bits no one can guess ahead (the standard library's per-process random keys).
    fn random() -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        hasher.finish()
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;

    pub fn write(_: &Path, _: &str, _: &[u8], _: bool, _: &[PathBuf]) -> Result<(), String> {
        Err("exporting needs a Unix host (it relies on O_NOFOLLOW and openat)".into())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Folders {
        _root: tempfile::TempDir,
        export: PathBuf,
        outside: PathBuf,
    }

    fn folders() -> Folders {
        let root = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(root.path()).unwrap();
        let export = real.join("out");
        let outside = real.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        Folders {
            _root: root,
            export,
            outside,
        }
    }

    fn put(folders: &Folders, path: &str, overwrite: bool) -> Result<(), String> {
        write(&folders.export, path, b"new", overwrite, &[], &[])
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.contains("code-sandbox") {
                found.push(name);
            }
            if entry.file_type().unwrap().is_dir() {
                found.extend(leftovers(&entry.path()));
            }
        }
        found
    }

    #[test]
    fn names_that_are_not_plain_are_refused() {
        let folders = folders();
        let long_part = "a".repeat(256);
        let long_path = ["abcdefgh"; 120].join("/");
        for name in [
            "",
            "/etc/passwd",
            "../escape.txt",
            "a/../../escape.txt",
            "./a.txt",
            "a//b.txt",
            "a\\..\\b.txt",
            "line\nbreak.txt",
            "carriage\rreturn.txt",
            "esc\x1b[2J.txt",
            "txt.\u{202e}exe",
            "zero\u{200b}width.txt",
            long_part.as_str(),
            long_path.as_str(),
        ] {
            assert!(put(&folders, name, true).is_err(), "{name:?} was exported");
        }
        assert!(!folders.export.exists() || leftovers(&folders.export).is_empty());
        assert_eq!(std::fs::read_dir(&folders.outside).unwrap().count(), 0);
    }

    #[test]
    fn a_link_at_the_final_name_is_replaced_or_refused_never_followed() {
        let folders = folders();
        std::fs::create_dir_all(&folders.export).unwrap();
        let victim = folders.outside.join("victim.txt");
        std::fs::write(&victim, "host file").unwrap();
        symlink(&victim, folders.export.join("report.txt")).unwrap();
        let refused = put(&folders, "report.txt", false).unwrap_err();
        assert!(refused.contains("already there"), "{refused}");
        put(&folders, "report.txt", true).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host file");
        let placed = folders.export.join("report.txt");
        assert!(!placed.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&placed).unwrap(), b"new");
        // A dangling link (to a file that does not exist yet) creates nothing either.
        let nowhere = folders.outside.join("created.txt");
        symlink(&nowhere, folders.export.join("fresh.txt")).unwrap();
        assert!(put(&folders, "fresh.txt", false).is_err());
        assert!(!nowhere.exists());
    }

    #[test]
    fn the_old_temporary_name_is_not_followed() {
        let folders = folders();
        std::fs::create_dir_all(&folders.export).unwrap();
        let victim = folders.outside.join("victim.txt");
        std::fs::write(&victim, "host file").unwrap();
        symlink(&victim, folders.export.join(".data.csv.code-sandbox-part")).unwrap();
        put(&folders, "data.csv", false).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host file");
    }

    #[test]
    fn a_link_on_the_way_is_refused_and_no_folder_is_made_outside() {
        let folders = folders();
        std::fs::create_dir_all(&folders.export).unwrap();
        symlink(&folders.outside, folders.export.join("sub")).unwrap();
        let refused = put(&folders, "sub/deeper/x.txt", false).unwrap_err();
        assert!(refused.contains("a link or a file is there"), "{refused}");
        assert_eq!(std::fs::read_dir(&folders.outside).unwrap().count(), 0);
        // The export folder itself turned into a link after the policy loaded.
        std::fs::remove_file(folders.export.join("sub")).unwrap();
        std::fs::remove_dir(&folders.export).unwrap();
        symlink(&folders.outside, &folders.export).unwrap();
        let refused = put(&folders, "y.txt", false).unwrap_err();
        assert!(
            refused.contains("export folder cannot be opened"),
            "{refused}"
        );
        assert_eq!(std::fs::read_dir(&folders.outside).unwrap().count(), 0);
    }

    #[test]
    fn the_policy_file_and_the_audit_log_are_never_replaced() {
        let folders = folders();
        std::fs::create_dir_all(&folders.export).unwrap();
        let policy = folders.export.join("policy.yaml");
        std::fs::write(&policy, "version: 1\n").unwrap();
        let keep = [policy.clone()];
        let refused = write(&folders.export, "policy.yaml", b"x", true, &keep, &[]).unwrap_err();
        assert!(
            refused.contains("policy file or the audit log"),
            "{refused}"
        );
        assert_eq!(std::fs::read_to_string(&policy).unwrap(), "version: 1\n");
    }

    #[test]
    fn protected_names_need_the_policy_s_word() {
        let folders = folders();
        assert!(put(&folders, ".git/hooks/pre-commit", true).is_err());
        assert!(put(&folders, "CONFTEST.PY", true).is_err());
        assert!(!folders.export.join(".git").exists());
        let allow = [".github/*".to_string()];
        write(
            &folders.export,
            ".github/workflows/ci.yml",
            b"x",
            false,
            &[],
            &allow,
        )
        .unwrap();
        assert!(folders.export.join(".github/workflows/ci.yml").is_file());
    }

    /// A process of the host swaps a link in for a folder of the export, as fast as it
    /// can, while files are exported into it: every file lands in the export or is
    /// refused, none outside.
    #[test]
    fn a_link_swapped_in_during_the_export_is_never_followed() {
        let folders = folders();
        let sub = folders.export.join("sub");
        let link = folders.export.join("link");
        std::fs::create_dir_all(&sub).unwrap();
        symlink(&folders.outside, &link).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, export) = (stop.clone(), folders.export.clone());
            std::thread::spawn(move || {
                // Swapped atomically (RENAME_EXCHANGE): `sub` is always there, a folder
                // or a link out, never missing.
                let dir = rustix::fs::open(
                    &export,
                    rustix::fs::OFlags::RDONLY,
                    rustix::fs::Mode::empty(),
                )
                .unwrap();
                let mut swaps = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        &dir,
                        "sub",
                        &dir,
                        "link",
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                    swaps += 1;
                }
                if swaps % 2 == 1 {
                    rustix::fs::renameat_with(
                        &dir,
                        "sub",
                        &dir,
                        "link",
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                }
                swaps
            })
        };
        let (mut written, mut refused) = (0, 0);
        for index in 0..3000 {
            match put(&folders, &format!("sub/f{index}.txt"), false) {
                Ok(()) => written += 1,
                Err(_) => refused += 1,
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(
            swaps > 0 && written > 0,
            "{swaps} swaps, {written} written, {refused} refused"
        );
        assert_eq!(std::fs::read_dir(&folders.outside).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(&sub).unwrap().count(), written);
        assert!(leftovers(&folders.export).is_empty());
    }
}
