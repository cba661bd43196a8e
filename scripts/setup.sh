#!/usr/bin/env bash
# Installs what memlayout needs on Debian 12 (idempotent: installs only what
# is missing) and configures + builds it into build/.
#   scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config binutils
  libjemalloc-dev libpfm4-dev libzstd-dev zstd
  clang libclang-dev llvm-dev catch2 gnuplot-nox libcli11-dev nlohmann-json3-dev
  sqlite3 chromium libmimalloc2.0) # sqlite3 and libmimalloc for bench/ (record-overhead, seg-pool-bench)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-build" ] && exit 0
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build
