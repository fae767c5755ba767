"""Large requests through the official MCP Python SDK (`pip install mcp`).

Usage: python_sdk_transport.py SERVER_BINARY POLICY_FILE

The policy gives `limits.tmpfs: 32MiB`, so the server takes requests up to about
45 MiB. Checks: a call carrying a 20 MiB file (27 MiB of JSON, over the 16 MiB that
rmcp's transport takes by default) runs and the program sees the whole file; a call
carrying 40 MiB (53 MiB of JSON) is answered with a JSON-RPC error naming the limit
instead of never being answered; the session goes on. Prints one `ok:` line per
scenario and the server's peak memory and descriptors; exits non-zero on failure.
"""

import base64
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


def server_pid(binary: str) -> int:
    """The server: this process's child running the binary."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = f.read().rsplit(")", 1)[1].split()[1]
            if parent == me and os.readlink(f"/proc/{entry}/exe") == os.path.realpath(binary):
                return int(entry)
        except OSError:
            continue
    raise AssertionError("the server process was not found")


def numbers(pid: int) -> str:
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return f"peak memory {fields['VmHWM'].strip()}, resident {fields['VmRSS'].strip()}, {fds} descriptors"


async def main(binary: str, policy: str) -> None:
    params = StdioServerParameters(command=binary, env={"CODE_SANDBOX_POLICY": policy, "RUST_LOG": "warn"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            pid = server_pid(binary)
            print("numbers: at start:", numbers(pid))

            data = os.urandom(20 << 20)
            code = "import hashlib\nprint(len(open('big.bin','rb').read()), hashlib.sha256(open('big.bin','rb').read()).hexdigest())"
            files = [{"path": "big.bin", "content": base64.b64encode(data).decode(), "encoding": "base64"}]
            with anyio.fail_after(300):
                result = await session.call_tool("run_python_code", {"code": code, "files": files})
            assert not result.is_error, result
            import hashlib

            expected = f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"
            assert result.structured_content["stdout"] == expected, result.structured_content
            print("ok: 20 MiB file")
            print("numbers: after a 27 MiB request:", numbers(pid))

            files = [{"path": "huge.bin", "content": base64.b64encode(os.urandom(40 << 20)).decode(), "encoding": "base64"}]
            try:
                with anyio.fail_after(300):
                    await session.call_tool("run_python_code", {"code": "print(1)", "files": files})
                raise AssertionError("a request over the limit was taken")
            except MCPError as error:
                assert error.error.code == -32600, error.error
                assert "limits.tmpfs" in error.error.message, error.error.message
                refusal = error.error.message
            print("ok: oversize refused:", refusal[:80])
            print("numbers: after a 53 MiB request:", numbers(pid))

            with anyio.fail_after(60):
                result = await session.call_tool("check_code", {"code": "print(1)", "language": "python"})
            assert result.structured_content["allowed"] is True, result
            print("ok: session goes on")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
