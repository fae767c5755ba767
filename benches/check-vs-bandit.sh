#!/usr/bin/env bash
# Times `code-sandbox-mcp check` against bandit as whole processes on the same 50
# Python files (the fixture corpus), and counts what each flags.
#   benches/check-vs-bandit.sh [RUNS]     (default 20 runs of each)
# Needs: a release build (built here), python3 with venv (bandit is installed into
# target/bench-venv from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"

cargo build --release --quiet
bin=target/release/code-sandbox-mcp

if [ ! -x target/bench-venv/bin/bandit ]; then
  python3 -m venv target/bench-venv
  target/bench-venv/bin/pip install --quiet bandit
fi
bandit=target/bench-venv/bin/bandit

mapfile -t files < <(ls fixtures/python/*.py | sort | head -n 50)
echo "files: ${#files[@]} ($(cat "${files[@]}" | wc -l) lines)"

python3 - "$runs" "$bin" "$bandit" "${files[@]}" <<'PY'
import statistics, subprocess, sys, time
runs, ours, bandit, files = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]

def timed(cmd):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)

ours_median, ours_min = timed([ours, "check", "--policy", "default", *files])
bandit_median, bandit_min = timed([bandit, "-q", "-f", "json", *files])
print(f"code-sandbox-mcp check: median {ours_median:7.1f} ms  (min {ours_min:.1f})")
print(f"bandit:                 median {bandit_median:7.1f} ms  (min {bandit_min:.1f})")
print(f"speed-up: {bandit_median / ours_median:.1f}x")

# What each tool flags: files the fixtures annotate as holding a denial (evasions and
# plain dangerous calls) versus files annotated clean.
import json, re
def annotated(path):
    rules = set()
    for line in open(path, encoding="utf-8"):
        m = re.search(r"#\s*expect:\s*(.*)$", line)
        if m:
            rules |= {r.strip() for r in m.group(1).split(",") if r.strip()}
    return rules
denied = {"process-exec", "dynamic-code", "parse-error"}
ours_out = subprocess.run([ours, "check", "--policy", "default", "--format", "json", *files], capture_output=True, text=True).stdout
ours_flagged = {f["file"] for f in json.loads(ours_out) if f["action"] == "deny"}
bandit_out = subprocess.run([bandit, "-q", "-f", "json", *files], capture_output=True, text=True).stdout
bandit_flagged = {r["filename"] for r in json.loads(bandit_out)["results"]}
dangerous = [f for f in files if annotated(f) & denied]
clean = [f for f in files if not annotated(f)]
print(f"files the policy should deny: {len(dangerous)}; flagged by code-sandbox-mcp: "
      f"{sum(f in ours_flagged for f in dangerous)}, by bandit (any severity): {sum(f in bandit_flagged for f in dangerous)}")
print(f"clean files: {len(clean)}; flagged by code-sandbox-mcp: {sum(f in ours_flagged for f in clean)}, "
      f"by bandit: {sum(f in bandit_flagged for f in clean)}")
PY
