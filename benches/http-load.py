#!/usr/bin/env python3
"""Many clients against one team server: runs per second, latency and memory, over
streamable HTTP and, for comparison, the same load over stdio.

Usage: benches/http-load.py [--binary PATH] [--policy FILE] [--clients N] [--calls N]

With the standard library only (no MCP client library between the clock and the server):
  http    `serve --http 127.0.0.1:0 --token-file …`: N clients (default 16), each a
          principal of its own with its own MCP session and keep-alive connection, each
          calling run_python_code {"code": "print(1)"} back to back, --calls times
          (default 20) after 2 warm-up calls;
  stdio   one stdio server (what one agent starts) with N calls in flight at all times
          over its one connection, N × --calls in all: the same load on one sandbox,
          without HTTP, sessions or authentication.
Prints, for each: runs per second, p50/p95 latency of a call in milliseconds, and the
server's resident memory (idle after warm-up, and the peak under load, sampled every
50 ms from /proc). Needs Docker and the offline image (scripts/build-offline-image.sh);
builds nothing itself: pass a release binary for numbers worth quoting.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALL = {"name": "run_python_code", "arguments": {"code": "print(1)"}}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class MemoryWatch:
    """Samples a process's resident memory until stopped; keeps the peak."""

    def __init__(self, pid):
        self.pid, self.peak, self.running = pid, 0.0, True
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self):
        while self.running:
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.05)

    def stop(self):
        self.running = False
        self.thread.join()
        return self.peak


def expect(message):
    result = message.get("result", {})
    if result.get("isError") or result.get("structuredContent", {}).get("stdout") != "1\n":
        sys.exit(f"unexpected result: {json.dumps(message)[:800]}")


class HttpClient:
    """One MCP session over one keep-alive HTTP connection."""

    def __init__(self, port, token):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.next_id = 1
        reply, response = self.post({"jsonrpc": "2.0", "id": self.take_id(), "method": "initialize", "params": INIT})
        self.headers["Mcp-Session-Id"] = response.getheader("Mcp-Session-Id")
        self.headers["MCP-Protocol-Version"] = "2025-06-18"
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def take_id(self):
        self.next_id += 1
        return self.next_id - 1

    def post(self, message):
        self.connection.request("POST", "/mcp", body=json.dumps(message), headers=self.headers)
        response = self.connection.getresponse()
        body = response.read().decode()
        if response.status >= 300:
            sys.exit(f"HTTP {response.status}: {body[:400]}")
        for line in body.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:]), response
        return (json.loads(body) if body.strip() else None), response

    def call(self):
        reply, _ = self.post({"jsonrpc": "2.0", "id": self.take_id(), "method": "tools/call", "params": CALL})
        expect(reply)

    def close(self):
        # The server closes a keep-alive connection idle for 10 s: a fresh one may be needed.
        self.connection.close()
        self.connection.request("DELETE", "/mcp", headers=self.headers)
        self.connection.getresponse().read()
        self.connection.close()


def bench_http(binary, policy, clients, calls):
    directory = tempfile.mkdtemp(prefix="http-load-")
    tokens = [f"bench-token-{n:02d}-{os.urandom(12).hex()}" for n in range(clients)]
    token_file = os.path.join(directory, "tokens")
    with open(token_file, "w") as out:
        out.writelines(f"client{n} {token}\n" for n, token in enumerate(tokens))
    os.chmod(token_file, 0o600)
    server = subprocess.Popen(
        [binary, "serve", "--http", "127.0.0.1:0", "--policy", policy, "--token-file", token_file],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, RUST_LOG="warn,code_sandbox_mcp=info"),
    )
    port = None
    while port is None:
        line = server.stderr.readline()
        if not line:
            sys.exit("the HTTP server exited")
        if "listening on " in line:
            port = int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1].split("/")[0])
    threading.Thread(target=server.stderr.read, daemon=True).start()
    time.sleep(3)  # the warm pool fills
    idle = rss_mib(server.pid)
    latencies, lock = [], threading.Lock()
    ready = threading.Barrier(clients + 1)
    done = threading.Barrier(clients + 1)

    def client(token):
        mcp = HttpClient(port, token)
        for _ in range(2):
            mcp.call()
        ready.wait()
        mine = []
        for _ in range(calls):
            started = time.perf_counter()
            mcp.call()
            mine.append((time.perf_counter() - started) * 1000)
        done.wait()
        with lock:
            latencies.extend(mine)
        mcp.close()

    threads = [threading.Thread(target=client, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    ready.wait()
    watch = MemoryWatch(server.pid)
    started = time.perf_counter()
    done.wait()
    elapsed = time.perf_counter() - started
    peak = watch.stop()
    for thread in threads:
        thread.join()
    server.terminate()
    code = server.wait(timeout=120)
    if code != 0:
        print(f"warning: the HTTP server exited with {code}", file=sys.stderr)
    return latencies, clients * calls / elapsed, idle, peak


def bench_stdio(binary, policy, in_flight, total):
    server = subprocess.Popen(
        [binary, "--policy", policy], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        env=dict(os.environ, RUST_LOG="warn"),
    )

    def send(message):
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()

    early = {}

    def answer(request_id):
        while request_id not in early:
            message = json.loads(server.stdout.readline())
            if "id" in message:
                early[message["id"]] = message
        return early.pop(request_id)

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    time.sleep(3)  # the warm pool fills
    for warm in range(1, 1 + 2 * in_flight):
        send({"jsonrpc": "2.0", "id": warm, "method": "tools/call", "params": CALL})
    for warm in range(1, 1 + 2 * in_flight):
        expect(answer(warm))
    idle = rss_mib(server.pid)
    sent_at, latencies = {}, []
    next_id = 1000

    def start_one():
        nonlocal next_id
        sent_at[next_id] = time.perf_counter()
        send({"jsonrpc": "2.0", "id": next_id, "method": "tools/call", "params": CALL})
        next_id += 1

    watch = MemoryWatch(server.pid)
    started = time.perf_counter()
    for _ in range(in_flight):
        start_one()
    while len(latencies) < total:
        message = json.loads(server.stdout.readline())
        if message.get("id") not in sent_at:
            continue
        latencies.append((time.perf_counter() - sent_at.pop(message["id"])) * 1000)
        expect(message)
        if len(latencies) + len(sent_at) < total:
            start_one()
    elapsed = time.perf_counter() - started
    peak = watch.stop()
    server.stdin.close()
    server.wait(timeout=120)
    return latencies, total / elapsed, idle, peak


def main():
    release = os.path.join(ROOT, "target/release/code-sandbox-mcp")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=release if os.path.exists(release) else os.path.join(ROOT, "target/debug/code-sandbox-mcp"))
    parser.add_argument("--policy", default=os.path.join(ROOT, "tests/policies/local-image.yaml"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--calls", type=int, default=20, help="timed calls per client")
    args = parser.parse_args()
    print(f"binary: {args.binary}\npolicy: {args.policy}\n"
          f"{args.clients} clients x {args.calls} calls of run_python_code print(1); cores: {os.cpu_count()}\n")
    results = {
        "http": bench_http(args.binary, args.policy, args.clients, args.calls),
        "stdio": bench_stdio(args.binary, args.policy, args.clients, args.clients * args.calls),
    }
    print(f"{'':6} {'runs/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'RSS idle':>9} {'RSS peak':>9}")
    for name, (latencies, rate, idle, peak) in results.items():
        print(f"{name:6} {rate:7.1f} {percentile(latencies, 50):8.1f} {percentile(latencies, 95):8.1f} "
              f"{statistics.mean(latencies):8.1f} {idle:7.1f}Mi {peak:7.1f}Mi")


if __name__ == "__main__":
    main()
