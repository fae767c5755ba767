//! The Linux system call numbers (and audit architecture) the guard and its filter
//! use, for the two architectures it is built for, and the raw system call.

#![allow(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod arch {
    pub const WRITE: usize = 1;
    pub const MMAP: usize = 9;
    pub const MUNMAP: usize = 11;
    pub const CLONE: u32 = 56;
    pub const FORK: u32 = 57;
    pub const VFORK: u32 = 58;
    pub const EXECVE: u32 = 59;
    pub const PRCTL: usize = 157;
    pub const EXIT_GROUP: usize = 231;
    pub const SECCOMP: usize = 317;
    pub const GETRANDOM: usize = 318;
    pub const EXECVEAT: u32 = 322;
    pub const CLONE3: u32 = 435;
    pub const IO_URING_SETUP: u32 = 425;
    pub const IO_URING_ENTER: u32 = 426;
    pub const IO_URING_REGISTER: u32 = 427;
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
    pub const WRITE: usize = 64;
    pub const MMAP: usize = 222;
    pub const MUNMAP: usize = 215;
    pub const CLONE: u32 = 220;
    /// aarch64 has no fork or vfork system calls; these numbers are never used there.
    pub const FORK: u32 = u32::MAX;
    pub const VFORK: u32 = u32::MAX;
    pub const EXECVE: u32 = 221;
    pub const PRCTL: usize = 167;
    pub const EXIT_GROUP: usize = 94;
    pub const SECCOMP: usize = 277;
    pub const GETRANDOM: usize = 278;
    pub const EXECVEAT: u32 = 281;
    pub const CLONE3: u32 = 435;
    pub const IO_URING_SETUP: u32 = 425;
    pub const IO_URING_ENTER: u32 = 426;
    pub const IO_URING_REGISTER: u32 = 427;
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
