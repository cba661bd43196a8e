#!/usr/bin/env bash
# The long soak of every tree: the stress regime of the test suite
# (tests/trees/stress_test.cpp, docs/testing.md) run for minutes per tree
# instead of seconds, with fresh seeds. Prints one line per tree and a
# Markdown table of runs, seeds, operations and failures; the failures'
# command lines and reports go to the log. Exit status 1 when any run failed.
#
#   scripts/soak_trees.sh [--build DIR] [--minutes-per-tree M] [--seed FIRST]
#                         [--trees "occ-avl ticket"] [--log FILE]
#
# Defaults: build, 5 minutes, seed 1000001 (the suite uses 1 upward), every
# tree memlayout-bench lists, log soak-trees.log. Runs under nice -n 5.
set -euo pipefail

build=build
minutes=5
seed=1000001
trees=""
log=soak-trees.log
while [[ $# -gt 0 ]]; do
  case "$1" in
  --build) build=$2; shift 2 ;;
  --minutes-per-tree) minutes=$2; shift 2 ;;
  --seed) seed=$2; shift 2 ;;
  --trees) trees=$2; shift 2 ;;
  --log) log=$2; shift 2 ;;
  -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "soak_trees.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$minutes" =~ ^[0-9]+$ && "$minutes" -gt 0 ]] ||
  { echo "soak_trees.sh: --minutes-per-tree: expected a whole number of minutes, got '$minutes'" >&2; exit 2; }
[[ "$seed" =~ ^[0-9]+$ ]] ||
  { echo "soak_trees.sh: --seed: expected an unsigned integer, got '$seed'" >&2; exit 2; }
tests="$build/bin/trees_bench_tests"
bench="$build/bin/memlayout-bench"
for f in "$tests" "$bench"; do
  [[ -x "$f" ]] || { echo "soak_trees.sh: $f not found: build first (cmake --build $build)" >&2; exit 2; }
done
[[ -n "$trees" ]] || trees=$("$bench" --list | cut -f1 | tr '\n' ' ')

: >"$log"
echo "soak: $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')), $minutes min per tree, first seed $seed, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
summary=()
failed=0
for tree in $trees; do
  out=$(MEMLAYOUT_STRESS_SECONDS=$((minutes * 60)) MEMLAYOUT_STRESS_SEED=$seed MEMLAYOUT_BENCH=$bench \
    nice -n 5 "$tests" "[stress][$tree]" 2>&1) || failed=1
  echo "$out" >>"$log"
  line=$(grep -E "^stress $tree: [0-9]+ runs" <<<"$out" || echo "stress $tree: did not report (see $log)")
  echo "$line"
  summary+=("$line")
  [[ "$line" == *" 0 failed,"* ]] || failed=1
done

echo
echo "| tree | runs | seeds | operations | of which checked for linearizability | failed | seconds |"
echo "|---|---:|---|---:|---:|---:|---:|"
for line in "${summary[@]}"; do
  # stress T: R runs, seeds A..B, O operations, H checked for linearizability, F failed, S s, C CPUs
  sed -E 's/^stress ([^:]+): ([0-9]+) runs, seeds ([0-9.]+), ([0-9]+) operations, ([0-9]+) checked for linearizability, ([0-9]+) failed, ([0-9]+) s, .*/| \1 | \2 | \3 | \4 | \5 | \6 | \7 |/' <<<"$line"
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
exit $failed
