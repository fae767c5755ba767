//! The Linux system calls the supervisor makes that the standard library does not
//! wrap (seccomp, Landlock, pidfds, raw `fork`, `ioctl`s on the notification fd), their
//! numbers for the two architectures it is built for, and the raw call itself. No libc
//! crate: the supervisor has no dependencies, so that the build script can compile it
//! with `rustc` alone.

#![allow(missing_docs)]

/// The numbers that differ between the architectures.
#[cfg(target_arch = "x86_64")]
mod arch {
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const CLOSE: u32 = 3;
    pub const PPOLL: u32 = 271;
    pub const LSEEK: u32 = 8;
    pub const IOCTL: u32 = 16;
    pub const PREAD64: u32 = 17;
    pub const DUP3: u32 = 292;
    pub const PIPE2: u32 = 293;
    pub const SOCKETPAIR: u32 = 53;
    pub const SENDMSG: u32 = 46;
    pub const RECVMSG: u32 = 47;
    pub const CLONE: u32 = 56;
    pub const FORK: u32 = 57;
    pub const VFORK: u32 = 58;
    pub const EXECVE: u32 = 59;
    pub const EXIT: u32 = 60;
    pub const WAIT4: u32 = 61;
    pub const KILL: u32 = 62;
    pub const SETSID: u32 = 112;
    pub const PRCTL: u32 = 157;
    pub const TKILL: u32 = 200;
    pub const EXIT_GROUP: u32 = 231;
    pub const TGKILL: u32 = 234;
    pub const OPENAT: u32 = 257;
    pub const RT_SIGQUEUEINFO: u32 = 129;
    pub const RT_TGSIGQUEUEINFO: u32 = 297;
    pub const SECCOMP: u32 = 317;
    pub const GETRANDOM: u32 = 318;
    pub const MEMFD_CREATE: u32 = 319;
    pub const EXECVEAT: u32 = 322;
    pub const USERFAULTFD: u32 = 323;
    pub const PERF_EVENT_OPEN: u32 = 298;
    pub const BPF: u32 = 321;
    pub const PTRACE: u32 = 101;
    pub const PROCESS_VM_READV: u32 = 310;
    pub const PROCESS_VM_WRITEV: u32 = 311;
    pub const KEYCTL: u32 = 250;
    pub const ADD_KEY: u32 = 248;
    pub const REQUEST_KEY: u32 = 249;
    /// AUDIT_ARCH_X86_64.
    pub const AUDIT_ARCH: u32 = 0xc000_003e;
    /// Syscall numbers at or above this are the x32 ABI.
    pub const X32_BIT: u32 = 0x4000_0000;

    /// A raw system call with six arguments.
    ///
    /// # Safety
    /// `nr` and `a` must be a system call and arguments that are valid to make in the
    /// calling process (pointers to live memory of the sizes the call expects).
    pub unsafe fn syscall6(nr: usize, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the x86-64 Linux syscall convention: number in rax, arguments in
        // rdi, rsi, rdx, r10, r8, r9; the kernel clobbers rcx and r11. What the call
        // does with its arguments is the caller's contract.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
                in("r10") a[3], in("r8") a[4], in("r9") a[5],
                lateout("rcx") _, lateout("r11") _,
                options(nostack)
            )
        };
        ret
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    pub const READ: u32 = 63;
    pub const WRITE: u32 = 64;
    pub const CLOSE: u32 = 57;
    pub const PPOLL: u32 = 73;
    pub const LSEEK: u32 = 62;
    pub const IOCTL: u32 = 29;
    pub const PREAD64: u32 = 67;
    pub const DUP3: u32 = 24;
    pub const PIPE2: u32 = 59;
    pub const SOCKETPAIR: u32 = 199;
    pub const SENDMSG: u32 = 211;
    pub const RECVMSG: u32 = 212;
    pub const CLONE: u32 = 220;
    /// aarch64 has no fork or vfork system calls; these numbers are never used there.
    pub const FORK: u32 = u32::MAX;
    pub const VFORK: u32 = u32::MAX;
    pub const EXECVE: u32 = 221;
    pub const EXIT: u32 = 93;
    pub const WAIT4: u32 = 260;
    pub const KILL: u32 = 129;
    pub const SETSID: u32 = 157;
    pub const PRCTL: u32 = 167;
    pub const TKILL: u32 = 130;
    pub const EXIT_GROUP: u32 = 94;
    pub const TGKILL: u32 = 131;
    pub const OPENAT: u32 = 56;
    pub const RT_SIGQUEUEINFO: u32 = 138;
    pub const RT_TGSIGQUEUEINFO: u32 = 240;
    pub const SECCOMP: u32 = 277;
    pub const GETRANDOM: u32 = 278;
    pub const MEMFD_CREATE: u32 = 279;
    pub const EXECVEAT: u32 = 281;
    pub const USERFAULTFD: u32 = 282;
    pub const PERF_EVENT_OPEN: u32 = 241;
    pub const BPF: u32 = 280;
    pub const PTRACE: u32 = 117;
    pub const PROCESS_VM_READV: u32 = 270;
    pub const PROCESS_VM_WRITEV: u32 = 271;
    pub const KEYCTL: u32 = 219;
    pub const ADD_KEY: u32 = 217;
    pub const REQUEST_KEY: u32 = 218;
    /// AUDIT_ARCH_AARCH64.
    pub const AUDIT_ARCH: u32 = 0xc000_00b7;
    pub const X32_BIT: u32 = u32::MAX;

    /// A raw system call with six arguments.
    ///
    /// # Safety
    /// `nr` and `a` must be a system call and arguments that are valid to make in the
    /// calling process (pointers to live memory of the sizes the call expects).
    pub unsafe fn syscall6(nr: usize, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the aarch64 Linux syscall convention: number in x8, arguments in
        // x0..x5, result in x0. What the call does with its arguments is the caller's
        // contract.
        unsafe {
            core::arch::asm!(
                "svc 0",
                in("x8") nr,
                inlateout("x0") a[0] as isize => ret,
                in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
                options(nostack)
            )
        };
        ret
    }
}

pub use arch::*;

// The same number on both architectures (the unified table of later calls).
pub const CLONE3: u32 = 435;
pub const IO_URING_SETUP: u32 = 425;
pub const IO_URING_ENTER: u32 = 426;
pub const IO_URING_REGISTER: u32 = 427;
pub const PIDFD_SEND_SIGNAL: u32 = 424;
pub const PIDFD_OPEN: u32 = 434;
pub const PIDFD_GETFD: u32 = 438;
pub const LANDLOCK_CREATE_RULESET: u32 = 444;
pub const LANDLOCK_ADD_RULE: u32 = 445;
pub const LANDLOCK_RESTRICT_SELF: u32 = 446;
pub const OPENAT2: u32 = 437;

/// A failed call's errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const EINTR: Errno = Errno(4);
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const EACCES: Errno = Errno(13);
    pub const EINVAL: Errno = Errno(22);
    pub const ENOSYS: Errno = Errno(38);
    pub const EOPNOTSUPP: Errno = Errno(95);
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl From<Errno> for std::io::Error {
    fn from(errno: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(errno.0)
    }
}

/// A system call: its result, or the errno it failed with.
///
/// # Safety
/// `nr` and `args` must be a system call and arguments that are valid to make in the
/// calling process (pointers to live memory of the sizes the call expects). In a child
/// between `fork` and `execve`, only calls that are async-signal-safe are made this way
/// (all raw system calls are).
pub unsafe fn call(nr: u32, args: &[usize]) -> Result<usize, Errno> {
    let mut a = [0usize; 6];
    for (slot, arg) in a.iter_mut().zip(args) {
        *slot = *arg;
    }
    // SAFETY: the caller's contract above.
    let ret = unsafe { syscall6(nr as usize, a) };
    if (-4095..0).contains(&ret) {
        Err(Errno(-ret as i32))
    } else {
        Ok(ret as usize)
    }
}
