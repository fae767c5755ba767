#!/usr/bin/env python3
"""Latency of a warm `run_python_code` call through MCP, against raw Docker.

Usage: benches/mcp-latency.py [--binary PATH] [--policy FILE] [--runs N]

Measures, with the standard library only (no MCP client library between the clock and
the server):
  mcp          tools/call run_python_code {"code": "print(1)"} over the server's stdio,
               after warm-up calls, so the warm pool is in use: policy check, a fresh
               container, upload, exec, output, removal;
  docker exec  `docker exec CONTAINER python3 -c 'print(1)'` into one already running
               container (the CLI's own start-up included), the floor the issue names;
  docker run   `docker run --rm IMAGE python3 -c 'print(1)'`, a cold container per run,
               for context.
Prints p50 and p95 in milliseconds for each. Needs Docker and the offline image
(scripts/build-offline-image.sh); builds nothing itself: pass a release binary for
numbers worth quoting (cargo build --release).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "code-sandbox-mcp-runtime:local"


def percentile(samples, p):
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[index]


def report(name, samples):
    print(
        f"{name:<12} p50 {percentile(samples, 50):7.1f} ms   p95 {percentile(samples, 95):7.1f} ms"
        f"   mean {statistics.mean(samples):7.1f} ms   n={len(samples)}"
    )


class Server:
    """The binary over stdio, spoken to in JSON-RPC lines."""

    def __init__(self, binary, policy):
        env = dict(os.environ, CODE_SANDBOX_POLICY=policy, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        self.process = subprocess.Popen(
            [binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, bufsize=1
        )
        self.next_id = 1

    def request(self, method, params):
        request_id = self.next_id
        self.next_id += 1
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def notify(self, method):
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.process.stdin.flush()

    def close(self):
        self.process.stdin.close()
        return self.process.wait(timeout=60)


def bench_mcp(binary, policy, runs, warmup):
    server = Server(binary, policy)
    server.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    )
    server.notify("notifications/initialized")
    call = {"name": "run_python_code", "arguments": {"code": "print(1)"}}
    samples = []
    for i in range(warmup + runs):
        started = time.perf_counter()
        response = server.request("tools/call", call)
        elapsed = (time.perf_counter() - started) * 1000
        result = response.get("result", {})
        stdout = result.get("structuredContent", {}).get("stdout")
        if result.get("isError") or stdout != "1\n":
            server.close()
            sys.exit(f"unexpected result: {json.dumps(response)[:800]}")
        if i >= warmup:
            samples.append(elapsed)
    code = server.close()
    if code != 0:
        print(f"warning: the server exited with {code}", file=sys.stderr)
    return samples


def bench_docker_exec(runs, warmup):
    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "--network", "none", IMAGE, "sleep", "infinity"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    try:
        samples = []
        for i in range(warmup + runs):
            started = time.perf_counter()
            out = subprocess.run(
                ["docker", "exec", container, "python3", "-c", "print(1)"], check=True, capture_output=True, text=True
            ).stdout
            elapsed = (time.perf_counter() - started) * 1000
            assert out == "1\n", out
            if i >= warmup:
                samples.append(elapsed)
        return samples
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)


def bench_docker_run(runs):
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            ["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-c", "print(1)"],
            check=True, capture_output=True,
        )
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main():
    release = os.path.join(ROOT, "target/release/code-sandbox-mcp")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=release if os.path.exists(release) else os.path.join(ROOT, "target/debug/code-sandbox-mcp"))
    parser.add_argument("--policy", default=os.path.join(ROOT, "tests/policies/local-image.yaml"))
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    print(f"binary: {args.binary}\npolicy: {args.policy}\nruns: {args.runs} (after {args.warmup} warm-up calls)\n")
    mcp = bench_mcp(args.binary, args.policy, args.runs, args.warmup)
    exec_samples = bench_docker_exec(args.runs, args.warmup)
    run_samples = bench_docker_run(max(10, args.runs // 5))
    report("mcp", mcp)
    report("docker exec", exec_samples)
    report("docker run", run_samples)
    ratio = percentile(mcp, 50) / percentile(exec_samples, 50)
    print(f"\nmcp p50 / docker exec p50 = {ratio:.2f}")


if __name__ == "__main__":
    main()
