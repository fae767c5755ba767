//! Build script: compiles `exec_guard.rs`, the kernel-floor helper, into a freestanding
//! static binary that the crate embeds (`include_bytes!`). It is built with the same
//! `rustc` and target as the crate, as `no_std` with `panic=abort` whatever the
//! profile says, so it needs no libc in the sandbox image and nothing beyond the
//! toolchain here. Where the target has no guard (not Linux on x86-64 or aarch64), an
//! empty file stands in and a policy that needs the kernel floor refuses to run code.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "src/sandbox/guard/exec_guard.rs";
    println!("cargo:rerun-if-changed={source}");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join("exec-guard");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || !(arch == "x86_64" || arch == "aarch64") {
        std::fs::write(&dest, b"").expect("write the empty guard");
        println!("cargo:warning=no exec-guard for {arch}-{os}: policies that deny starting processes cannot run code");
        return;
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let mut command = Command::new(rustc);
    command
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "bin",
            "--crate-name",
            "exec_guard",
        ])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=s",
            "-C",
            "debuginfo=0",
        ])
        .args(["-C", "strip=symbols", "-C", "relocation-model=static"])
        .args(["-C", "link-arg=-nostartfiles", "-C", "link-arg=-nostdlib"])
        .args(["-C", "link-arg=-static"]);
    if let Ok(target) = env::var("TARGET") {
        command.args(["--target", &target]);
    }
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        command.args(["-C", &format!("linker={linker}")]);
    }
    command.arg("-o").arg(&dest).arg(source);
    let output = command.output().expect("run rustc for exec-guard");
    if !output.status.success() {
        panic!(
            "building exec-guard failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
