"""Drives code-sandbox-mcp with the official MCP Python SDK (`pip install mcp`).

Usage: python_sdk_client.py SERVER_BINARY POLICY_FILE IMAGE_TAG

Starts the server as an MCP client does (the bare command, the policy through
CODE_SANDBOX_POLICY), then checks: the tool list, both run tools (the SDK validates
structured content against each tool's outputSchema), a denial, a timeout with
progress notifications, and cancellation (the SDK sends notifications/cancelled when
the calling task is cancelled; the run's container must go). IMAGE_TAG is the image
the policy uses, so that containers of this run can be told apart from others.
Prints one `ok:` line per scenario; exits non-zero with a traceback on failure.
"""

import subprocess
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


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


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def main(binary: str, policy: str, tag: str) -> None:
    params = StdioServerParameters(command=binary, env={"CODE_SANDBOX_POLICY": policy, "RUST_LOG": "info"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "code-sandbox-mcp", init
            print("ok: initialize", init.protocol_version)

            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"run_python_code", "run_javascript_code", "check_code", "end_session"}, tools
            assert tools["check_code"].annotations.read_only_hint is True
            assert tools["run_python_code"].annotations.open_world_hint is False
            assert "exit_code" in tools["run_python_code"].output_schema["properties"]
            assert "Network: none" in tools["run_python_code"].description
            print("ok: tools/list")

            result = await session.call_tool("run_python_code", {"code": "print(sum(range(10)))"})
            assert not result.is_error, result
            assert result.structured_content["stdout"] == "45\n", result.structured_content
            assert result.structured_content["exit_code"] == 0
            assert "45" in text_of(result)
            print("ok: run_python_code")

            result = await session.call_tool(
                "run_javascript_code", {"code": "console.log([1,2,3].map(x => x * 2).join(','))"}
            )
            assert not result.is_error, result
            assert result.structured_content["stdout"] == "2,4,6\n", result.structured_content
            print("ok: run_javascript_code")

            result = await session.call_tool(
                "run_javascript_code", {"code": "console.log(1)\nrequire('child_process').execSync('id')\n"}
            )
            assert result.is_error, result
            assert result.structured_content["status"] == "denied", result.structured_content
            finding = result.structured_content["findings"][0]
            assert finding["rule"] == "process-exec" and finding["line"] == 2, finding
            assert "process-exec" in text_of(result)
            result = await session.call_tool("run_python_code", {"code": "import os\nos.system('id')\n"})
            assert result.is_error, result
            finding = result.structured_content["findings"][0]
            assert finding["rule"] == "process-exec" and finding["line"] == 2, finding
            print("ok: denial")

            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            result = await session.call_tool(
                "run_python_code",
                {"code": "while True:\n    pass\n", "timeout": 2},
                progress_callback=on_progress,
            )
            assert not result.is_error, result
            assert result.structured_content["timed_out"] is True, result.structured_content
            assert progress, "no progress notification during a 2 s run"
            print("ok: timeout, progress notifications:", len(progress))

            assert containers_of(tag) == [], "the policy has no warm pool; nothing should be left"
            started = anyio.Event()

            async def on_started(value: float, total: float | None, message: str | None) -> None:
                started.set()

            async with anyio.create_task_group() as group:

                async def long_call() -> None:
                    await session.call_tool(
                        "run_python_code",
                        {"code": "import time\ntime.sleep(600)\n"},
                        progress_callback=on_started,
                    )
                    raise AssertionError("a cancelled call must not return")

                group.start_soon(long_call)
                await wait_for(lambda: containers_of(tag) != [], "the run's container")
                await started.wait()
                group.cancel_scope.cancel()
            await wait_for(lambda: containers_of(tag) == [], "the cancelled run's container to go")
            result = await session.call_tool("check_code", {"code": "print(1)", "language": "python"})
            assert result.structured_content["allowed"] is True, result
            print("ok: cancellation")

            # A session keeps its variables from one call to the next, until ended.
            first = await session.call_tool(
                "run_python_code", {"code": "rows = [3, 4]\nprint(len(rows))", "session": "sdk"}
            )
            assert first.structured_content["stdout"] == "2\n", first
            second = await session.call_tool("run_python_code", {"code": "print(sum(rows))", "session": "sdk"})
            assert second.structured_content["stdout"] == "7\n", second
            assert second.structured_content["session"]["call"] == 2, second
            ended = await session.call_tool("end_session", {"session": "sdk"})
            assert ended.structured_content["ended"] is True, ended
            await wait_for(lambda: containers_of(tag) == [], "the session's container to go")
            print("ok: session")
    print("ok: session closed")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
