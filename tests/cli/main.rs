//! The command line as a user runs it: `check`, `run`, `policy` and `image` through the
//! real binary, policy files as projects write them, what the dependency tree may
//! hold, and the documentation (links, the generated CLI reference, the README).
//! One test binary for all of it, so the library is linked once.

#[path = "../common/mod.rs"]
mod common;

mod check;
mod dependencies;
mod docs;
mod image;
mod policy_files;
mod run;
