#!/usr/bin/env bash
# Installs everything quanta needs on a fresh Debian/Ubuntu machine. Idempotent: packages
# already present are skipped. CUDA (nvcc) is optional and never installed here: with it the
# CUDA backend is built too.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential ninja-build ccache pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev          # formatting, JSON, CLI parsing
  libgtest-dev libgmock-dev libbenchmark-dev          # tests
  libopenblas-dev                                     # CPU baselines in the bench
  clang libclang-rt-14-dev                            # fuzzers and sanitizers
  python3 python3-pip
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# CMake >= 3.28 (nvcc 13's C++20 dialect) and the bench's plotting come from PyPI.
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements.txt 2>&1 \
  | grep -v "Running pip as the 'root' user" || true
