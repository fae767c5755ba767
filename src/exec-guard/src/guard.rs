//! The guard's program: check its arguments, copy the interpreter's path to a page at
//! a random address, install the filter ([`crate::filter`]) naming that address, and
//! `execve` the interpreter, which inherits the filter for its whole life. Every
//! failure ends the process with status 127 and one line on stderr: a guard that
//! cannot install its filter never runs the interpreter without it.
//!
//! The one allowed `execve` is recognised by the address of its path argument: after
//! it the address space is replaced, nothing lives at that address, and the filter's
//! constant cannot be read back by the sandboxed program (reading seccomp filters needs
//! `CAP_SYS_ADMIN`, which no box has). Code that can place bytes at a chosen address
//! (native code: ctypes, addons, which the run-time rules deny) would still have to
//! guess about 2^40 addresses, each guess a syscall.

use crate::filter::Filter;
use crate::sys;

const PR_SET_NO_NEW_PRIVS: usize = 38;
const SECCOMP_SET_MODE_FILTER: usize = 1;
const SECCOMP_FILTER_FLAG_TSYNC: usize = 1;

const PROT_READ: usize = 1;
const PROT_WRITE: usize = 2;
const MAP_PRIVATE: usize = 0x02;
const MAP_ANONYMOUS: usize = 0x20;
/// MAP_FIXED_NOREPLACE: the random address, or failure (never a clobbered mapping).
const MAP_FIXED_NOREPLACE: usize = 0x10_0000;
const PAGE: usize = 4096;
/// The longest interpreter path taken.
const MAX_PATH: usize = 2048;

/// `struct sock_fprog`.
#[repr(C)]
struct Program {
    len: u16,
    filter: *const crate::filter::Insn,
}

fn syscall(nr: usize, args: &[usize]) -> isize {
    let mut a = [0usize; 6];
    for (slot, arg) in a.iter_mut().zip(args) {
        *slot = *arg;
    }
    // SAFETY: every caller in this module passes the number and arguments of the
    // system call it names, with pointers to memory it owns for the call's duration.
    unsafe { sys::syscall6(nr, a) }
}

fn write_err(message: &[u8]) {
    syscall(sys::WRITE, &[2, message.as_ptr() as usize, message.len()]);
}

/// Says why on stderr and exits 127.
pub fn die(message: &[u8]) -> ! {
    write_err(b"exec-guard: ");
    write_err(message);
    write_err(b"\n");
    loop {
        syscall(sys::EXIT_GROUP, &[127]);
    }
}

/// Random bytes from the kernel, or death: a predictable address is worth nothing.
fn random_word() -> usize {
    let mut word: usize = 0;
    let size = core::mem::size_of::<usize>();
    let got = syscall(sys::GETRANDOM, &[&mut word as *mut usize as usize, size, 0]);
    if got != size as isize {
        die(b"getrandom failed");
    }
    word
}

/// A fresh page at a random address in the lower part of the user address space,
/// where neither the kernel's nor the loader's own placement puts anything.
fn random_page() -> usize {
    for _ in 0..32 {
        let wanted = (0x1000_0000_0000 + (random_word() % 0x4000_0000_0000)) & !(PAGE - 1);
        let got = syscall(
            sys::MMAP,
            &[
                wanted,
                PAGE,
                PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                usize::MAX, // fd -1
                0,
            ],
        );
        if got as usize == wanted {
            return wanted;
        }
        if got >= 0 {
            // An old kernel took the flag as a hint; give the page back and retry.
            syscall(sys::MUNMAP, &[got as usize, PAGE]);
        }
    }
    die(b"cannot map the exec page")
}

/// The guard: `exec-guard [--floor] /absolute/path/to/program [ARGS...]`.
///
/// # Safety
/// `sp` is the initial stack pointer the kernel set up for the process: argc, argv…,
/// NULL, envp…, NULL, every string NUL-terminated.
pub unsafe fn main(sp: *const usize) -> ! {
    // SAFETY: the layout of the initial stack is the caller's contract: argc first,
    // then argc pointers and a NULL, then the environment.
    let (argc, argv) = unsafe { (*sp, sp.add(1) as *const *const u8) };
    // SAFETY: argv has argc entries and a NULL; envp starts right after it.
    let envp = unsafe { argv.add(argc + 1) };
    // SAFETY: index 1 exists when argc > 1, and is a NUL-terminated string.
    let floor = argc > 1 && unsafe { is(*argv.add(1), b"--floor\0") };
    let first = if floor { 2 } else { 1 };
    if argc <= first {
        die(b"usage: exec-guard [--floor] /absolute/path/to/program [ARGS...]");
    }
    // SAFETY: first < argc, so the entry is one of the arguments.
    let program = unsafe { *argv.add(first) };
    let mut len = 0usize;
    // SAFETY: the argument is NUL-terminated; the loop stops at the NUL (or earlier).
    while unsafe { *program.add(len) } != 0 {
        len += 1;
        if len >= MAX_PATH {
            die(b"program path too long");
        }
    }
    // SAFETY: len > 0 was just checked, so the first byte is part of the string.
    if len == 0 || unsafe { *program } != b'/' {
        die(b"the program must be an absolute path");
    }
    let page = random_page();
    let slots = (PAGE - MAX_PATH) / 8;
    let path = (page + (random_word() % slots) * 8) as *mut u8;
    for i in 0..=len {
        // SAFETY: `path` has at least MAX_PATH bytes of the fresh page after it, and
        // len < MAX_PATH; `program` has len + 1 bytes (its NUL included). Volatile, so
        // the copy is not turned into a call to a `memcpy` this binary would then need
        // to be careful about.
        unsafe { core::ptr::write_volatile(path.add(i), core::ptr::read_volatile(program.add(i))) };
    }
    let filter = match Filter::build(floor, path as u64) {
        Ok(filter) => filter,
        Err(_) => die(b"the filter does not build"),
    };
    let insns = filter.instructions();
    let header = Program {
        len: insns.len() as u16,
        filter: insns.as_ptr(),
    };
    if syscall(sys::PRCTL, &[PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0]) != 0 {
        die(b"prctl(PR_SET_NO_NEW_PRIVS) failed");
    }
    let installed = syscall(
        sys::SECCOMP,
        &[
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_TSYNC,
            &header as *const Program as usize,
        ],
    );
    if installed != 0 {
        die(b"seccomp(SECCOMP_SET_MODE_FILTER) failed: is seccomp allowed here?");
    }
    // SAFETY: argv + first is inside the argument vector, which ends in its NULL.
    let args = unsafe { argv.add(first) };
    syscall(
        sys::EXECVE as usize,
        &[path as usize, args as usize, envp as usize],
    );
    die(b"cannot execute the program (missing, or not executable?)")
}

/// True when the NUL-terminated `arg` equals `expected` (which ends in NUL).
///
/// # Safety
/// `arg` points to a NUL-terminated string.
unsafe fn is(arg: *const u8, expected: &[u8]) -> bool {
    for (i, &byte) in expected.iter().enumerate() {
        // SAFETY: the comparison stops at the first difference, and `expected` ends in
        // NUL, so no byte past `arg`'s own NUL is read.
        if unsafe { *arg.add(i) } != byte {
            return false;
        }
    }
    true
}
