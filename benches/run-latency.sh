#!/usr/bin/env bash
# Latency of print(1) through the warm pool (Sandbox::run) against `docker exec` into a
# running container and `docker run --rm`, both through the Docker CLI, then throughput
# with 4 concurrent callers. Prints p50/p95/mean per path.
#
#   benches/run-latency.sh [ITERATIONS]      (default 40)
#
# Starts dockerd and builds the offline image first (scripts/), as the tests do. The
# measuring program is benches/run_latency.rs: `cargo bench --bench run_latency` when
# Cargo.toml declares it ([[bench]] name = "run_latency", harness = false); otherwise a
# throwaway wrapper crate under target/ builds the same file against this crate, so the
# script works either way.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/start-docker.sh
bash scripts/build-offline-image.sh >/dev/null

if grep -q '^name = "run_latency"' Cargo.toml; then
  exec cargo bench --quiet --bench run_latency -- "$@"
fi

wrapper="${CARGO_TARGET_DIR:-$root/target}/run-latency-bench"
mkdir -p "$wrapper"
version() { # the version Cargo.lock resolved for a dependency
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}
cat >"$wrapper/Cargo.toml" <<EOF
[package]
name = "run-latency-bench"
version = "0.0.0"
edition = "2021"
publish = false

[[bin]]
name = "run_latency"
path = "$root/benches/run_latency.rs"

[dependencies]
code-sandbox-mcp = { path = "$root" }
tokio = { version = "=$(version tokio)", features = ["rt-multi-thread", "macros", "time"] }
tokio-util = "=$(version tokio-util)"
futures-util = "=$(version futures-util)"

[profile.release]
lto = "thin"
codegen-units = 4

[workspace]
EOF
cp Cargo.lock "$wrapper/Cargo.lock"
CODE_SANDBOX_ROOT="$root" cargo run --quiet --release \
  --manifest-path "$wrapper/Cargo.toml" \
  --target-dir "${CARGO_TARGET_DIR:-$root/target}" -- "$@"
