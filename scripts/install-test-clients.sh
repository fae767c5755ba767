#!/usr/bin/env bash
# Installs the third-party MCP clients the end-to-end tests drive the server with:
#   - the official MCP Python SDK (`mcp`) and `fastmcp`, into a venv, with maturin
#     (which builds the wheel the packaging test installs), uv (whose `uvx` runs it) and
#     pyflakes (which .ci/run runs over the in-container Python guard),
#   - the MCP Inspector (`@modelcontextprotocol/inspector`, used in `--cli` mode), with npm.
# Everything goes under one directory (default: target/test-clients; override with
# CODE_SANDBOX_TEST_CLIENTS) so nothing leaks into the user's site-packages or global
# node_modules, and a second run is a quick no-op. The Rust test tests/e2e_clients.rs
# calls this script when the clients are missing; CI may also call it up front.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${CODE_SANDBOX_TEST_CLIENTS:-$root/target/test-clients}"
venv="$dest/venv"
node_dir="$dest/node"
mkdir -p "$dest"

log() { echo "install-test-clients: $*" >&2; }

python_ok() {
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import mcp, fastmcp, pyflakes' >/dev/null 2>&1 && [ -x "$venv/bin/maturin" ] && [ -x "$venv/bin/uvx" ]
}

inspector_ok() {
  [ -f "$node_dir/node_modules/@modelcontextprotocol/inspector/package.json" ]
}

if python_ok; then
  log "Python clients already in $venv"
else
  python="${PYTHON:-python3}"
  command -v "$python" >/dev/null 2>&1 || { log "no $python on PATH"; exit 1; }
  # The SDK needs Python >= 3.10.
  "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || { log "$python is older than 3.10, which the MCP Python SDK needs"; exit 1; }
  if [ ! -x "$venv/bin/python" ]; then
    log "creating venv $venv"
    "$python" -m venv "$venv"
  fi
  log "pip install mcp fastmcp maturin uv pyflakes"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2 || true
  "$venv/bin/python" -m pip install --quiet mcp fastmcp "maturin>=1.5,<2" uv pyflakes >&2
  python_ok || { log "mcp/fastmcp still not importable after install"; exit 1; }
fi

if inspector_ok; then
  log "MCP Inspector already in $node_dir"
else
  command -v npm >/dev/null 2>&1 || { log "no npm on PATH"; exit 1; }
  mkdir -p "$node_dir"
  [ -f "$node_dir/package.json" ] || echo '{"name":"code-sandbox-mcp-test-clients","private":true}' >"$node_dir/package.json"
  log "npm install @modelcontextprotocol/inspector"
  npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error @modelcontextprotocol/inspector >&2
  inspector_ok || { log "the Inspector is still missing after npm install"; exit 1; }
fi

"$venv/bin/python" - <<'PY' >&2
import importlib.metadata as m
print("install-test-clients: mcp", m.version("mcp"), "fastmcp", m.version("fastmcp"))
PY
log "inspector $(node -p "require('$node_dir/node_modules/@modelcontextprotocol/inspector/package.json').version")"
