#!/usr/bin/env python3
"""Latency and throughput of the run tools through MCP, side by side with raw Docker.

Usage: benches/mcp-latency.py [--binary PATH] [--policy FILE] [--runs N] [--pause SECONDS]

Measures in one run, with the standard library only (no MCP client library between the
clock and the server):
  mcp python      tools/call run_python_code {"code": "print(1)"} over the server's stdio,
                  calls --pause apart (default 0.5 s), as an agent's calls come: check,
                  a warm container whose interpreter already waits, the program sent,
                  output read, the container removed in the background;
  exec python     `docker exec CONTAINER python3 -c 'print(1)'` into a running container
                  (the CLI's own start included), the same pause apart: the floor the
                  issue compares with;
  mcp js          run_javascript_code {"code": "console.log(1)"}, likewise;
  exec node       `docker exec CONTAINER node -e 'console.log(1)'`, likewise;
  mcp session     run_python_code with a `session`: the interpreter stays, so a call is
                  only the program's round trip;
  mcp b2b         run_python_code back to back, no pause: calls outrun the refills;
  exec b2b        `docker exec … python3 -c` back to back;
  8 callers       8 concurrent callers over one connection, --calls in all (default
                  160): runs per second.
Prints p50 and p95 in milliseconds for each, and the ratios the issue sets targets for.
Needs Docker and the offline image (scripts/build-offline-image.sh); builds nothing
itself: pass a release binary for numbers worth quoting (cargo build --release).
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


def start_server(binary, policy):
    server = Server(binary, policy)
    server.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    )
    server.notify("notifications/initialized")
    return server


def expect(response, stdout):
    result = response.get("result", {})
    structured = result.get("structuredContent", {})
    if result.get("isError") or structured.get("stdout") != stdout:
        sys.exit(f"unexpected result: {json.dumps(response)[:800]}")


def bench_mcp(server, tool, code, runs, warmup, pause, session=None):
    arguments = {"code": code}
    if session:
        arguments["session"] = session
    call = {"name": tool, "arguments": arguments}
    samples = []
    for i in range(warmup + runs):
        time.sleep(pause)
        started = time.perf_counter()
        response = server.request("tools/call", call)
        elapsed = (time.perf_counter() - started) * 1000
        expect(response, "1\n")
        if i >= warmup:
            samples.append(elapsed)
    return samples


def bench_concurrent(server, callers, total):
    """`callers` requests in flight at once over one connection, `total` in all."""
    call = {"name": "run_python_code", "arguments": {"code": "print(1)"}}
    sent = done = 0
    started = time.perf_counter()

    def send():
        nonlocal sent
        request_id = server.next_id
        server.next_id += 1
        server.process.stdin.write(json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}) + "\n")
        server.process.stdin.flush()
        sent += 1

    for _ in range(callers):
        send()
    while done < total:
        line = server.process.stdout.readline()
        if not line:
            sys.exit("the server closed its stdout")
        message = json.loads(line)
        if "id" not in message:
            continue
        expect(message, "1\n")
        done += 1
        if sent < total:
            send()
    return total / (time.perf_counter() - started)


def bench_docker_exec(command, runs, warmup, pause):
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
                ["docker", "exec", container, *command], check=True, capture_output=True, text=True
            ).stdout
            elapsed = (time.perf_counter() - started) * 1000
            assert out == "1\n", out
            if i >= warmup:
                samples.append(elapsed)
        return samples
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)


def main():
    release = os.path.join(ROOT, "target/release/code-sandbox-mcp")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=release if os.path.exists(release) else os.path.join(ROOT, "target/debug/code-sandbox-mcp"))
    parser.add_argument("--policy", default=os.path.join(ROOT, "tests/policies/local-image.yaml"))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.5)
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--calls", type=int, default=160, help="calls in the concurrent part")
    args = parser.parse_args()

    print(
        f"binary: {args.binary}\npolicy: {args.policy}\n"
        f"runs: {args.runs} (after {args.warmup} warm-up calls), pause {args.pause} s between calls; "
        f"cores: {os.cpu_count()}\n"
    )
    python, node = ["python3", "-c", "print(1)"], ["node", "-e", "console.log(1)"]
    server = start_server(args.binary, args.policy)
    time.sleep(3)  # the warm pool fills
    results = {}
    # Interleaved, so that a slow spell of the machine hits both sides alike.
    results["mcp python"] = bench_mcp(server, "run_python_code", "print(1)", args.runs, args.warmup, args.pause)
    results["exec python"] = bench_docker_exec(python, args.runs, args.warmup, args.pause)
    results["mcp js"] = bench_mcp(server, "run_javascript_code", "console.log(1)", args.runs, args.warmup, args.pause)
    results["exec node"] = bench_docker_exec(node, args.runs, args.warmup, args.pause)
    results["mcp session"] = bench_mcp(server, "run_python_code", "print(1)", args.runs, args.warmup, args.pause, session="bench")
    results["mcp b2b"] = bench_mcp(server, "run_python_code", "print(1)", args.runs, args.warmup, 0.0)
    results["exec b2b"] = bench_docker_exec(python, args.runs, args.warmup, 0.0)
    throughput = bench_concurrent(server, args.callers, args.calls)
    code = server.close()
    if code != 0:
        print(f"warning: the server exited with {code}", file=sys.stderr)
    for name, samples in results.items():
        report(name, samples)
    print(f"{args.callers} callers    {throughput:.1f} runs/s")

    p50 = {name: percentile(samples, 50) for name, samples in results.items()}
    print("\nratios of p50 (the issue's targets in brackets):")
    for name, base, target in [
        ("mcp python", "exec python", 0.3),
        ("mcp js", "exec node", 0.3),
        ("mcp session", "exec python", 0.1),
        ("mcp b2b", "exec b2b", 1.0),
    ]:
        print(f"  {name} / {base} = {p50[name] / p50[base]:.2f}   [<= {target}]")


if __name__ == "__main__":
    main()
