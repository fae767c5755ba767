"""A person approves (or not) code that an `ask` rule holds, through the official MCP
Python SDK's elicitation callback (`pip install mcp`).

Usage: python_sdk_approval.py SERVER_BINARY POLICY_FILE

The policy makes `process-exec` an `ask` rule. Checks: a yes runs the exact code once,
with the process the rule is about (the run-time guard leaves the approved rule out),
and the same code sent again asks again; no, a dismissal, and an accept without a yes
run nothing; a client without elicitation is refused with a message that says so.
Prints one `ok:` line per scenario; exits non-zero with a traceback on failure.
"""

import hashlib
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

CODE = (
    "import subprocess\n"
    "print(subprocess.run(['echo', 'approved'], capture_output=True, text=True).stdout.strip())\n"
)


async def main(binary: str, policy: str) -> None:
    params = StdioServerParameters(command=binary, args=["--policy", policy], env={"RUST_LOG": "info"})
    asked: list[str] = []
    answer = {"action": "accept", "content": {"approve": True}}

    async def elicit(context, request):
        asked.append(request.message)
        return types.ElicitResult(**answer)

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            result = await session.call_tool("run_python_code", {"code": CODE})
            assert not result.is_error, result
            assert result.structured_content["stdout"] == "approved\n", result.structured_content
            assert result.structured_content["approval"]["answer"] == "approved", result.structured_content
            assert len(asked) == 1, asked
            assert "process-exec" in asked[0] and "sha256" in asked[0], asked[0]
            assert "The whole code (2 lines, as the interpreter counts them)" in asked[0] and "capture_output=True" in asked[0], asked[0]
            assert "subprocess.run" in asked[0], asked[0]
            again = await session.call_tool("run_python_code", {"code": CODE})
            assert again.structured_content["stdout"] == "approved\n", again.structured_content
            assert len(asked) == 2, "the same code must be asked about again"
            print("ok: approved once, and asked again")

            for action, content, expected in [
                ("decline", None, "declined"),
                ("cancel", None, "cancelled"),
                ("accept", {"approve": False}, "declined"),
            ]:
                answer.clear()
                answer.update({"action": action, "content": content})
                refused = await session.call_tool("run_python_code", {"code": CODE})
                assert refused.is_error, refused
                content_ = refused.structured_content
                assert content_["status"] == "denied", content_
                assert content_["approval"]["answer"] == expected, content_
                assert content_["exit_code"] is None and content_["stdout"] == "", content_
                print("ok: not run after", action, content)

            # What the question shows is what runs: a bare CR is a line to Python, escape
            # sequences and direction overrides are spelled out, and the files handed in
            # are listed with their sizes and hashes, all under the request's hash.
            answer.clear()
            answer.update({"action": "decline", "content": None})
            hidden = "print('fine')\rimport subprocess; subprocess.run(['id'])  # \x1b[2K\u202e\n"
            data = b"a,b\n1,2\n"
            refused = await session.call_tool(
                "run_python_code",
                {"code": hidden, "files": [{"path": "data.csv", "content": data.decode()}]},
            )
            question = asked[-1]
            assert "The whole code (2 lines, as the interpreter counts them)" in question, question
            assert "   2 | import subprocess" in question, question
            assert "\x1b" not in question and "\u202e" not in question, repr(question)
            assert "\\u{1b}[2K\\u{202e}" in question, question
            assert f"data.csv — {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}" in question, question
            approval = refused.structured_content["approval"]
            assert approval["request_sha256"] in question and approval["code_sha256"] in question, question
            assert approval["answer"] == "declined", approval
            print("ok: the question shows every line, escaped, and the files")

    # A client that cannot ask its user.
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            refused = await session.call_tool("run_python_code", {"code": CODE})
            assert refused.is_error, refused
            assert refused.structured_content["approval"]["answer"] == "unavailable", refused.structured_content
            text = "".join(getattr(block, "text", "") for block in refused.content)
            assert "cannot ask its user" in text, text
            print("ok: a client without elicitation is refused")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
