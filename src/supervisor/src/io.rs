//! The supervisor's few I/O primitives on raw fds (it has one thread and waits on
//! several fds at once with `ppoll`), and `wait4` for its child.

use crate::sys::{self, Errno};
use crate::wire::Status;
use std::time::Duration;

const O_NONBLOCK: usize = 0o4000;
const F_GETFL: usize = 3;
const F_SETFL: usize = 4;
const FCNTL: u32 = if cfg!(target_arch = "x86_64") { 72 } else { 25 };
/// `POLLIN`.
pub const POLLIN: i16 = 1;
/// `POLLHUP`.
pub const POLLHUP: i16 = 0x10;
/// `POLLERR`.
pub const POLLERR: i16 = 8;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PollFd {
    pub fd: i32,
    pub events: i16,
    pub revents: i16,
}

/// Waits for the child; how it ended.
pub fn wait(pid: u32) -> Status {
    let mut status = 0i32;
    loop {
        // SAFETY: the kernel writes one int.
        match unsafe {
            sys::call(
                sys::WAIT4,
                &[pid as usize, &mut status as *mut i32 as usize, 0, 0],
            )
        } {
            Ok(_) => break,
            Err(Errno::EINTR) => continue,
            Err(_) => return Status::Signaled(9),
        }
    }
    let signal = status & 0x7f;
    if signal == 0 {
        Status::Exited((status >> 8) & 0xff)
    } else {
        Status::Signaled(signal)
    }
}

pub fn watch(fd: i32) -> PollFd {
    PollFd {
        fd,
        events: POLLIN,
        revents: 0,
    }
}

pub fn poll(fds: &mut [PollFd], timeout: Option<Duration>) -> Result<usize, Errno> {
    let spec = timeout.map(|t| [t.as_secs() as i64, i64::from(t.subsec_nanos())]);
    let spec_ptr = spec.as_ref().map_or(0, |s| s.as_ptr() as usize);
    // SAFETY: the kernel reads and writes `fds` (its length given) and reads `spec`.
    unsafe {
        sys::call(
            sys::PPOLL,
            &[fds.as_mut_ptr() as usize, fds.len(), spec_ptr, 0, 0],
        )
    }
}

pub fn read(fd: i32, buffer: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: the kernel writes at most `buffer.len()` bytes into it.
    unsafe {
        sys::call(
            sys::READ,
            &[fd as usize, buffer.as_mut_ptr() as usize, buffer.len()],
        )
    }
}

pub fn write_all(fd: i32, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        // SAFETY: the kernel reads `bytes`.
        match unsafe {
            sys::call(
                sys::WRITE,
                &[fd as usize, bytes.as_ptr() as usize, bytes.len()],
            )
        } {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}

pub fn close(fd: i32) {
    // SAFETY: closing an fd of ours.
    let _ = unsafe { sys::call(sys::CLOSE, &[fd as usize]) };
}

pub fn nonblocking(fd: i32) {
    // SAFETY: fcntl on an fd of ours.
    unsafe {
        if let Ok(flags) = sys::call(FCNTL, &[fd as usize, F_GETFL]) {
            let _ = sys::call(FCNTL, &[fd as usize, F_SETFL, flags | O_NONBLOCK]);
        }
    }
}

/// A memfd holding `bytes`, read from its start.
pub fn memfd(bytes: &[u8]) -> Result<i32, Errno> {
    const MFD_CLOEXEC: usize = 1;
    let name = c"code-sandbox-call";
    // SAFETY: a NUL-terminated name.
    let fd =
        unsafe { sys::call(sys::MEMFD_CREATE, &[name.as_ptr() as usize, MFD_CLOEXEC]) }? as i32;
    if let Err(errno) = write_all(fd, bytes) {
        close(fd);
        return Err(errno);
    }
    // SAFETY: lseek on our own fd.
    unsafe { sys::call(sys::LSEEK, &[fd as usize, 0, 0]) }?;
    Ok(fd)
}
