//! Build script: compiles the supervisor (the `sandbox-supervisor` crate in
//! src/supervisor) into a static binary that the crate embeds (`include_bytes!` in
//! `sandbox/assets`), so that it needs nothing in a box's image: first its library,
//! then its entry point linked against it, with the same `rustc` and target as the
//! crate, `panic=abort`, small, and with the C library linked in (`crt-static`). Where
//! the target has no supervisor (not Linux on x86-64 or aarch64), an empty file stands
//! in, and the server then refuses to run code.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const CRATE: &str = "src/supervisor/src";

fn main() {
    let sources = std::fs::read_dir(CRATE).expect("the supervisor's sources");
    for source in sources.flatten() {
        println!("cargo:rerun-if-changed={}", source.path().display());
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join("sandbox-supervisor");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || !(arch == "x86_64" || arch == "aarch64") {
        std::fs::write(&dest, b"").expect("write the empty supervisor");
        println!("cargo:warning=no supervisor for {arch}-{os}: this build cannot run code");
        return;
    }
    let library = out.join("libsandbox_supervisor.rlib");
    let mut lib = rustc(&out);
    lib.args(["--crate-type", "rlib", "--crate-name", "sandbox_supervisor"])
        .arg("-o")
        .arg(&library)
        .arg(format!("{CRATE}/lib.rs"));
    run(lib, "the supervisor's library");
    let mut bin = rustc(&out);
    bin.args([
        "--crate-type",
        "bin",
        "--crate-name",
        "sandbox_supervisor_bin",
    ])
    .args(["-C", "strip=symbols", "-C", "target-feature=+crt-static"])
    .arg("--extern")
    .arg(format!("sandbox_supervisor={}", library.display()));
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        bin.args(["-C", &format!("linker={linker}")]);
    }
    bin.arg("-o").arg(&dest).arg(format!("{CRATE}/main.rs"));
    run(bin, "the supervisor");
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
        .args(["-C", "target-feature=+crt-static"])
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
