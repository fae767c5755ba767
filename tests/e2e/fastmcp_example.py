"""The README's fastmcp example, run for real by tests/e2e_clients.rs.

It starts `code-sandbox-mcp` from PATH over stdio, exactly as the client configuration
in the README does, runs a snippet, and shows what a policy denial looks like. The
test puts the freshly built binary first on PATH and the policy in
CODE_SANDBOX_POLICY, which the server reads like any other environment variable.
"""

import asyncio
import os

from fastmcp import Client

config = {
    "mcpServers": {
        "code-sandbox": {
            "command": "code-sandbox-mcp",
            # Only what is listed here reaches the server (plus PATH, HOME, ...).
            "env": {"CODE_SANDBOX_POLICY": os.environ.get("CODE_SANDBOX_POLICY", "default")},
        }
    }
}


async def main() -> None:
    async with Client(config) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(sorted(tool.name for tool in tools)))

        result = await client.call_tool(
            "run_python_code",
            {"code": "import statistics\nprint(statistics.mean([3, 5, 10]))"},
        )
        print("stdout:", result.structured_content["stdout"].strip())
        print("exit code:", result.structured_content["exit_code"])

        # A denied snippet runs nothing; the findings say what to change.
        denied = await client.call_tool(
            "run_python_code",
            {"code": "import subprocess\nsubprocess.run(['ls', '/'])"},
            raise_on_error=False,
        )
        print("denied:", denied.is_error)
        for finding in denied.structured_content["findings"]:
            print(f"  line {finding['line']}: {finding['rule']}: {finding['message']}")


if __name__ == "__main__":
    asyncio.run(main())
