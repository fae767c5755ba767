//! The command line as a user runs it: `check`, `run`, `policy` and `image` through the
//! real binary, policy files as projects write them, and what the dependency tree may
//! hold.
//! One test binary for all of it, so the library is linked once; its harness
//! (tests/common/harness.rs) reports a test whose engine is missing as ignored.

#[path = "../common/mod.rs"]
mod common;

mod check;
mod dependencies;
mod image;
mod policy_files;
mod run;

fn main() -> std::process::ExitCode {
    common::harness::main(
        "tests/cli",
        &[
            check::tests,
            dependencies::tests,
            image::tests,
            policy_files::tests,
            run::tests,
        ],
    )
}
