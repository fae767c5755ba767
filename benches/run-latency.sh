#!/usr/bin/env bash
# Latency of print(1) through the warm pool (Sandbox::run) against `docker exec` into a
# running container and `docker run --rm`, both through the Docker CLI, then throughput
# with 4 concurrent callers. Prints p50/p95/mean per path.
#
#   benches/run-latency.sh [ITERATIONS]      (default 40)
#
# Starts dockerd and builds the offline image first (scripts/), as the tests do, then
# runs the measuring program, benches/run_latency.rs (`cargo bench --bench run_latency`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/start-docker.sh
bash scripts/build-offline-image.sh >/dev/null

exec cargo bench --quiet --bench run_latency -- "$@"
