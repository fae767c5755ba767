//! The entry point of the freestanding `exec-guard` binary: `_start` hands the initial
//! stack to [`exec_guard::guard::main`]. Also what a binary without libc must bring:
//! the panic handler and the memory functions the compiler may call. Built by the main
//! crate's build script only (see `lib.rs`).

#![no_std]
#![no_main]

use core::arch::global_asm;

#[cfg(target_arch = "x86_64")]
global_asm!(
    ".globl _start",
    "_start:",
    "xor rbp, rbp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call guard_start",
    "ud2",
);

#[cfg(target_arch = "aarch64")]
global_asm!(
    ".globl _start",
    "_start:",
    "mov x0, sp",
    "bl guard_start",
    "brk #0",
);

/// Called by `_start` with the initial stack pointer.
///
/// # Safety
/// `sp` is the initial stack pointer the kernel set up.
#[no_mangle]
unsafe extern "C" fn guard_start(sp: *const usize) -> ! {
    // SAFETY: `_start` passes the kernel's initial stack pointer unchanged.
    unsafe { exec_guard::guard::main(sp) }
}

/// The precompiled `core` names an unwinding personality routine even under
/// `panic=abort`; nothing here unwinds, so it is never called.
#[no_mangle]
extern "C" fn rust_eh_personality() {}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    exec_guard::guard::die(b"internal error")
}

// Freestanding: the compiler may call these for copies; volatile accesses keep the
// loops from being turned back into calls to themselves.

/// # Safety
/// The usual `memcpy` contract.
#[no_mangle]
unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: the caller guarantees n valid bytes at both, not overlapping.
        unsafe { core::ptr::write_volatile(dest.add(i), core::ptr::read_volatile(src.add(i))) };
    }
    dest
}

/// # Safety
/// The usual `memmove` contract.
#[no_mangle]
unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dest as usize) < (src as usize) {
        // SAFETY: copying forwards is right when dest is below src.
        unsafe { memcpy(dest, src, n) }
    } else {
        let mut i = n;
        while i > 0 {
            i -= 1;
            // SAFETY: the caller guarantees n valid bytes at both; backwards is right
            // when dest is above src.
            unsafe {
                core::ptr::write_volatile(dest.add(i), core::ptr::read_volatile(src.add(i)))
            };
        }
        dest
    }
}

/// # Safety
/// The usual `memset` contract.
#[no_mangle]
unsafe extern "C" fn memset(dest: *mut u8, value: i32, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: the caller guarantees n writable bytes at dest.
        unsafe { core::ptr::write_volatile(dest.add(i), value as u8) };
    }
    dest
}

/// # Safety
/// The usual `memcmp` contract.
#[no_mangle]
unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: the caller guarantees n readable bytes at both.
        let (x, y) = unsafe { (core::ptr::read_volatile(a.add(i)), core::ptr::read_volatile(b.add(i))) };
        if x != y {
            return x as i32 - y as i32;
        }
    }
    0
}
