#!/usr/bin/env bash
# Installs what the parity benchmark's reference side needs (bench/parity), when
# missing: scikit-learn, numpy, liblinear's command-line tools, PyTorch. These
# are the benchmark's own dependencies; building and testing Downpour never
# needs them. Needs root (or sudo). Safe to run again.
set -euo pipefail
packages=(python3 python3-numpy python3-sklearn liblinear-tools python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "refs: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "refs: missing packages (${missing[*]}) and not root: run this script as root" >&2
    exit 1
  fi
fi
echo "refs: installing ${missing[*]} (python3-torch alone is ~1 GB installed)"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "refs: done"
