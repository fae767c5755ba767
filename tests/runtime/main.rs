//! Everything that runs code, against the real engine and the offline image: the
//! container runtime, the run-time guard, the adversarial corpus, the MCP server in
//! process and as a binary, and third-party MCP clients driving it. One test binary for
//! all of it, so the library is linked once.

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod audit;
mod e2e_clients;
mod guard;
mod http_clients;
mod mcp_server;
mod network;
mod outputs;
mod packages;
mod sandbox;
mod sessions;
