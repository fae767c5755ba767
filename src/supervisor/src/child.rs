//! Starting the interpreter under the kernel's layers: the supervisor `fork`s, and the
//! child, before it `execve`s the interpreter, makes itself a session of its own (so a
//! signal to its group never reaches the supervisor), arranges to die with the
//! supervisor, offers itself first to the OOM killer, sets `no_new_privs`, restricts
//! itself with Landlock, and installs the seccomp filter, whose listener it hands to
//! the supervisor over a socket. Everything the child does between `fork` and `execve`
//! is a raw system call on memory prepared before the `fork` (the supervisor has one
//! thread, so nothing it holds can be locked in the child).

use crate::filter::{Filter, Insn, Rules};
use crate::notify::Listener;
use crate::sys::{self, Errno};
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

/// The started interpreter: its pid and the supervisor's ends of its streams.
pub struct Child {
    pub pid: u32,
    /// Its stdout and stderr.
    pub stdout: i32,
    pub stderr: i32,
    /// Where its run-time hooks write their records (fd 3 in the child).
    pub explain: i32,
    /// The seccomp listener (when the kernel has user notification).
    pub listener: Option<Listener>,
    /// Fd 4 in the child, where the program comes when there is no listener (the
    /// fallback channel).
    pub program_pipe: Option<i32>,
}

/// How to start it.
pub struct Spawn<'a> {
    /// The interpreter and its arguments; `argv[0]` is its absolute path.
    pub argv: &'a [String],
    /// Variables added to the supervisor's own environment.
    pub env: &'a [(String, String)],
    pub floor: bool,
    /// A Landlock ruleset to restrict the child with.
    pub landlock: Option<i32>,
    /// Whether the kernel has user notification (else the floor's refusals are plain
    /// `EPERM`, and the program comes through a pipe).
    pub notify: bool,
}

const CLONE_SIGCHLD: usize = 17;
const PR_SET_PDEATHSIG: usize = 1;
const PR_SET_NO_NEW_PRIVS: usize = 38;
const SIGKILL: usize = 9;
const SECCOMP_SET_MODE_FILTER: usize = 1;
const SECCOMP_FILTER_FLAG_NEW_LISTENER: usize = 1 << 3;
const O_RDONLY: usize = 0;
const O_WRONLY: usize = 1;
const O_RDWR: usize = 2;
const O_CLOEXEC: usize = 0o2000000;
const AT_FDCWD: isize = -100;
const F_DUPFD_CLOEXEC: usize = 1030;
const FCNTL: u32 = if cfg!(target_arch = "x86_64") { 72 } else { 25 };
const AF_UNIX: usize = 1;
const SOCK_STREAM: usize = 1;
const SOL_SOCKET: i32 = 1;
const SCM_RIGHTS: i32 = 1;

/// `struct sock_fprog`.
#[repr(C)]
struct Program {
    len: u16,
    filter: *const Insn,
}

#[repr(C)]
struct IoVec {
    base: *mut u8,
    len: usize,
}

#[repr(C)]
struct MsgHdr {
    name: *mut u8,
    namelen: u32,
    iov: *mut IoVec,
    iovlen: usize,
    control: *mut u8,
    controllen: usize,
    flags: i32,
}

/// `struct cmsghdr` followed by one fd, aligned as the kernel expects.
#[repr(C)]
struct OneFd {
    len: usize,
    level: i32,
    kind: i32,
    fd: i32,
    _pad: i32,
}

/// A pair of pipe ends, the supervisor's end close-on-exec and moved above the
/// numbers the child will use (0 to 4).
fn pipe() -> Result<(i32, i32), String> {
    let mut fds = [0i32; 2];
    // SAFETY: the kernel writes two ints.
    unsafe { sys::call(sys::PIPE2, &[fds.as_mut_ptr() as usize, O_CLOEXEC]) }
        .map_err(|e| format!("pipe2: {e}"))?;
    Ok((high(fds[0])?, high(fds[1])?))
}

/// `fd` moved to a number of 10 or more (close-on-exec), the old number closed.
fn high(fd: i32) -> Result<i32, String> {
    if fd >= 10 {
        return Ok(fd);
    }
    // SAFETY: duplicating and closing our own fd.
    let moved = unsafe { sys::call(FCNTL, &[fd as usize, F_DUPFD_CLOEXEC, 10]) }
        .map_err(|e| format!("fcntl: {e}"))?;
    // SAFETY: closing our own fd.
    let _ = unsafe { sys::call(sys::CLOSE, &[fd as usize]) };
    Ok(moved as i32)
}

/// A copy of `fd` numbered 10 or more (close-on-exec); `fd` stays open.
fn copy_high(fd: i32) -> Result<i32, String> {
    // SAFETY: duplicating our own fd.
    unsafe { sys::call(FCNTL, &[fd as usize, F_DUPFD_CLOEXEC, 10]) }
        .map(|copy| copy as i32)
        .map_err(|e| format!("fcntl: {e}"))
}

fn close(fd: i32) {
    // SAFETY: closing an fd of ours.
    let _ = unsafe { sys::call(sys::CLOSE, &[fd as usize]) };
}

fn cstring(text: impl AsRef<[u8]>) -> Result<CString, String> {
    CString::new(text.as_ref().to_vec()).map_err(|_| "a NUL inside an argument".to_string())
}

/// Starts the interpreter as described; returns once it is on its way (its filter is
/// in place, its `execve` under way).
pub fn spawn(how: &Spawn) -> Result<Child, String> {
    let path = cstring(
        how.argv
            .first()
            .ok_or("no interpreter to start")?
            .as_bytes(),
    )?;
    if path.as_bytes().first() != Some(&b'/') {
        return Err("the interpreter must be an absolute path".into());
    }
    let args: Vec<CString> = how.argv.iter().map(cstring).collect::<Result<_, _>>()?;
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    for (name, value) in how.env {
        env.retain(|(n, _)| n.as_bytes() != name.as_bytes());
        env.push((name.into(), value.into()));
    }
    let env: Vec<CString> = env
        .iter()
        .map(|(n, v)| cstring([n.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<Result<_, _>>()?;
    let mut argv: Vec<*const u8> = args.iter().map(|a| a.as_ptr().cast()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const u8> = env.iter().map(|e| e.as_ptr().cast()).collect();
    envp.push(std::ptr::null());

    let supervisor = std::process::id();
    let filter = Filter::build(Rules {
        floor: how.floor,
        exec_path: path.as_ptr() as u64,
        supervisor,
        notify: how.notify,
    })
    .map_err(|e| format!("the seccomp filter does not build: {e:?}"))?;
    let mut filter_insns: Vec<Insn> = filter.instructions().to_vec();
    if !how.notify {
        // No user notification here: what would be handed to the supervisor is refused
        // outright (and the call channel does not exist).
        for insn in &mut filter_insns {
            if insn.code == crate::filter::RET_K && insn.k == crate::filter::RET_USER_NOTIF {
                insn.k = crate::filter::RET_ERRNO | crate::filter::EPERM;
            }
        }
    }
    let program = Program {
        len: filter_insns.len() as u16,
        filter: filter_insns.as_ptr(),
    };

    let (stdout_r, stdout_w) = pipe()?;
    let (stderr_r, stderr_w) = pipe()?;
    let (explain_r, explain_w) = pipe()?;
    let (program_r, program_w) = pipe()?;
    let null = c"/dev/null";
    // SAFETY: opening /dev/null, a NUL-terminated literal.
    let devnull = unsafe {
        sys::call(
            sys::OPENAT,
            &[
                AT_FDCWD as usize,
                null.as_ptr() as usize,
                O_RDONLY | O_CLOEXEC,
            ],
        )
    }
    .map_err(|e| format!("/dev/null: {e}"))?;
    let devnull = high(devnull as i32)?;
    let mut pair = [0i32; 2];
    // SAFETY: the kernel writes two ints.
    unsafe {
        sys::call(
            sys::SOCKETPAIR,
            &[
                AF_UNIX,
                SOCK_STREAM | O_CLOEXEC,
                0,
                pair.as_mut_ptr() as usize,
            ],
        )
    }
    .map_err(|e| format!("socketpair: {e}"))?;
    let (ours, theirs) = (high(pair[0])?, high(pair[1])?);
    let oom_adj = c"/proc/self/oom_score_adj";
    // The ruleset's fd may be one of the numbers the child is about to take (0 to 4).
    let landlock = match how.landlock {
        Some(fd) => Some(copy_high(fd)?),
        None => None,
    };

    // SAFETY: a fork of a process with one thread; the child makes only raw system
    // calls on memory prepared above (which the fork copied) and ends in `execve` or
    // `exit_group`.
    let forked = unsafe { sys::call(sys::CLONE, &[CLONE_SIGCHLD, 0, 0, 0, 0]) }
        .map_err(|e| format!("fork: {e}"))?;
    if forked == 0 {
        // The child. Every failure ends it with 127 and a line on its stderr.
        let wire = [
            (devnull, 0),
            (stdout_w, 1),
            (stderr_w, 2),
            (explain_w, 3),
            (program_r, 4),
        ];
        for (from, to) in wire {
            // SAFETY: dup3 of fds of ours, none of which is below 10.
            if let Err(errno) = unsafe { sys::call(sys::DUP3, &[from as usize, to, 0]) } {
                fail(b"dup3", errno);
            }
        }
        // SAFETY: each is a plain system call with constant or prepared arguments.
        unsafe {
            if let Err(errno) = sys::call(sys::SETSID, &[]) {
                fail(b"setsid", errno);
            }
            if let Err(errno) = sys::call(sys::PRCTL, &[PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0]) {
                fail(b"prctl(PR_SET_PDEATHSIG)", errno);
            }
            // The interpreter is what the OOM killer takes first: never the supervisor.
            if let Ok(fd) = sys::call(
                sys::OPENAT,
                &[
                    AT_FDCWD as usize,
                    oom_adj.as_ptr() as usize,
                    O_WRONLY | O_CLOEXEC,
                ],
            ) {
                let _ = sys::call(sys::WRITE, &[fd, b"1000".as_ptr() as usize, 4]);
                let _ = sys::call(sys::CLOSE, &[fd]);
            }
            if let Err(errno) = sys::call(sys::PRCTL, &[PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0]) {
                fail(b"prctl(PR_SET_NO_NEW_PRIVS)", errno);
            }
        }
        if let Some(ruleset) = landlock {
            if let Err(errno) = crate::landlock::restrict_self(ruleset) {
                fail(b"landlock_restrict_self", errno);
            }
        }
        let flags = if how.notify {
            SECCOMP_FILTER_FLAG_NEW_LISTENER
        } else {
            0
        };
        // SAFETY: `program` points to the filter's instructions, alive in this copy.
        let listener = match unsafe {
            sys::call(
                sys::SECCOMP,
                &[
                    SECCOMP_SET_MODE_FILTER,
                    flags,
                    &program as *const Program as usize,
                ],
            )
        } {
            Ok(fd) => fd,
            Err(errno) => fail(b"seccomp(SECCOMP_SET_MODE_FILTER)", errno),
        };
        if how.notify {
            let mut byte = 0u8;
            let mut iov = IoVec {
                base: &mut byte,
                len: 1,
            };
            let mut control = OneFd {
                len: 16 + 4,
                level: SOL_SOCKET,
                kind: SCM_RIGHTS,
                fd: listener as i32,
                _pad: 0,
            };
            let message = MsgHdr {
                name: std::ptr::null_mut(),
                namelen: 0,
                iov: &mut iov,
                iovlen: 1,
                control: (&mut control as *mut OneFd).cast(),
                controllen: std::mem::size_of::<OneFd>(),
                flags: 0,
            };
            // SAFETY: `message` and what it points to live on this stack.
            if let Err(errno) = unsafe {
                sys::call(
                    sys::SENDMSG,
                    &[theirs as usize, &message as *const MsgHdr as usize, 0],
                )
            } {
                fail(b"sending the seccomp listener", errno);
            }
            close(listener as i32);
        }
        // SAFETY: the path, argv and envp arrays prepared before the fork; the filter
        // lets exactly this path address through.
        let errno = unsafe {
            sys::call(
                sys::EXECVE,
                &[
                    path.as_ptr() as usize,
                    argv.as_ptr() as usize,
                    envp.as_ptr() as usize,
                ],
            )
        }
        .err()
        .unwrap_or(Errno::EINVAL);
        fail(b"execve", errno);
    }

    // The supervisor.
    let pid = forked as u32;
    for fd in [stdout_w, stderr_w, explain_w, program_r, devnull, theirs] {
        close(fd);
    }
    if let Some(fd) = landlock {
        close(fd);
    }
    let listener = if how.notify {
        let received = receive_fd(ours);
        close(ours);
        match received {
            Ok(fd) => Some(Listener { fd }),
            Err(error) => {
                let said = drain_text(stderr_r);
                for fd in [stdout_r, stderr_r, explain_r, program_w] {
                    close(fd);
                }
                return Err(format!("the interpreter did not start ({error}): {said}"));
            }
        }
    } else {
        close(ours);
        None
    };
    Ok(Child {
        pid,
        stdout: stdout_r,
        stderr: stderr_r,
        explain: explain_r,
        listener,
        program_pipe: (!how.notify).then_some(program_w),
    })
}

/// Ends the child before its `execve`: says what failed on its stderr, exits 127.
fn fail(what: &[u8], errno: Errno) -> ! {
    let prefix = b"code-sandbox-mcp supervisor: cannot start the interpreter: ";
    let code = [
        b' ',
        b'(',
        b'e',
        b'r',
        b'r',
        b'n',
        b'o',
        b' ',
        b'0' + (errno.0 / 10 % 10) as u8,
        b'0' + (errno.0 % 10) as u8,
        b')',
        b'\n',
    ];
    // SAFETY: writing bytes of ours to fd 2, then exiting.
    unsafe {
        let _ = sys::call(sys::WRITE, &[2, prefix.as_ptr() as usize, prefix.len()]);
        let _ = sys::call(sys::WRITE, &[2, what.as_ptr() as usize, what.len()]);
        let _ = sys::call(sys::WRITE, &[2, code.as_ptr() as usize, code.len()]);
        // `exit`, not `exit_group`: the filter may hand `exit_group` to a supervisor
        // that never got the listener. This process has one thread, so `exit` ends it.
        loop {
            let _ = sys::call(sys::EXIT, &[127]);
        }
    }
}

/// One fd sent over `socket` with `SCM_RIGHTS`.
fn receive_fd(socket: i32) -> Result<i32, String> {
    let mut byte = 0u8;
    let mut iov = IoVec {
        base: &mut byte,
        len: 1,
    };
    let mut control = OneFd {
        len: 0,
        level: 0,
        kind: 0,
        fd: -1,
        _pad: 0,
    };
    let mut message = MsgHdr {
        name: std::ptr::null_mut(),
        namelen: 0,
        iov: &mut iov,
        iovlen: 1,
        control: (&mut control as *mut OneFd).cast(),
        controllen: std::mem::size_of::<OneFd>(),
        flags: 0,
    };
    const MSG_CMSG_CLOEXEC: usize = 0x4000_0000;
    // SAFETY: `message` and what it points to live on this stack for the call.
    let read = unsafe {
        sys::call(
            sys::RECVMSG,
            &[
                socket as usize,
                &mut message as *mut MsgHdr as usize,
                MSG_CMSG_CLOEXEC,
            ],
        )
    }
    .map_err(|e| format!("recvmsg: {e}"))?;
    if read == 0 || control.level != SOL_SOCKET || control.kind != SCM_RIGHTS || control.fd < 0 {
        return Err("no listener came".into());
    }
    Ok(control.fd)
}

/// What is readable on `fd` now, as text (for an error message).
fn drain_text(fd: i32) -> String {
    let mut buffer = vec![0u8; 4096];
    // SAFETY: reading into our buffer.
    let read = unsafe {
        sys::call(
            sys::READ,
            &[fd as usize, buffer.as_mut_ptr() as usize, buffer.len()],
        )
    }
    .unwrap_or(0);
    buffer.truncate(read);
    String::from_utf8_lossy(&buffer).trim().to_string()
}

/// Opens `path` read-write, to learn whether a promise holds here without Landlock
/// (gVisor keeps `/proc/self/mem` closed on its own).
pub fn writable(path: &std::ffi::CStr) -> bool {
    // SAFETY: opening a NUL-terminated path; the fd is closed at once.
    match unsafe {
        sys::call(
            sys::OPENAT,
            &[
                AT_FDCWD as usize,
                path.as_ptr() as usize,
                O_RDWR | O_CLOEXEC,
            ],
        )
    } {
        Ok(fd) => {
            close(fd as i32);
            true
        }
        Err(_) => false,
    }
}
