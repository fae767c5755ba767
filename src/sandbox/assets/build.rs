//! Build script: compiles the `exec-guard` crate (src/exec-guard), the kernel-floor
//! helper, into a freestanding static binary that the crate embeds (`include_bytes!`
//! in `sandbox/assets`). It is built with the same `rustc` and target as the crate, as
//! `no_std` with `panic=abort` whatever the profile says, so it needs no libc in the
//! sandbox image and nothing beyond the toolchain here: first its library, then its
//! entry point linked against it. Where the target has no guard (not Linux on x86-64
//! or aarch64), an empty file stands in and a policy that needs the kernel floor
//! refuses to run code.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const CRATE: &str = "src/exec-guard/src";

fn main() {
    for file in ["lib.rs", "main.rs", "filter.rs", "guard.rs", "sys.rs"] {
        println!("cargo:rerun-if-changed={CRATE}/{file}");
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join("exec-guard");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || !(arch == "x86_64" || arch == "aarch64") {
        std::fs::write(&dest, b"").expect("write the empty guard");
        println!("cargo:warning=no exec-guard for {arch}-{os}: policies that deny starting processes cannot run code");
        return;
    }
    let library = out.join("libexec_guard.rlib");
    let mut lib = rustc(&out);
    lib.args(["--crate-type", "rlib", "--crate-name", "exec_guard"])
        .arg("-o")
        .arg(&library)
        .arg(format!("{CRATE}/lib.rs"));
    run(lib, "the exec-guard library");
    let mut bin = rustc(&out);
    bin.args(["--crate-type", "bin", "--crate-name", "exec_guard_bin"])
        .args(["-C", "strip=symbols", "-C", "relocation-model=static"])
        .args(["-C", "link-arg=-nostartfiles", "-C", "link-arg=-nostdlib"])
        .args(["-C", "link-arg=-static"])
        .arg("--extern")
        .arg(format!("exec_guard={}", library.display()));
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        bin.args(["-C", &format!("linker={linker}")]);
    }
    bin.arg("-o").arg(&dest).arg(format!("{CRATE}/main.rs"));
    run(bin, "the exec-guard binary");
}

/// rustc with the settings both steps share: the crate's target, no unwinding, small.
fn rustc(out: &Path) -> Command {
    let mut command = Command::new(env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
    command
        .args(["--edition", "2021"])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=s",
            "-C",
            "debuginfo=0",
        ])
        .arg("-L")
        .arg(out);
    if let Ok(target) = env::var("TARGET") {
        command.args(["--target", &target]);
    }
    command
}

fn run(mut command: Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run rustc for {what}: {error}"));
    if !output.status.success() {
        panic!(
            "building {what} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
