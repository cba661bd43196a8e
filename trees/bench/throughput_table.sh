#!/usr/bin/env bash
# Prints docs/trees.md's throughput table: Mops/s of every registered tree,
# both layouts, malloc policy, for 100% lookups and 80/10/10 at 1 and 2
# threads (or the thread counts given), median of RUNS runs of DURATION s.
# The last column is the least CPU share the workers got in any run of the
# row (their CPU time over threads x wall time): below ~95% the machine was
# shared and the row's figures are low. A second table divides each run's
# Mops/s by that share: what the threads did per second of CPU they got
# (closer to an idle machine's figure, though a shared cache still costs).
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
    share = wall > 0 ? cpu / (threads * wall) : 0
    printf "%s %.0f %s\n", mops, 100 * share, (share > 0 ? mops / share : 0)
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
wall_table="$header min CPU% |"$'\n'"$rule---:|"
cpu_table="$header"$'\n'"$rule"
for tree in $("$bench" --list | cut -f1); do
  for layout in baseline fixed; do
    row="| $tree | $layout |"
    cpu_row="$row"
    min_cpu=100
    for mix in 100/0/0 80/10/10; do
      for t in "${threads[@]}"; do
        results=$(for ((r = 0; r < runs; r++)); do
          "$bench" --tree "$tree" --layout "$layout" --alloc malloc --threads "$t" \
            --duration "$duration" --key-range "$key_range" --ops "$mix" --seed $((r + 1)) \
            --format json | figures "$t"
        done)
        c=$(cut -d' ' -f2 <<<"$results" | sort -n | head -1)
        ((c < min_cpu)) && min_cpu=$c
        row+=" $(printf '%.2f' "$(cut -d' ' -f1 <<<"$results" | median)") |"
        cpu_row+=" $(printf '%.2f' "$(cut -d' ' -f3 <<<"$results" | median)") |"
      done
    done
    wall_table+=$'\n'"$row $min_cpu |"
    cpu_table+=$'\n'"$cpu_row"
  done
done
echo "Mops/s, key range $key_range, median of $runs runs of $duration s, malloc policy:"
echo
echo "$wall_table"
echo
echo "Mops per CPU-second (each run's Mops/s over its CPU share), same runs:"
echo
echo "$cpu_table"
