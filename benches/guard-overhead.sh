#!/usr/bin/env bash
# What the run-time layers cost a `print(1)` (Python) and `console.log(1)` (Node) run:
# inside one container of the offline image, the interpreter started bare and started
# the way the default policy starts it (exec-guard --floor, then the audit-hook
# bootstrap or the permission flags and the guard as main module, the program sent on
# stdin), alternately, RUNS times each (default 60). In the server this start is paid
# when a warm container is made, before the call. Timed inside the container, so the engine's exec overhead (the same for both)
# is left out. Prints p50 and p95 in milliseconds, and the difference of the medians.
#
#   benches/guard-overhead.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-60}"

bash scripts/start-docker.sh
bash scripts/build-offline-image.sh >/dev/null
image=code-sandbox-mcp-runtime:trixie
guard_bin=$(ls -t target/debug/build/code-sandbox-mcp-*/out/exec-guard | head -n 1)
dir=$(mktemp -d /tmp/guard-overhead.XXXXXX)
trap 'docker rm -f "$container" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
cp "$guard_bin" src/sandbox/guard/python_guard.py src/sandbox/guard/node_guard.cjs "$dir/"
chmod 0755 "$dir"; chmod 0555 "$dir/exec-guard"; chmod 0444 "$dir"/*.py "$dir"/*.cjs

# The settings the default policy compiles to, from the binary itself.
bin=target/debug/code-sandbox-mcp
cargo build --quiet --bin code-sandbox-mcp
settings_py=$("$bin" policy layers --policy default --settings python)
settings_js=$("$bin" policy layers --policy default --settings javascript)
container=$(docker run -d --network none --user 65534:65534 --read-only \
  --tmpfs /sandbox:rw,exec,size=16m,mode=1777 --tmpfs /tmp:rw,size=16m,mode=1777 \
  -v "$dir:/opt/code-sandbox" -w /sandbox "$image" sleep infinity)
# As the runtime's setup does: the bootstrap's bytecode compiled once, by root.
docker exec -u 0 -w /opt/code-sandbox "$container" python3 -c 'import py_compile; py_compile.compile("python_guard.py", doraise=True)'
docker exec "$container" sh -c 'echo "print(1)" > /sandbox/main.py; echo "console.log(1)" > /sandbox/main.cjs'

docker exec -i -e RUNS="$runs" -e SETTINGS_PY="$settings_py" -e SETTINGS_JS="$settings_js" \
  "$container" python3 - <<'PY'
import os, statistics, subprocess, time
runs = int(os.environ["RUNS"])
g = "/opt/code-sandbox"
node = ["/usr/bin/node"]
commands = {
    "python bare": ["/usr/bin/python3", "-u", "-B", "/sandbox/main.py"],
    # As src/sandbox/guard/mod.rs builds it under the default policy.
    "python guarded": [f"{g}/exec-guard", "--floor", "/usr/bin/python3", "-u", "-B", "-c",
                       f"import sys; sys.path[0] = '{g}'; import python_guard",
                       os.environ["SETTINGS_PY"], "/sandbox/main.py"],
    "node bare": node + ["/sandbox/main.cjs"],
    "node guarded": [f"{g}/exec-guard", "--floor"] + node + [
        # As src/sandbox/guard/mod.rs builds it for Node 20 under the default policy.
        "--experimental-permission", "--disable-warning=ExperimentalWarning",
        "--allow-fs-read=*", "--allow-fs-write=/sandbox", "--allow-fs-write=/tmp",
        "--disallow-code-generation-from-strings", "--allow-worker",
        "--disable-warning=SecurityWarning", "--no-experimental-require-module",
        f"{g}/node_guard.cjs"],
}
# The program as the runtime sends it to a waiting interpreter (src/sandbox/exec.rs).
def program(file, code):
    return b'{"file":"%s","len":%d,"env":{},"end":"bench"}\n' % (file.encode(), len(code)) + code
inputs = {
    "python guarded": program("main.py", b"print(1)\n"),
    "node guarded": program("main.cjs", b"console.log(1)\n"),
}
env = dict(os.environ, CODE_SANDBOX_GUARD=os.environ["SETTINGS_JS"])
times = {name: [] for name in commands}
for name, argv in commands.items():  # warm-up
    out = subprocess.run(argv, capture_output=True, env=env, input=inputs.get(name, b""))
    # The guarded runs end with the end line the runtime waits for (\x1e...).
    stdout, stderr = (stream.split(b"\x1e")[0] for stream in (out.stdout, out.stderr))
    assert stdout.strip() == b"1" and not stderr, (name, out)
for _ in range(runs):
    for name, argv in commands.items():
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                       input=inputs.get(name, b""))
        times[name].append((time.perf_counter() - start) * 1000)
def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]
print(f"{'':16} {'p50 ms':>8} {'p95 ms':>8}   ({runs} runs each, {os.cpu_count()} cpus)")
for name, xs in times.items():
    print(f"{name:16} {p(xs, .5):8.1f} {p(xs, .95):8.1f}")
for lang in ("python", "node"):
    print(f"{lang} guard adds (p50): {p(times[lang + ' guarded'], .5) - p(times[lang + ' bare'], .5):+.1f} ms")
PY
