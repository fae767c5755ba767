//! The filesystem the interpreter may touch, kept by the kernel (Landlock): writes only
//! beneath the writable places (the working directory, the scratch folders, `rw`
//! mounts) and to `/dev/null`; nothing under `/proc` writable (so no
//! `/proc/self/mem`); reads everywhere, or, when the policy's filesystem rule denies,
//! only beneath the places a program here needs and the policy allows. From ABI 6 on,
//! the interpreter also cannot signal a process outside its domain (the supervisor,
//! the box's init) nor reach an abstract Unix socket outside it.
//!
//! The ruleset is made by the supervisor before it starts the interpreter, and the
//! interpreter's process restricts itself with it between `fork` and `execve`.

use crate::sys::{self, Errno};
use std::ffi::CString;

/// `LANDLOCK_ACCESS_FS_*`.
pub mod access {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;
}

/// `LANDLOCK_SCOPE_*` (ABI 6).
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

const CREATE_RULESET_VERSION: usize = 1;
const RULE_PATH_BENEATH: usize = 1;

/// The rights of the ABI `abi` (what a ruleset of it handles).
pub fn handled(abi: u32) -> u64 {
    let mut rights = (1 << 13) - 1;
    if abi >= 2 {
        rights |= access::REFER;
    }
    if abi >= 3 {
        rights |= access::TRUNCATE;
    }
    if abi >= 5 {
        rights |= access::IOCTL_DEV;
    }
    rights
}

/// What reading a file or folder needs (listing, opening, running).
pub const READ: u64 = access::EXECUTE | access::READ_FILE | access::READ_DIR | access::IOCTL_DEV;
/// The rights a rule on a regular file (not a folder) may carry.
pub const FILE_RIGHTS: u64 =
    access::EXECUTE | access::WRITE_FILE | access::READ_FILE | access::TRUNCATE | access::IOCTL_DEV;

/// The Landlock ABI this kernel offers; `None` when it has none (or it is off, or a
/// filter refuses the call, as gVisor's kernel does).
pub fn abi() -> Option<u32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) reads no memory.
    let version = unsafe {
        sys::call(
            sys::LANDLOCK_CREATE_RULESET,
            &[0, 0, CREATE_RULESET_VERSION],
        )
    };
    version.ok().map(|v| v as u32).filter(|v| *v >= 1)
}

/// Where the interpreter may write and read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paths {
    /// Folders beneath which everything may be done.
    pub writable: Vec<String>,
    /// Files that may be read and written (`/dev/null`).
    pub writable_files: Vec<String>,
    /// Folders beneath which reading is allowed; `None`: everywhere.
    pub readable: Option<Vec<String>>,
}

/// A Landlock ruleset, made and ready to restrict a process.
pub struct Ruleset {
    fd: i32,
}

impl Drop for Ruleset {
    fn drop(&mut self) {
        // SAFETY: closing the ruleset's own fd.
        let _ = unsafe { sys::call(sys::CLOSE, &[self.fd as usize]) };
    }
}

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

impl Ruleset {
    /// A ruleset of `abi` allowing `paths` and nothing else. Places that do not exist
    /// here are left out (nothing can be done beneath them anyway).
    pub fn new(abi: u32, paths: &Paths) -> Result<Ruleset, String> {
        let handled = handled(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled,
            handled_access_net: 0,
            scoped: if abi >= 6 {
                SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
            } else {
                0
            },
        };
        // ABI 1-3 know the first field only, 4-5 the first two: the size says which.
        let size = match abi {
            1..=3 => 8,
            4 | 5 => 16,
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: `attr` lives for the call, and `size` is no larger than it.
        let fd = unsafe {
            sys::call(
                sys::LANDLOCK_CREATE_RULESET,
                &[&attr as *const RulesetAttr as usize, size, 0],
            )
        }
        .map_err(|errno| format!("landlock_create_ruleset: {errno}"))?;
        let ruleset = Ruleset { fd: fd as i32 };
        for dir in &paths.writable {
            ruleset.allow(dir, handled)?;
        }
        for file in &paths.writable_files {
            ruleset.allow(file, handled & FILE_RIGHTS)?;
        }
        match &paths.readable {
            None => ruleset.allow("/", handled & READ)?,
            Some(dirs) => {
                for dir in dirs {
                    ruleset.allow(dir, handled & READ)?;
                }
            }
        }
        Ok(ruleset)
    }

    /// Allows `rights` beneath `path` (a file: only the file rights among them).
    fn allow(&self, path: &str, rights: u64) -> Result<(), String> {
        let Ok(name) = CString::new(path) else {
            return Err(format!("{path:?}: a NUL in a path"));
        };
        const O_PATH: usize = 0o10000000;
        const O_CLOEXEC: usize = 0o2000000;
        const AT_FDCWD: isize = -100;
        // SAFETY: `name` is NUL-terminated and lives for the call.
        let fd = match unsafe {
            sys::call(
                sys::OPENAT,
                &[
                    AT_FDCWD as usize,
                    name.as_ptr() as usize,
                    O_PATH | O_CLOEXEC,
                ],
            )
        } {
            Ok(fd) => fd as i32,
            Err(Errno::ENOENT) => return Ok(()),
            Err(errno) => return Err(format!("opening {path} for a Landlock rule: {errno}")),
        };
        let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
        let attr = PathBeneathAttr {
            allowed_access: if is_dir { rights } else { rights & FILE_RIGHTS },
            parent_fd: fd,
        };
        // SAFETY: `attr` lives for the call; the fds are ours.
        let added = unsafe {
            sys::call(
                sys::LANDLOCK_ADD_RULE,
                &[
                    self.fd as usize,
                    RULE_PATH_BENEATH,
                    &attr as *const PathBeneathAttr as usize,
                    0,
                ],
            )
        };
        // SAFETY: closing the O_PATH fd opened above.
        let _ = unsafe { sys::call(sys::CLOSE, &[fd as usize]) };
        added
            .map(|_| ())
            .map_err(|errno| format!("a Landlock rule for {path}: {errno}"))
    }

    /// The ruleset's fd, for [`restrict_self`] in the child.
    pub fn fd(&self) -> i32 {
        self.fd
    }
}

/// Restricts the calling thread (and what it starts) to the ruleset `fd`. Needs
/// `no_new_privs` set first. Async-signal-safe: one raw system call.
pub fn restrict_self(fd: i32) -> Result<(), Errno> {
    // SAFETY: a plain system call on an fd.
    unsafe { sys::call(sys::LANDLOCK_RESTRICT_SELF, &[fd as usize, 0]) }.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_abi_handles_what_it_knows() {
        assert_eq!(handled(1), (1 << 13) - 1);
        assert_eq!(handled(2) & access::REFER, access::REFER);
        assert_eq!(handled(2) & access::TRUNCATE, 0);
        assert_eq!(handled(3) & access::TRUNCATE, access::TRUNCATE);
        assert_eq!(handled(4) & access::IOCTL_DEV, 0);
        assert_eq!(handled(7) & access::IOCTL_DEV, access::IOCTL_DEV);
        // Reading never includes writing.
        assert_eq!(READ & access::WRITE_FILE, 0);
        assert_eq!(READ & access::TRUNCATE, 0);
    }
}
