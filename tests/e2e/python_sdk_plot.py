"""Receives a plot, a file and the environments resource through the official MCP
Python SDK (`pip install mcp`).

Usage: python_sdk_plot.py SERVER_BINARY POLICY_FILE

The policy's Python image must have pandas and matplotlib (the library image). Checks
that a pandas + matplotlib snippet's figure arrives as SDK `ImageContent` (a PNG, by
its header and size), that a CSV it writes arrives as an embedded resource, and that
the `sandbox://environments` resource names matplotlib. Prints one `ok:` line per
scenario; exits non-zero with a traceback on failure.
"""

import base64
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

PLOT = """
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"day": range(1, 31), "sales": [d * 3 % 17 for d in range(1, 31)]})
df.plot(x="day", y="sales", kind="bar", title="sales by day")
plt.show()
pd.concat([df] * 40).to_csv("sales.csv", index=False)
print(df["sales"].max())
"""


async def main(binary: str, policy: str) -> None:
    params = StdioServerParameters(command=binary, args=["--policy", policy], env={"RUST_LOG": "info"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("run_python_code", {"code": PLOT})
            assert not result.is_error, result
            assert result.structured_content["stdout"] == "16\n", result.structured_content

            images = [block for block in result.content if isinstance(block, types.ImageContent)]
            assert len(images) == 1, [type(block).__name__ for block in result.content]
            assert images[0].mime_type == "image/png", images[0].mime_type
            png = base64.b64decode(images[0].data)
            assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 3000, len(png)
            print("ok: image content", len(png), "bytes")

            # 1200 rows are more than the inline limit (4 KiB): the CSV comes as a text resource.
            resources = [block for block in result.content if isinstance(block, types.EmbeddedResource)]
            assert len(resources) == 1, [type(block).__name__ for block in result.content]
            csv = resources[0].resource
            assert str(csv.uri) == "sandbox://files/sales.csv", csv.uri
            assert csv.mime_type == "text/csv" and csv.text.startswith("day,sales\n1,3\n"), csv
            files = {f["path"]: f for f in result.structured_content["files"]}
            assert files["figure-1.png"]["figure"] is True, files
            print("ok: embedded resource")

            listed = await session.list_resources()
            assert {str(r.uri) for r in listed.resources} == {"sandbox://policy", "sandbox://environments"}
            read = await session.read_resource("sandbox://environments")
            environments = json.loads(read.contents[0].text)
            names = {p["name"] for p in environments["python"]["packages"]}
            assert {"matplotlib", "pandas", "numpy"} <= names, names
            print("ok: environments resource")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
