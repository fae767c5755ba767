//! The `code-sandbox-mcp` binary: parses arguments and hands over to the library.

fn main() -> std::process::ExitCode {
    code_sandbox_mcp::cli::main()
}
