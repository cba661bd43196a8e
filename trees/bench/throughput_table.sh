#!/usr/bin/env bash
# Prints docs/trees.md's throughput table: Mops/s of every registered tree,
# both layouts, malloc policy, for 100% lookups and 80/10/10 at 1 and 2
# threads (or the thread counts given), median of RUNS runs of DURATION s.
# The last column is the least CPU share the workers got in any run of the
# row (their CPU time over threads x wall time): below ~95% the machine was
# shared and the row's figures are low.
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
# "mops cpu_share" of one JSON result.
figures() {
  awk -v threads="$1" '{
    match($0, /"duration_s":[0-9.e+-]+/); wall = substr($0, RSTART + 13, RLENGTH - 13)
    match($0, /"mops":[0-9.e+-]+,"per_thread"/); mops = substr($0, RSTART + 7, RLENGTH - 20)
    cpu = 0; s = $0
    while (match(s, /"cpu_seconds":[0-9.e+-]+/)) { cpu += substr(s, RSTART + 14, RLENGTH - 14); s = substr(s, RSTART + RLENGTH) }
    printf "%s %.0f\n", mops, (wall > 0 ? 100 * cpu / (threads * wall) : 0)
  }'
}

header="| tree | layout |"
rule="|---|---|"
for mix in 100/0/0 80/10/10; do
  for t in "${threads[@]}"; do
    header+=" $mix, $t thr |"
    rule+="---:|"
  done
done
echo "$header min CPU% |"
echo "$rule---:|"
for tree in $("$bench" --list | cut -f1); do
  for layout in baseline fixed; do
    row="| $tree | $layout |"
    min_cpu=100
    for mix in 100/0/0 80/10/10; do
      for t in "${threads[@]}"; do
        results=$(for ((r = 0; r < runs; r++)); do
          "$bench" --tree "$tree" --layout "$layout" --alloc malloc --threads "$t" \
            --duration "$duration" --key-range "$key_range" --ops "$mix" --seed $((r + 1)) \
            --format json | figures "$t"
        done)
        m=$(cut -d' ' -f1 <<<"$results" | median)
        c=$(cut -d' ' -f2 <<<"$results" | sort -n | head -1)
        ((c < min_cpu)) && min_cpu=$c
        row+=" $(printf '%.2f' "$m") |"
      done
    done
    echo "$row $min_cpu |"
  done
done
