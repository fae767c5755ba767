//! The command line as a user runs it: `check`, `run`, `policy` and `image` through the
//! real binary, policy files as projects write them, and what the dependency tree may
//! hold.
//! One test binary for all of it, so the library is linked once.

#[path = "../common/mod.rs"]
mod common;

mod check;
mod dependencies;
mod http_oauth;
mod http_serve;
mod http_tls;
mod image;
mod policy_files;
mod run;
