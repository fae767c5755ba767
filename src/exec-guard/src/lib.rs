//! `exec-guard`: the kernel floor of code-sandbox-mcp's boxes. A tiny static program
//! the box runs in place of the interpreter: it installs a seccomp filter on itself and
//! then `execve`s the interpreter, which inherits the filter for its whole life. Under
//! a policy that denies starting processes (`--floor`), no process in the run can start
//! another program or process from then on; whatever the policy, a few calls that are
//! routes around syscall filtering (io_uring, userfaultfd, bpf, ptrace…) are refused.
//!
//! No libc: the binary is freestanding (`main.rs` is its entry point: `_start`, the
//! panic handler and the memory functions the compiler may call), so the image's libc
//! version never matters. It is built by the main crate's build script with the same
//! `rustc` and target, as a static `no_std` binary, and embedded there. This library
//! holds everything else: the filter ([`filter`], pure, tested on the host by running
//! it on an interpreter of the tests' own), the syscall numbers ([`sys`]) and the
//! guard's program ([`guard`]). It is the project's only `unsafe` code: raw system
//! calls need it, and every block says why it is sound.

#![cfg_attr(not(test), no_std)]

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod filter;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod guard;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod sys;
