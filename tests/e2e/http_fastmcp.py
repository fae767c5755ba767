"""Drives `code-sandbox-mcp serve --http` with fastmcp's client and a bearer token.

Usage: http_fastmcp.py URL TOKEN

Checks: a wrong token is refused; with the right one, the tool list, a run and a session
of two calls. Prints one `ok:` line per scenario; exits non-zero on failure.
"""

import sys

import anyio
from fastmcp import Client


async def main(url: str, token: str) -> None:
    try:
        async with Client(url, auth="wrong-token-0123456789abcdef") as client:
            await client.list_tools()
        raise AssertionError("a wrong token was accepted")
    except AssertionError:
        raise
    except Exception as error:  # fastmcp turns the 401 into its transport's error
        print("ok: a wrong token is refused:", repr(error)[:120])

    async with Client(url, auth=token) as client:
        names = {tool.name for tool in await client.list_tools()}
        assert {"run_python_code", "run_javascript_code", "check_code", "end_session"} <= names, names
        result = await client.call_tool("run_python_code", {"code": "print(2 ** 10)"})
        assert result.structured_content["stdout"] == "1024\n", result.structured_content
        print("ok: fastmcp runs code over http")
        await client.call_tool("run_python_code", {"code": "total = 40", "session": "f"})
        result = await client.call_tool("run_python_code", {"code": "print(total + 2)", "session": "f"})
        assert result.structured_content["stdout"] == "42\n", result.structured_content
        print("ok: fastmcp session over http")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
