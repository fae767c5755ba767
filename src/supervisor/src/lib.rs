//! The supervisor: the small trusted process inside every box, between the server and
//! the program. The box's main process (behind a minimal init), it holds the only
//! channel to the server (the box's attached stdin and stdout, [`wire`]), and starts
//! the interpreter as its child, under the kernel's layers: a seccomp filter
//! ([`filter`]: no process under a policy that denies them, no signal to the
//! supervisor, the call channel handed over) and Landlock ([`landlock`]: writes only to
//! the sandbox's folders, nothing under /proc). It is not dumpable, so the program (the
//! same user) can neither trace it, read or write its memory, nor take its fds; the
//! filter keeps the program from signalling it. The interpreter's output, the kernel's
//! refusals (seccomp user notification, [`notify`]), the files the run left
//! ([`files`]) and how it ended reach the server in the supervisor's frames only.
//!
//! No dependencies, std only: the main crate's build script compiles it with `rustc`
//! as a static binary and embeds it, so it needs nothing in the image. The
//! [`wire`] module is plain Rust, built and tested on any host (the server uses it);
//! the rest is built for Linux on x86-64 and aarch64 only, where its unit tests run.

pub mod wire;

/// The items it wraps, compiled only where the supervisor runs: Linux on x86-64 or
/// aarch64 (the system call numbers and the seccomp filter are written for those).
macro_rules! where_it_runs {
    ($($item:item)*) => {
        $(
            #[cfg(all(
                target_os = "linux",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            $item
        )*
    };
}

where_it_runs! {
    pub mod child;
    pub mod files;
    pub mod filter;
    pub mod io;
    pub mod landlock;
    pub mod notify;
    pub mod relay;
    pub mod settings;
    pub mod supervise;
    pub mod sys;
}
