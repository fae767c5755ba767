//! Literal paths handed to filesystem calls.
//!
//! The sandbox only writes under `/sandbox` and `/tmp`; a snippet that opens
//! `/etc/passwd` or removes `/home` will fail there, and the agent should hear why before
//! it runs. This table says which resolved callees take paths, and in which arguments.
//! The policy engine decides which paths matter (absolute ones outside the allowed
//! directories, after folding `..`).

/// Where a filesystem callable takes its paths.
pub struct PathArguments {
    /// Positional argument indexes holding paths.
    pub positions: &'static [usize],
    /// Keyword names holding paths.
    pub keywords: &'static [&'static str],
}

const FIRST: PathArguments = PathArguments {
    positions: &[0],
    keywords: &["file", "path", "filename", "name", "database", "top", "src"],
};
const FIRST_TWO: PathArguments = PathArguments {
    positions: &[0, 1],
    keywords: &["src", "dst", "path", "filename", "extract_dir"],
};
const ARCHIVE: PathArguments = PathArguments {
    positions: &[0, 2],
    keywords: &["base_name", "root_dir"],
};

/// The path arguments of a resolved callee, if it is a filesystem operation.
pub fn path_arguments(callee: &str) -> Option<&'static PathArguments> {
    Some(match callee {
        "open" | "io.open" | "codecs.open" | "os.open" | "os.remove" | "os.unlink" | "os.rmdir"
        | "os.removedirs" | "os.mkdir" | "os.makedirs" | "os.chmod" | "os.lchmod" | "os.chown"
        | "os.lchown" | "os.chdir" | "os.chroot" | "os.listdir" | "os.scandir" | "os.walk"
        | "os.stat" | "os.lstat" | "os.truncate" | "os.utime" | "os.mkfifo" | "os.mknod"
        | "os.readlink" | "os.access" | "os.chflags" | "os.fwalk" | "glob.glob" | "glob.iglob"
        | "tarfile.open" | "tarfile.TarFile" | "zipfile.ZipFile" | "sqlite3.connect"
        | "gzip.open" | "bz2.open" | "lzma.open" | "shelve.open" | "dbm.open" | "shutil.rmtree"
        | "shutil.chown" | "shutil.disk_usage" | "fileinput.input" | "io.FileIO" => &FIRST,
        "os.rename"
        | "os.renames"
        | "os.replace"
        | "os.symlink"
        | "os.link"
        | "shutil.copy"
        | "shutil.copy2"
        | "shutil.copyfile"
        | "shutil.copymode"
        | "shutil.copystat"
        | "shutil.copytree"
        | "shutil.move"
        | "shutil.unpack_archive" => &FIRST_TWO,
        "shutil.make_archive" => &ARCHIVE,
        _ => return None,
    })
}

/// Path-object constructors: every positional argument is a path segment.
pub fn is_path_constructor(callee: &str) -> bool {
    matches!(
        callee,
        "pathlib.Path"
            | "pathlib.PurePath"
            | "pathlib.PosixPath"
            | "pathlib.PurePosixPath"
            | "pathlib.WindowsPath"
            | "pathlib.PureWindowsPath"
    )
}

/// `os.path.join` / `Path / part` on literal segments: a later absolute segment
/// replaces what came before, as in Python.
pub fn join(base: &str, part: &str) -> String {
    if part.starts_with('/') || base.is_empty() {
        part.to_string()
    } else if base.ends_with('/') {
        format!("{base}{part}")
    } else {
        format!("{base}/{part}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_like_posixpath() {
        assert_eq!(join("/etc", "passwd"), "/etc/passwd");
        assert_eq!(join("/etc/", "passwd"), "/etc/passwd");
        assert_eq!(join("data", "/etc/shadow"), "/etc/shadow");
        assert_eq!(join("", "x"), "x");
        assert!(path_arguments("shutil.rmtree").is_some());
        assert!(path_arguments("os.path.join").is_none());
    }
}
