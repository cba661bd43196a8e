#!/usr/bin/env bash
# README command 1: set up, build, record the bundled tree benchmark (int-lf,
# the BST study's headline case: a 64-byte node and a 64-byte descriptor per
# insert) under jemalloc, the study's allocator, print the report and write
# the HTML; then show the fix: the same run with segregated pools, and the diff.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
out=build/demo
mkdir -p "$out"
bench=(build/bin/memlayout-bench --tree int-lf --layout baseline --threads 2 --duration 0
       --key-range 400000 --prefill 200000)
echo "== memlayout record --allocator jemalloc -- ${bench[*]}"
build/bin/memlayout record -o "$out/int-lf.trace" --allocator jemalloc -- "${bench[@]}" --alloc malloc
echo
echo "== memlayout report"
build/bin/memlayout report "$out/int-lf.trace" --top 6
build/bin/memlayout report "$out/int-lf.trace" --format html -o "$out/report"
echo
echo "== HTML report: $out/report/index.html"
echo
echo "== the fix: memlayout advise, then the same run under its rules"
# medium and high: the tree's records; the low findings are on the harness's
# few small objects (its option parser's static tables, strings).
build/bin/memlayout advise "$out/int-lf.trace" --min-severity medium -o "$out/rules.txt"
build/bin/memlayout record -o "$out/int-lf-fixed.trace" --allocator jemalloc --rules "$out/rules.txt" \
  -- "${bench[@]}" --alloc malloc
build/bin/memlayout diff "$out/int-lf.trace" "$out/int-lf-fixed.trace" --rows 12
