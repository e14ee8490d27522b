#!/usr/bin/env bash
# Runs every test Aether has, on a fresh machine too: installs the official MCP peers the
# tests talk to (scripts/install-peers.sh), bubblewrap (run_shell's sandbox) and Chromium (the
# console's browser tests), builds the
# binary they drive, runs the suites.
# The peer-backed tests (conformance suite, Python SDK, inspector) run when AETHER_PEERS
# names the install folder, which this script sets.
set -euo pipefail
cd "$(dirname "$0")/.."
export AETHER_PEERS=${AETHER_PEERS:-$HOME/.cache/aether-peers}
scripts/install-peers.sh "$AETHER_PEERS"

# From the system's packages: bubblewrap (run_shell's tests run real sandboxes), Chromium
# (the console's tests drive it headless with playwright-core), gawk, openssl, espeak-ng and
# ffmpeg.
need=()
[ -x /usr/bin/bwrap ] || [ -x /usr/local/bin/bwrap ] || need+=(bubblewrap)
[ -x /usr/bin/chromium ] || need+=(chromium)
# gawk: run_command's awk reading is held to gawk's own --sandbox (mawk has none).
[ -x /usr/bin/gawk ] || need+=(gawk)
# openssl: the built-in authorization server's tests serve a client's metadata document over
# HTTPS with a certificate made for them.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# espeak-ng and ffmpeg (with ffprobe): tts_render speaks with the one and encodes with the
# other; its tests read the MP3 back with ffprobe and ffmpeg's silencedetect.
[ -x /usr/bin/espeak-ng ] || need+=(espeak-ng)
[ -x /usr/bin/ffmpeg ] && [ -x /usr/bin/ffprobe ] || need+=(ffmpeg)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y "${need[@]}" >/dev/null 2>&1 \
      || { $sudo apt-get update >/dev/null && $sudo apt-get install -y "${need[@]}" >/dev/null; }
  else
    echo "the tests need ${need[*]}; install them with your package manager" >&2
    exit 1
  fi
fi

# PostgreSQL: the store's tests and the replica tests run on it too, each in a schema of its
# own in the database named by AETHER_TEST_POSTGRES (default: `test` on the local server,
# trust auth). Start the local server if it is installed but stopped.
export AETHER_TEST_POSTGRES=${AETHER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}
if ! pg_isready -q -d "$AETHER_TEST_POSTGRES" 2>/dev/null; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    $sudo pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  fi
  for _ in $(seq 1 30); do
    pg_isready -q -d "$AETHER_TEST_POSTGRES" 2>/dev/null && break
    sleep 1
  done
  pg_isready -q -d "$AETHER_TEST_POSTGRES" || {
    echo "the tests need PostgreSQL at $AETHER_TEST_POSTGRES (set AETHER_TEST_POSTGRES to another)" >&2
    exit 1
  }
fi

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
