#!/usr/bin/env bash
# What ending TLS at the egress proxy costs (secrets): HTTPS requests from a sandbox to
# a host with a secret (intercepted, the placeholder swapped) against a host without
# (a plain tunnel), each with a new connection per request and kept alive. Prints
# p50/p95/mean per path.
#
#   benches/egress-tls.sh [ITERATIONS]      (default 100)
#
# Starts dockerd and builds the offline and the Python library image first, then runs
# the measuring program, benches/egress_tls.rs (`cargo bench --bench egress_tls`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/start-docker.sh
bash scripts/build-offline-image.sh >/dev/null
cargo build --quiet --locked
target/debug/code-sandbox-mcp image build --base code-sandbox-mcp-runtime:trixie python >/dev/null

exec cargo bench --quiet --bench egress_tls -- "$@"
