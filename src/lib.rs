//! code-sandbox-mcp: check a snippet against a project's policy, then run it in a
//! hardened, warm container, and serve both over MCP.
//!
//! The pipeline is `analysis` (source → facts) → `policy` (facts → findings and a
//! verdict) → `sandbox` (allowed code → a result), with `mcp` and `cli` on top.

pub mod analysis;
pub mod cli;
pub mod digest;
pub mod mcp;
pub mod policy;
pub mod sandbox;
