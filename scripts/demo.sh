#!/usr/bin/env bash
# README command 1: set up, build, record the bundled allocation workload in
# both allocator modes and show what was recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
out=build/demo
mkdir -p "$out"
echo "== memlayout record (native allocator): 2 threads of allocation churn"
build/bin/memlayout record -o "$out/churn.trace" -- build/bin/alloc_churn 2 200000
echo "== memlayout record --allocator jemalloc"
build/bin/memlayout record -o "$out/churn-jemalloc.trace" --allocator jemalloc -- build/bin/alloc_churn 2 200000
echo "== memlayout dump --symbolize (first events)"
build/bin/memlayout dump "$out/churn.trace" --symbolize | grep -m 12 -E ' (alloc|free) '
echo "== traces in $out/"
ls -l "$out"
