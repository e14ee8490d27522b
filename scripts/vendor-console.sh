#!/usr/bin/env bash
# The console's charting library, uPlot (MIT), pinned from npm and embedded in the binary
# (crates/aether-server/console/vendor/, served at /console/vendor/…): no CDN, no build step at
# run time. This script fetches the pinned version again and checks the files in the tree are
# exactly its files; with --update it writes them (then update the version and hashes here).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.6.32
INTEGRITY="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
JS_SHA256=19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f
CSS_SHA256=df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04
dest=crates/aether-server/console/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$VERSION" >/dev/null)
tarball="$work/uplot-$VERSION.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
[ "$got" = "$INTEGRITY" ] || { echo "uplot@$VERSION: integrity $got, expected $INTEGRITY" >&2; exit 1; }
tar xzf "$tarball" -C "$work"
if [ "${1:-}" = "--update" ]; then
  cp "$work/package/dist/uPlot.iife.min.js" "$work/package/dist/uPlot.min.css" "$dest/"
  cp "$work/package/LICENSE" "$dest/uPlot.LICENSE"
fi
echo "$JS_SHA256  $dest/uPlot.iife.min.js" | sha256sum -c --quiet
echo "$CSS_SHA256  $dest/uPlot.min.css" | sha256sum -c --quiet
cmp -s "$work/package/dist/uPlot.iife.min.js" "$dest/uPlot.iife.min.js"
echo "uplot@$VERSION: the vendored files are the package's"
