//! The command line as a user runs it: `check`, `run`, `policy` and `image` through the
//! real binary, policy files as projects write them, what the dependency tree may
//! hold, and the documentation (links, the generated CLI reference, the README).
//! One test binary for all of it, so the library is linked once; its harness
//! (tests/common/harness.rs) reports a test whose engine is missing as ignored.

#[path = "../common/mod.rs"]
mod common;

mod check;
mod dependencies;
mod docs;
mod http_oauth;
mod http_serve;
mod http_tls;
mod image;
mod limits;
mod policy_cmd;
mod policy_files;
mod run;

fn main() -> std::process::ExitCode {
    common::harness::main(
        "tests/cli",
        &[
            check::tests,
            dependencies::tests,
            docs::tests,
            http_oauth::tests,
            http_serve::tests,
            http_tls::tests,
            image::tests,
            policy_cmd::tests,
            limits::tests,
            policy_files::tests,
            run::tests,
        ],
    )
}
