#!/usr/bin/env bash
# Runs every test Aether has, on a fresh machine too: installs the official MCP peers the
# tests talk to (scripts/install-peers.sh), builds the binary they drive, runs the suites.
# The peer-backed tests (conformance suite, Python SDK, inspector) run when AETHER_PEERS
# names the install folder, which this script sets.
set -euo pipefail
cd "$(dirname "$0")/.."
export AETHER_PEERS=${AETHER_PEERS:-$HOME/.cache/aether-peers}
scripts/install-peers.sh "$AETHER_PEERS"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --bins
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
  cargo test --workspace --doc
else
  cargo test --workspace --no-fail-fast
fi
echo "all tests passed"
