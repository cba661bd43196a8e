#!/usr/bin/env bash
# Prints docs/trees.md's throughput table: Mops/s of every registered tree,
# both layouts, malloc policy, for 100% lookups and 80/10/10 at 1 and 2
# threads (or the thread counts given), median of RUNS runs of DURATION s.
#   trees/bench/throughput_table.sh BUILD_DIR [KEY_RANGE [DURATION [RUNS [THREADS...]]]]
set -euo pipefail
build=${1:?usage: throughput_table.sh BUILD_DIR [KEY_RANGE [DURATION [RUNS [THREADS...]]]]}
key_range=${2:-65536}
duration=${3:-1}
runs=${4:-3}
shift $(($# < 4 ? $# : 4))
threads=("$@")
((${#threads[@]})) || threads=(1 2)
bench="$build/bin/memlayout-bench"
[ -x "$bench" ] || { echo "throughput_table.sh: no $bench (build memlayout-bench first)" >&2; exit 2; }

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

header="| tree | layout |"
rule="|---|---|"
for mix in 100/0/0 80/10/10; do
  for t in "${threads[@]}"; do
    header+=" $mix, $t thr |"
    rule+="---:|"
  done
done
echo "$header"
echo "$rule"
for tree in $("$bench" --list | cut -f1); do
  for layout in baseline fixed; do
    row="| $tree | $layout |"
    for mix in 100/0/0 80/10/10; do
      for t in "${threads[@]}"; do
        m=$(for ((r = 0; r < runs; r++)); do
          "$bench" --tree "$tree" --layout "$layout" --alloc malloc --threads "$t" \
            --duration "$duration" --key-range "$key_range" --ops "$mix" --seed $((r + 1)) \
            --format json | sed -n 's/.*"mops":\([0-9.e+-]*\),"per_thread".*/\1/p'
        done | median)
        row+=" $(printf '%.2f' "$m") |"
      done
    done
    echo "$row"
  done
done
