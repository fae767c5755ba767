//! Seccomp user notification: the calls the filter ([`crate::filter`]) hands to the
//! supervisor arrive here, and the supervisor answers each one: a refusal with an
//! errno, a call let through as it was (`CONTINUE`, only where the decision does not
//! depend on memory the program could change meanwhile), or a file descriptor put into
//! the program's table as the call's result (`ADDFD` with `SEND`).

use crate::sys::{self, Errno};

/// `struct seccomp_data`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Data {
    pub nr: i32,
    pub arch: u32,
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

/// `struct seccomp_notif`: one call waiting for the supervisor's answer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Notification {
    pub id: u64,
    /// The calling thread's id (in the supervisor's pid namespace).
    pub pid: u32,
    pub flags: u32,
    pub data: Data,
}

#[repr(C)]
struct Response {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

#[repr(C)]
struct AddFd {
    id: u64,
    flags: u32,
    srcfd: u32,
    newfd: u32,
    newfd_flags: u32,
}

const IOCTL_RECV: usize = 0xc050_2100;
const IOCTL_SEND: usize = 0xc018_2101;
const IOCTL_ID_VALID: usize = 0x4008_2102;
const IOCTL_ADDFD: usize = 0x4018_2103;
const ADDFD_FLAG_SEND: u32 = 1 << 1;
const FLAG_CONTINUE: u32 = 1;
const O_CLOEXEC: u32 = 0o2000000;
/// `SECCOMP_GET_NOTIF_SIZES`.
const GET_NOTIF_SIZES: usize = 3;

/// Whether this kernel has user notification (gVisor's does not).
pub fn available() -> bool {
    let mut sizes = [0u16; 3];
    // SAFETY: the kernel writes three u16s into `sizes`.
    unsafe {
        sys::call(
            sys::SECCOMP,
            &[GET_NOTIF_SIZES, 0, sizes.as_mut_ptr() as usize],
        )
    }
    .is_ok()
        && usize::from(sizes[0]) >= std::mem::size_of::<Notification>()
}

/// The listener: the fd the filter's installation returned.
pub struct Listener {
    pub fd: i32,
}

impl Listener {
    /// The next pending call (the fd is readable, so this does not block for long).
    pub fn receive(&self) -> Result<Notification, Errno> {
        // The kernel wants a zeroed structure.
        let mut notification = Notification::default();
        // SAFETY: the kernel fills `notification`, which is as large as it says.
        unsafe {
            sys::call(
                sys::IOCTL,
                &[
                    self.fd as usize,
                    IOCTL_RECV,
                    &mut notification as *mut Notification as usize,
                ],
            )
        }?;
        Ok(notification)
    }

    /// Whether the call `id` still waits (its thread was not interrupted or killed).
    pub fn still_waiting(&self, id: u64) -> bool {
        // SAFETY: the kernel reads one u64.
        unsafe {
            sys::call(
                sys::IOCTL,
                &[self.fd as usize, IOCTL_ID_VALID, &id as *const u64 as usize],
            )
        }
        .is_ok()
    }

    /// Lets the call `id` proceed as if no filter had stopped it
    /// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Only for a call whose arguments the
    /// supervisor does not judge: the process may change them before the kernel reads
    /// them (`exit_group`'s status is a register, copied with the notification).
    pub fn proceed(&self, id: u64) -> Result<(), Errno> {
        self.send(Response {
            id,
            val: 0,
            error: 0,
            flags: FLAG_CONTINUE,
        })
    }

    /// Fails the call `id` with `errno`.
    pub fn refuse(&self, id: u64, errno: i32) -> Result<(), Errno> {
        self.send(Response {
            id,
            val: 0,
            error: -errno,
            flags: 0,
        })
    }

    /// Puts `fd` into the calling process's table (close-on-exec) and makes its number
    /// the call's result.
    pub fn answer_with_fd(&self, id: u64, fd: i32) -> Result<i32, Errno> {
        let add = AddFd {
            id,
            flags: ADDFD_FLAG_SEND,
            srcfd: fd as u32,
            newfd: 0,
            newfd_flags: O_CLOEXEC,
        };
        // SAFETY: the kernel reads `add`.
        unsafe {
            sys::call(
                sys::IOCTL,
                &[self.fd as usize, IOCTL_ADDFD, &add as *const AddFd as usize],
            )
        }
        .map(|new| new as i32)
    }

    fn send(&self, response: Response) -> Result<(), Errno> {
        // SAFETY: the kernel reads `response`.
        unsafe {
            sys::call(
                sys::IOCTL,
                &[
                    self.fd as usize,
                    IOCTL_SEND,
                    &response as *const Response as usize,
                ],
            )
        }
        .map(|_| ())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // SAFETY: closing our own fd.
        let _ = unsafe { sys::call(sys::CLOSE, &[self.fd as usize]) };
    }
}

/// A NUL-terminated string at `address` in thread `tid`'s memory (at most `max`
/// bytes), for a report: the program may change it the moment after, which matters
/// not, since the call it names is refused either way.
pub fn read_string(tid: u32, address: u64, max: usize) -> String {
    use std::os::unix::fs::FileExt;
    let Ok(memory) = std::fs::File::open(format!("/proc/{tid}/mem")) else {
        return format!("<at {address:#x}>");
    };
    let mut buffer = vec![0u8; max];
    let Ok(read) = memory.read_at(&mut buffer, address) else {
        return format!("<at {address:#x}>");
    };
    buffer.truncate(read);
    if let Some(end) = buffer.iter().position(|&b| b == 0) {
        buffer.truncate(end);
    }
    String::from_utf8_lossy(&buffer).into_owned()
}
