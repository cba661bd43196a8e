#!/usr/bin/env bash
# README command 1: set up, build, record the bundled workload (int-lf's
# node + descriptor allocation pattern from the BST study) under jemalloc, the
# study's allocator, and report where its objects landed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
out=build/demo
mkdir -p "$out"
echo "== memlayout record --allocator jemalloc -- node_descriptor 200000"
build/bin/memlayout record -o "$out/int-lf.trace" --allocator jemalloc -- build/bin/node_descriptor 200000
echo
echo "== memlayout report"
build/bin/memlayout report "$out/int-lf.trace" --top 5
if build/bin/memlayout report --help | grep -q html; then
  build/bin/memlayout report "$out/int-lf.trace" --format html -o "$out/report"
  echo
  echo "== HTML report: $out/report/index.html"
fi
echo
echo "== the same program on glibc's allocator, for comparison"
build/bin/memlayout record -o "$out/int-lf-glibc.trace" -- build/bin/node_descriptor 200000
build/bin/memlayout report "$out/int-lf-glibc.trace" --top 3
