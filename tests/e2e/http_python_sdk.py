"""Drives `code-sandbox-mcp serve --http` with the official MCP Python SDK's streamable
HTTP client (`pip install mcp`), as two principals of one team server.

Usage: http_python_sdk.py URL ALICE_TOKEN BOB_TOKEN IMAGE_TAG
       http_python_sdk.py --hold URL TOKEN      (a client that will be killed mid-run)

The server's policy uses IMAGE_TAG with no warm pool (so containers of this test can be
watched), makes `process-exec` an `ask` rule, and the server allows each principal 2
sessions. Checks: runs with a token; each principal's same-named session is its own,
and so is each connection's; progress with the program's output while it runs;
cancellation kills the run; elicitation (`ask`) reaches the person at the client; the
per-principal session limit; and a client killed mid-run (SIGKILL, no goodbye) leaves
no container behind. Prints one `ok:` line per scenario; exits non-zero on failure.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ASK_CODE = (
    "import subprocess\n"
    "print(subprocess.run(['echo', 'approved'], capture_output=True, text=True).stdout.strip())\n"
)


def containers_of(tag: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Image}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line.split("\t")[0] for line in out.splitlines() if line.split("\t")[-1] == tag]


async def wait_for(predicate, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await anyio.sleep(0.2)


@contextlib.asynccontextmanager
async def connection(url: str, token: str, **session_args):
    """One MCP session over HTTP with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **session_args) as session:
                await session.initialize()
                yield session


async def run(client: ClientSession, code: str, progress_callback=None, **args):
    result = await client.call_tool("run_python_code", {"code": code, **args}, progress_callback=progress_callback)
    return result, result.structured_content


async def main(url: str, alice: str, bob: str, tag: str) -> None:
    asked: list[str] = []

    async def approve(context, request):
        asked.append(request.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with connection(url, alice, elicitation_callback=approve) as a, connection(url, bob) as b:
        result, content = await run(a, "print(sum(range(10)))")
        assert not result.is_error and content["stdout"] == "45\n", content
        result = await a.call_tool("run_javascript_code", {"code": "console.log([1, 2].map(x => x * 3).join(','))"})
        assert result.structured_content["stdout"] == "3,6\n", result.structured_content
        print("ok: runs over http with a token")

        # The same session name, two principals: two sessions.
        _, content = await run(a, "x = 'alice'\nprint('set')", session="work")
        assert content["stdout"] == "set\n", content
        _, content = await run(b, "try:\n    print(x)\nexcept NameError:\n    print('unbound')\n", session="work")
        assert content["stdout"] == "unbound\n", content
        _, content = await run(b, "x = 'bob'\nprint(x)", session="work")
        assert content["stdout"] == "bob\n", content
        _, content = await run(a, "print(x)", session="work")
        assert content["stdout"] == "alice\n", content
        # The same principal on another connection: its own sessions again.
        async with connection(url, alice) as a2:
            _, content = await run(a2, "try:\n    print(x)\nexcept NameError:\n    print('unbound')\n", session="work")
            assert content["stdout"] == "unbound\n", content
        print("ok: same-named sessions of two principals (and two connections) stay apart")

        messages: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if message:
                messages.append(message)

        code = "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.7)\n"
        result, content = await run(a, code, progress_callback=on_progress)
        assert content["stdout"] == "line 0\nline 1\nline 2\n", content
        # Progress carries output as it comes: a line may arrive in pieces (`-u`).
        assert "line 0" in "".join(messages), messages
        print("ok: progress with output over http:", len(messages))

        # Left: the `work` sessions of alice and bob (the second connection's is gone).
        await wait_for(lambda: len(containers_of(tag)) == 2, "only the two `work` sessions' containers")
        before = set(containers_of(tag))
        started = anyio.Event()

        async def on_started(value: float, total: float | None, message: str | None) -> None:
            started.set()

        async with anyio.create_task_group() as group:

            async def long_call() -> None:
                await a.call_tool("run_python_code", {"code": "import time\ntime.sleep(600)\n"}, progress_callback=on_started)
                raise AssertionError("a cancelled call must not return")

            group.start_soon(long_call)
            await wait_for(lambda: len(set(containers_of(tag)) - before) == 1, "the run's container")
            await started.wait()
            group.cancel_scope.cancel()
        await wait_for(lambda: set(containers_of(tag)) == before, "the cancelled run's container to go")
        print("ok: cancellation over http")

        result, content = await run(a, ASK_CODE)
        assert not result.is_error and content["stdout"] == "approved\n", content
        assert content["approval"]["answer"] == "approved", content
        assert len(asked) == 1 and "process-exec" in asked[0], asked
        result, content = await run(b, ASK_CODE)
        assert result.is_error and content["approval"]["answer"] == "unavailable", content
        print("ok: elicitation over http")

        # Two sessions per principal: bob has `work`; one more, then no more.
        _, content = await run(b, "print(2)", session="second")
        assert content["stdout"] == "2\n", content
        result, content = await run(b, "print(3)", session="third")
        assert result.is_error and "--principal-sessions" in content["message"], content
        # Alice's allowance is her own.
        _, content = await run(a, "print(4)", session="other")
        assert content["stdout"] == "4\n", content
        ended = await b.call_tool("end_session", {"session": "second"})
        assert ended.structured_content["ended"] is True, ended
        _, content = await run(b, "print(3)", session="third")
        assert content["stdout"] == "3\n", content
        print("ok: sessions are limited per principal")

    # Both connections closed (DELETE): their sessions' containers go.
    await wait_for(lambda: containers_of(tag) == [], "the closed connections' containers to go")
    print("ok: closing a connection removes its containers")

    # A client killed mid-run, with a session open: nothing is left once it is gone.
    holder = subprocess.Popen(
        [sys.executable, __file__, "--hold", url, alice], stdout=subprocess.PIPE, text=True
    )
    line = holder.stdout.readline()
    assert line.strip() == "holding", line
    await wait_for(lambda: len(containers_of(tag)) == 2, "the held session's and run's containers")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    await wait_for(lambda: containers_of(tag) == [], "a killed client's containers to go", limit=90)
    print("ok: a client killed mid-run leaves no container")


async def hold(url: str, token: str) -> None:
    """Opens a session, starts a long run, says so, and waits to be killed."""
    async with connection(url, token) as session:
        _, content = await run(session, "print('held')", session="held")
        assert content["stdout"] == "held\n", content
        async with anyio.create_task_group() as group:
            group.start_soon(session.call_tool, "run_python_code", {"code": "import time\ntime.sleep(600)\n"})
            await anyio.sleep(1)
            print("holding", flush=True)
            await anyio.sleep(600)


if __name__ == "__main__":
    if sys.argv[1] == "--hold":
        anyio.run(hold, *sys.argv[2:4])
    else:
        anyio.run(main, *sys.argv[1:5])
