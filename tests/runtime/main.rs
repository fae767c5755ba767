//! Everything that runs code, against the real engine and the offline image: the
//! container runtime, the run-time guard, the adversarial corpus, the MCP server in
//! process and as a binary, and third-party MCP clients driving it. One test binary for
//! all of it, so the library is linked once; its harness (tests/common/harness.rs)
//! reports a test whose engine is missing as ignored, never as passed.

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod audit;
mod certificates;
mod e2e_clients;
mod egress;
mod export_attacks;
mod guard;
mod http_clients;
mod mcp_binary;
mod mcp_server;
mod network;
mod ordinary;
mod outputs;
mod packages;
mod privacy;
mod sandbox;
mod sandbox_lifecycle;
mod secrets;
mod sessions;
mod supervisor;
mod tools_list;
mod transport;

fn main() -> std::process::ExitCode {
    // What the servers of these tests learn of their images is kept under target/,
    // not in the user's own cache (set before any thread starts).
    std::env::set_var(
        code_sandbox_mcp::sandbox::environment_cache::CACHE_DIR_VAR,
        common::root().join("target/test-cache"),
    );
    common::harness::main(
        "tests/runtime",
        &[
            attacks::tests,
            audit::tests,
            certificates::tests,
            e2e_clients::tests,
            export_attacks::tests,
            egress::tests,
            guard::tests,
            http_clients::tests,
            mcp_binary::tests,
            mcp_server::tests,
            network::tests,
            ordinary::tests,
            outputs::tests,
            packages::tests,
            privacy::tests,
            sandbox::tests,
            sandbox_lifecycle::tests,
            secrets::tests,
            sessions::tests,
            supervisor::tests,
            tools_list::tests,
            transport::tests,
        ],
    )
}
