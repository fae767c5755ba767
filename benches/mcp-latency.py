#!/usr/bin/env python3
"""Latency of a warm `run_python_code` call through MCP, against raw Docker.

Usage: benches/mcp-latency.py [--binary PATH] [--policy FILE] [--runs N] [--pause SECONDS]

Measures, with the standard library only (no MCP client library between the clock and
the server):
  mcp          tools/call run_python_code {"code": "print(1)"} over the server's stdio,
               after warm-up calls, with a pause between calls (--pause, default 1 s) so
               that each call finds a warm container, as an agent's calls do: policy
               check, a fresh container from the pool, upload, exec, output, removal;
  mcp b2b      the same back to back with no pause: calls outrun the pool's refills,
               so this shows the cost of a cold container under load;
  check_code   tools/call check_code, the MCP round trip and the policy check alone;
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
IMAGE = "code-sandbox-mcp-runtime:trixie"


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


def bench_mcp(binary, policy, runs, warmup, pause, tool="run_python_code"):
    server = Server(binary, policy)
    server.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    )
    server.notify("notifications/initialized")
    arguments = {"code": "print(1)"}
    if tool == "check_code":
        arguments["language"] = "python"
    call = {"name": tool, "arguments": arguments}
    samples = []
    for i in range(warmup + runs):
        time.sleep(pause)
        started = time.perf_counter()
        response = server.request("tools/call", call)
        elapsed = (time.perf_counter() - started) * 1000
        result = response.get("result", {})
        structured = result.get("structuredContent", {})
        expected = structured.get("allowed") is True if tool == "check_code" else structured.get("stdout") == "1\n"
        if result.get("isError") or not expected:
            server.close()
            sys.exit(f"unexpected result: {json.dumps(response)[:800]}")
        if i >= warmup:
            samples.append(elapsed)
    code = server.close()
    if code != 0:
        print(f"warning: the server exited with {code}", file=sys.stderr)
    return samples


def bench_docker_exec(runs, warmup, pause):
    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "--network", "none", IMAGE, "sleep", "infinity"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    try:
        samples = []
        for i in range(warmup + runs):
            time.sleep(pause)
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
    parser.add_argument("--pause", type=float, default=1.0)
    args = parser.parse_args()

    print(
        f"binary: {args.binary}\npolicy: {args.policy}\n"
        f"runs: {args.runs} (after {args.warmup} warm-up calls), pause {args.pause} s between calls\n"
    )
    mcp = bench_mcp(args.binary, args.policy, args.runs, args.warmup, args.pause)
    back_to_back = bench_mcp(args.binary, args.policy, args.runs, args.warmup, 0.0)
    check = bench_mcp(args.binary, args.policy, args.runs, args.warmup, 0.0, tool="check_code")
    exec_samples = bench_docker_exec(args.runs, args.warmup, args.pause)
    run_samples = bench_docker_run(max(10, args.runs // 5))
    report("mcp", mcp)
    report("mcp b2b", back_to_back)
    report("check_code", check)
    report("docker exec", exec_samples)
    report("docker run", run_samples)
    ratio = percentile(mcp, 50) / percentile(exec_samples, 50)
    print(f"\nmcp p50 / docker exec p50 = {ratio:.2f}")


if __name__ == "__main__":
    main()
