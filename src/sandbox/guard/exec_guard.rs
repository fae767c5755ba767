//! `exec-guard`: the kernel floor under `process-exec: deny`. A tiny static program the
//! sandbox runs in place of the interpreter: it installs a seccomp filter on itself and
//! then `execve`s the interpreter, which inherits the filter for its whole life. From
//! then on no process in the run can start another program or process:
//!
//! - `fork`, `vfork`, and `clone` without `CLONE_THREAD` fail with `EPERM` (threads
//!   still work); `clone3` fails with `ENOSYS`, so libc falls back to `clone`, whose
//!   flags a classic BPF filter can read (`clone3` hides them behind a pointer);
//! - `execveat` fails with `EPERM` (that covers `fexecve` of a `memfd_create` file);
//! - `execve` fails with `EPERM` unless its path argument is the exact address of the
//!   interpreter's path in this program's memory: a page mapped at a random address
//!   (from `getrandom`) at a random offset. That lets this program's own `execve`
//!   through once; after it the address space is replaced, nothing lives at that
//!   address, and the filter's constant cannot be read back by the sandboxed program
//!   (reading seccomp filters needs `CAP_SYS_ADMIN`, which no sandbox has). Code that
//!   can place bytes at a chosen address (native code: ctypes, addons, which layer 2
//!   denies) would still have to guess about 2^40 addresses, each guess a syscall.
//!
//! `no_new_privs` is set first (the kernel requires it for an unprivileged filter).
//! Syscalls of another ABI (x32 on x86-64) are refused, so numbers cannot be aliased.
//!
//! Built by `build.rs` with the crate's own `rustc` as a freestanding static binary (no
//! libc: the interpreter image's libc version never matters). It is the project's only
//! `unsafe` code: raw system calls need it. Usage: `exec-guard /abs/path/interp ARGS…`.

#![no_std]
#![no_main]

use core::arch::global_asm;

#[cfg(target_arch = "x86_64")]
mod sys {
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

    pub unsafe fn syscall6(nr: usize, a: [usize; 6]) -> isize {
        let ret: isize;
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack)
        );
        ret
    }
}

#[cfg(target_arch = "aarch64")]
mod sys {
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

    pub unsafe fn syscall6(nr: usize, a: [usize; 6]) -> isize {
        let ret: isize;
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack)
        );
        ret
    }
}

#[cfg(target_arch = "x86_64")]
global_asm!(
    ".globl _start",
    "_start:",
    "xor rbp, rbp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call guard_main",
    "ud2",
);

#[cfg(target_arch = "aarch64")]
global_asm!(
    ".globl _start",
    "_start:",
    "mov x0, sp",
    "bl guard_main",
    "brk #0",
);

const PR_SET_NO_NEW_PRIVS: usize = 38;
const SECCOMP_SET_MODE_FILTER: usize = 1;
const SECCOMP_FILTER_FLAG_TSYNC: usize = 1;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;
const CLONE_THREAD: u32 = 0x0001_0000;

const PROT_READ: usize = 1;
const PROT_WRITE: usize = 2;
const MAP_PRIVATE: usize = 0x02;
const MAP_ANONYMOUS: usize = 0x20;
/// MAP_FIXED_NOREPLACE: the random address, or failure (never a clobbered mapping).
const MAP_FIXED_NOREPLACE: usize = 0x10_0000;
const PAGE: usize = 4096;

// Classic BPF opcodes.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

// Offsets in `struct seccomp_data`: nr, arch, instruction pointer, args[6] (u64 each,
// little-endian on both architectures: the low word first).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LO: u32 = 16;
const ARG0_HI: u32 = 20;

#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct Program {
    len: u16,
    filter: *const Insn,
}

const fn stmt(code: u16, k: u32) -> Insn {
    Insn { code, jt: 0, jf: 0, k }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// Where a jump goes; resolved to relative offsets once the program is laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    Allow,
    Eperm,
    Enosys,
    Clone,
    Exec,
}

/// A filter program under construction: at most 64 instructions.
struct Builder {
    insns: [Insn; 64],
    /// Per instruction: the symbolic targets of a conditional jump (true, false).
    targets: [(To, To); 64],
    len: usize,
    labels: [usize; 6],
}

impl Builder {
    fn new() -> Builder {
        Builder {
            insns: [stmt(0, 0); 64],
            targets: [(To::Next, To::Next); 64],
            len: 0,
            labels: [0; 6],
        }
    }

    fn push(&mut self, insn: Insn, targets: (To, To)) {
        if self.len == self.insns.len() {
            die(b"filter too long");
        }
        self.insns[self.len] = insn;
        self.targets[self.len] = targets;
        self.len += 1;
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.push(stmt(code, k), (To::Next, To::Next));
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) {
        self.push(jump(code, k, 0, 0), (jt, jf));
    }

    fn label(&mut self, at: To) {
        self.labels[at as usize] = self.len;
    }

    /// Fills in the relative offsets; every jump goes forward, as BPF requires.
    fn finish(&mut self) -> &[Insn] {
        for i in 0..self.len {
            let (jt, jf) = self.targets[i];
            if (jt, jf) == (To::Next, To::Next) {
                continue; // a plain statement, or a jump laid out by hand
            }
            let offset = |to: To, labels: &[usize; 6]| -> u8 {
                if to == To::Next {
                    return 0;
                }
                let target = labels[to as usize];
                if target <= i || target - i - 1 > 255 {
                    die(b"bad filter jump");
                }
                (target - i - 1) as u8
            };
            self.insns[i].jt = offset(jt, &self.labels);
            self.insns[i].jf = offset(jf, &self.labels);
        }
        &self.insns[..self.len]
    }
}

/// Calls no sandboxed program needs, refused with `EPERM` whatever the policy: the
/// engine's default profile already refuses most of them; `io_uring_*` it allows in
/// older engines, and it is a route around syscall filtering altogether.
const HARDENING: &[u32] = &[
    sys::IO_URING_SETUP,
    sys::IO_URING_ENTER,
    sys::IO_URING_REGISTER,
    sys::USERFAULTFD,
    sys::PERF_EVENT_OPEN,
    sys::BPF,
    sys::PTRACE,
    sys::PROCESS_VM_READV,
    sys::PROCESS_VM_WRITEV,
    sys::KEYCTL,
    sys::ADD_KEY,
    sys::REQUEST_KEY,
];

/// The filter: the hardening list always; with `floor`, no fork and no exec but of
/// `path`, the one address this program's own `execve` names.
fn build_filter(builder: &mut Builder, floor: bool, path: usize) {
    let lo = path as u32;
    let hi = ((path as u64) >> 32) as u32;
    builder.stmt(LD_W_ABS, ARCH);
    // Our ABI goes on past the kill; any other is killed.
    builder.push(jump(JEQ_K, sys::AUDIT_ARCH, 1, 0), (To::Next, To::Next));
    builder.stmt(RET_K, SECCOMP_RET_KILL_PROCESS);
    builder.stmt(LD_W_ABS, NR);
    builder.jump(JGE_K, sys::X32_BIT, To::Eperm, To::Next);
    for &nr in HARDENING {
        builder.jump(JEQ_K, nr, To::Eperm, To::Next);
    }
    if floor {
        builder.jump(JEQ_K, sys::EXECVE, To::Exec, To::Next);
        builder.jump(JEQ_K, sys::EXECVEAT, To::Eperm, To::Next);
        builder.jump(JEQ_K, sys::FORK, To::Eperm, To::Next);
        builder.jump(JEQ_K, sys::VFORK, To::Eperm, To::Next);
        builder.jump(JEQ_K, sys::CLONE3, To::Enosys, To::Next);
        builder.jump(JEQ_K, sys::CLONE, To::Clone, To::Next);
    }
    builder.stmt(RET_K, SECCOMP_RET_ALLOW);
    if floor {
        // clone: a thread (CLONE_THREAD in the flags, argument 0) or nothing.
        builder.label(To::Clone);
        builder.stmt(LD_W_ABS, ARG0_LO);
        builder.jump(JSET_K, CLONE_THREAD, To::Allow, To::Eperm);
        // execve: only the one path address.
        builder.label(To::Exec);
        builder.stmt(LD_W_ABS, ARG0_LO);
        builder.jump(JEQ_K, lo, To::Next, To::Eperm);
        builder.stmt(LD_W_ABS, ARG0_HI);
        builder.jump(JEQ_K, hi, To::Allow, To::Eperm);
    }
    builder.label(To::Allow);
    builder.stmt(RET_K, SECCOMP_RET_ALLOW);
    builder.label(To::Eperm);
    builder.stmt(RET_K, SECCOMP_RET_ERRNO | EPERM);
    builder.label(To::Enosys);
    builder.stmt(RET_K, SECCOMP_RET_ERRNO | ENOSYS);
}

fn syscall(nr: usize, args: &[usize]) -> isize {
    let mut a = [0usize; 6];
    let mut i = 0;
    while i < args.len() && i < 6 {
        a[i] = args[i];
        i += 1;
    }
    // SAFETY: the callers pass numbers and arguments of the system calls they name.
    unsafe { sys::syscall6(nr, a) }
}

fn write_err(message: &[u8]) {
    syscall(sys::WRITE, &[2, message.as_ptr() as usize, message.len()]);
}

fn die(message: &[u8]) -> ! {
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
    let got = syscall(
        sys::GETRANDOM,
        &[&mut word as *mut usize as usize, core::mem::size_of::<usize>(), 0],
    );
    if got != core::mem::size_of::<usize>() as isize {
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

/// # Safety
/// `sp` is the initial stack pointer the kernel set up: argc, argv…, NULL, envp…, NULL.
#[no_mangle]
unsafe extern "C" fn guard_main(sp: *const usize) -> ! {
    let argc = *sp;
    let argv = sp.add(1) as *const *const u8;
    let envp = argv.add(argc + 1);
    let mut first = 1;
    let floor = argc > 1 && is(*argv.add(1), b"--floor\0");
    if floor {
        first = 2;
    }
    if argc <= first {
        die(b"usage: exec-guard [--floor] /absolute/path/to/program [ARGS...]");
    }
    let program = *argv.add(first);
    let mut len = 0usize;
    while *program.add(len) != 0 {
        len += 1;
        if len >= 2048 {
            die(b"program path too long");
        }
    }
    if len == 0 || *program != b'/' {
        die(b"the program must be an absolute path");
    }
    let page = random_page();
    let slots = (PAGE - 2048) / 8;
    let path = (page + (random_word() % slots) * 8) as *mut u8;
    for i in 0..=len {
        core::ptr::write_volatile(path.add(i), core::ptr::read_volatile(program.add(i)));
    }
    let mut builder = Builder::new();
    build_filter(&mut builder, floor, path as usize);
    let insns = builder.finish();
    let program_header = Program {
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
            &program_header as *const Program as usize,
        ],
    );
    if installed != 0 {
        die(b"seccomp(SECCOMP_SET_MODE_FILTER) failed: is seccomp allowed here?");
    }
    let err = syscall(
        sys::EXECVE as usize,
        &[path as usize, argv.add(first) as usize, envp as usize],
    );
    let _ = err;
    die(b"cannot execute the program (missing, or not executable?)")
}

/// True when the NUL-terminated `arg` equals `expected` (which ends in NUL).
unsafe fn is(arg: *const u8, expected: &[u8]) -> bool {
    for (i, &byte) in expected.iter().enumerate() {
        if *arg.add(i) != byte {
            return false;
        }
    }
    true
}

/// The precompiled `core` names an unwinding personality routine even under
/// `panic=abort`; nothing here unwinds, so it is never called.
#[no_mangle]
extern "C" fn rust_eh_personality() {}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    die(b"internal error")
}

// Freestanding: the compiler may call these for copies; volatile accesses keep the
// loops from being turned back into calls to themselves.

/// # Safety
/// The usual `memcpy` contract.
#[no_mangle]
unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    for i in 0..n {
        core::ptr::write_volatile(dest.add(i), core::ptr::read_volatile(src.add(i)));
    }
    dest
}

/// # Safety
/// The usual `memmove` contract.
#[no_mangle]
unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dest as usize) < (src as usize) {
        memcpy(dest, src, n)
    } else {
        let mut i = n;
        while i > 0 {
            i -= 1;
            core::ptr::write_volatile(dest.add(i), core::ptr::read_volatile(src.add(i)));
        }
        dest
    }
}

/// # Safety
/// The usual `memset` contract.
#[no_mangle]
unsafe extern "C" fn memset(dest: *mut u8, value: i32, n: usize) -> *mut u8 {
    for i in 0..n {
        core::ptr::write_volatile(dest.add(i), value as u8);
    }
    dest
}

/// # Safety
/// The usual `memcmp` contract.
#[no_mangle]
unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        let (x, y) = (core::ptr::read_volatile(a.add(i)), core::ptr::read_volatile(b.add(i)));
        if x != y {
            return x as i32 - y as i32;
        }
    }
    0
}
