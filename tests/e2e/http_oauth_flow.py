"""The OAuth 2.1 flow an MCP client makes against `code-sandbox-mcp serve --http
--oauth-issuer`, with the official Python SDK, against an authorization server this
script plays: its RSA key generated here, its metadata, JWKS and token endpoint (the
client_credentials grant) served from loopback.

Usage: http_oauth_flow.py SERVER_BINARY POLICY_FILE

The SDK's ClientCredentialsOAuthProvider meets the server's 401, follows its
`resource_metadata` to the protected-resource metadata, from there to this issuer's
metadata, gets a token for the server's resource (RFC 8707) and runs code with it.
A client whose secret is wrong gets no token, and so no run. Prints one `ok:` line per
scenario; exits non-zero on failure.
"""

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CLIENT_ID, CLIENT_SECRET = "ci-bot", "ci-bot-secret"
SCOPE = "code-sandbox:run"


def b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Issuer:
    """An authorization server: metadata, keys, and tokens for client_credentials."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.tokens_issued: list[dict] = []
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/oauth-authorization-server":
                    self.reply(200, {
                        "issuer": issuer.url,
                        "jwks_uri": f"{issuer.url}/jwks",
                        "token_endpoint": f"{issuer.url}/token",
                        # Required by RFC 8414's schema; never used by client_credentials.
                        "authorization_endpoint": f"{issuer.url}/authorize",
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                        "response_types_supported": ["code"],
                    })
                elif self.path == "/jwks":
                    numbers = issuer.key.public_key().public_numbers()
                    self.reply(200, {"keys": [{
                        "kty": "RSA", "kid": "flow-1", "use": "sig", "alg": "RS256",
                        "n": b64(numbers.n), "e": b64(numbers.e),
                    }]})
                else:
                    self.reply(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                client_id, secret = form.get("client_id"), form.get("client_secret")
                basic = self.headers.get("Authorization", "")
                if basic.startswith("Basic "):
                    client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
                if self.path != "/token" or form.get("grant_type") != "client_credentials":
                    return self.reply(400, {"error": "unsupported_grant_type"})
                if (client_id, secret) != (CLIENT_ID, CLIENT_SECRET):
                    return self.reply(401, {"error": "invalid_client"})
                now = int(time.time())
                claims = {
                    "iss": issuer.url, "sub": client_id, "aud": form.get("resource"),
                    "iat": now, "exp": now + 300, "scope": form.get("scope") or SCOPE,
                }
                issuer.tokens_issued.append(claims)
                token = jwt.encode(claims, issuer.key, algorithm="RS256", headers={"kid": "flow-1"})
                self.reply(200, {"access_token": token, "token_type": "Bearer", "expires_in": 300})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info) -> None:
        self.client = client_info


def start_server(binary: str, policy: str, issuer: str) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [binary, "serve", "--http", "127.0.0.1:0", "--policy", policy, "--oauth-issuer", issuer],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, RUST_LOG="warn,code_sandbox_mcp=info"),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        if not line:
            raise AssertionError(f"the server exited: {server.wait()}")
        found = re.search(r"listening on (\S+)", line)
        if found:
            threading.Thread(target=server.stderr.read, daemon=True).start()
            return server, found.group(1)
    raise AssertionError("the server did not say where it listens")


async def run_with(url: str, issuer: str, secret: str) -> str:
    provider = ClientCredentialsOAuthProvider(
        server_url=url, storage=Memory(), client_id=CLIENT_ID, client_secret=secret, issuer=issuer,
    )
    async with create_mcp_http_client(auth=provider) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("run_python_code", {"code": "print('via oauth')"})
                return result.structured_content["stdout"]


async def main(binary: str, policy: str) -> None:
    issuer = Issuer()
    server, url = start_server(binary, policy, issuer.url)
    try:
        out = await run_with(url, issuer.url, CLIENT_SECRET)
        assert out == "via oauth\n", out
        assert issuer.tokens_issued, "no token was issued"
        claims = issuer.tokens_issued[-1]
        assert claims["aud"] == url, claims  # RFC 8707: the token is for this server
        assert SCOPE in claims["scope"].split(), claims
        print("ok: the SDK's OAuth flow gets a token and runs code")

        try:
            await run_with(url, issuer.url, "wrong-secret")
            raise AssertionError("a client with a wrong secret ran code")
        except AssertionError:
            raise
        except BaseException as error:  # the SDK's OAuth error, maybe in an exception group
            assert "401" in repr(error) or "invalid_client" in repr(error) or "OAuth" in repr(error), repr(error)
        print("ok: a client with a wrong secret gets no token and runs nothing")
    finally:
        server.terminate()
        assert server.wait(timeout=60) == 0, "the server did not stop cleanly"


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
