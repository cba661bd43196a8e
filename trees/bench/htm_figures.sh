#!/usr/bin/env bash
# The HTM figures of docs/trees.md, as markdown tables: the studies' effects
# reproduced on the emulator (Eunomia's abort breakdown and its cure,
# Makreshanski's capacity aborts by key size, Karnagel's uneven set use) and
# the trees' throughput.
#
#   trees/bench/htm_figures.sh BUILD_DIR [SECONDS] [which...]
#
# which: breakdown ablation keys layout throughput (default: all). SECONDS is
# the measured time of each lockstep run (default 20). Runs one benchmark at a
# time; nice it on a shared machine.
set -euo pipefail
build=${1:?usage: htm_figures.sh BUILD_DIR [SECONDS] [which...]}
secs=${2:-20}
shift 2 || shift $#
which=${*:-breakdown ablation keys layout throughput}
bench="$build/bin/memlayout-bench"
memlayout="$build/bin/memlayout"
[[ -x $bench ]] || { echo "htm_figures.sh: no $bench (build first)" >&2; exit 2; }

# Fields of one JSON result, by a Python expression over `d` (the result)
# and `h` (its htm object).
field() { python3 -c "import json,sys; d=json.load(sys.stdin); h=d.get('htm',{}); print($1)"; }

# Eunomia's Figure 2 and 9: why a B+tree's transactions abort under a skewed
# put-heavy load, and what Euno-B+Tree leaves of it. 8 threads in lockstep.
if [[ $which == *breakdown* ]]; then
  echo "### Conflict aborts under Zipf put-heavy load, hot keys adjacent (8 threads, lockstep)"
  echo
  echo "update: every key present (prefill 1.0), 50% get / 50% put; churn: half the keys present,"
  echo "40% get / 10% remove / 50% put (puts of absent keys insert)."
  echo
  echo "| workload | tree | layout | theta | aborts/op | conflict aborts | false | true | other keys, disjoint bytes | other keys, same bytes | same key | fallback lock | fallbacks/op |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for workload in update churn; do
    if [[ $workload == update ]]; then args=(--prefill 1.0 --ops 50/0/0/50); else args=(--prefill 0.5 --ops 40/0/10/50); fi
    for theta in 0.9 0.99; do
      for tree in htm-bptree euno-bptree; do
        for layout in baseline fixed; do
          "$bench" --tree "$tree" --layout "$layout" --threads 8 --duration "$secs" \
            --key-range 100000 "${args[@]}" --dist "zipf-adjacent:$theta" \
            --htm emulate --htm-schedule lockstep --format json |
            field "'| $workload | $tree | $layout | $theta | %.4f | %d | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %.5f |' % (
              h['aborts_per_op'], h['aborts']['conflict'],
              *[100*x/max(1,h['aborts']['conflict']) for x in (h['conflicts']['false'], h['conflicts']['true'],
                h['conflicts']['other_key_false'], h['conflicts']['other_key_true'], h['conflicts']['same_key'],
                h['conflicts']['fallback_lock'])], h['fallbacks']/max(1,d['ops']))"
        done
      done
    done
  done
  echo
fi

# Eunomia's Figure 13: the conflict control's part (lock and mark bits).
if [[ $which == *ablation* ]]; then
  echo "### Euno-B+Tree's conflict control (fixed layout, 8 threads, lockstep, theta 0.99, churn)"
  echo
  echo "| conflict control | aborts/op | conflict aborts | same key | ops/s (lockstep) |"
  echo "|---|---:|---:|---:|---:|"
  for control in never adaptive always; do
    "$bench" --tree euno-bptree --layout fixed --threads 8 --duration "$secs" --key-range 100000 \
      --prefill 0.5 --ops 40/0/10/50 --dist zipf-adjacent:0.99 --htm emulate --htm-schedule lockstep \
      --euno-control "$control" --format json |
      field "'| $control | %.4f | %d | %d | %.0f |' % (h['aborts_per_op'], h['aborts']['conflict'], h['conflicts']['same_key'], d['mops']*1e6)"
  done
  echo
fi

# Makreshanski's Figure 4a: read-only lookups abort for capacity as keys grow.
if [[ $which == *keys* ]]; then
  echo "### Capacity aborts of read-only lookups by key size (htm-bptree, 1 M keys, 256-byte nodes, 1 thread)"
  echo
  echo "| key bytes | capacity aborts/lookup, L1 64x8 | fallbacks/lookup | capacity aborts/lookup, L1 64x4 (two hyperthreads) | fallbacks/lookup |"
  echo "|---:|---:|---:|---:|---:|"
  for kb in 8 16 32 64 128; do
    row="| $kb"
    for l1 in 64x8 64x4; do
      row+=" | $("$bench" --tree htm-bptree --layout baseline --threads 1 --duration 2 \
        --key-range 1000000 --prefill 1.0 --ops 100/0/0 --key-bytes "$kb" --htm emulate \
        --htm-l1 "$l1" --format json |
        field "'%.3f | %.4f' % (h['aborts']['capacity']/max(1,d['ops']), h['fallbacks']/max(1,d['ops']))")"
    done
    echo "$row |"
  done
  echo
fi

# Karnagel's uneven set use: 4 KiB nodes that all start at a page boundary
# (jemalloc's 4096-byte class) pile their search lines onto a few sets.
if [[ $which == *layout* ]]; then
  echo "### Capacity aborts from nodes aligned alike (htm-bptree, 4032-byte nodes, 64-byte keys, L1 64x4, 300 k keys, lookups)"
  echo
  echo "| allocator | node placement | capacity aborts/lookup | fallbacks/lookup |"
  echo "|---|---|---:|---:|"
  tmp=$(mktemp -d)
  for alloc in native jemalloc; do
    "$memlayout" record -o "$tmp/$alloc.trace" --allocator "$alloc" -- "$bench" --tree htm-bptree \
      --threads 1 --duration 2 --key-range 300000 --prefill 1.0 --ops 100/0/0 --node-bytes 4032 \
      --key-bytes 64 --htm emulate --htm-l1 64x4 --format json >"$tmp/$alloc.json" 2>/dev/null
    placement=$([[ $alloc == jemalloc ]] && echo "page-aligned (4096 class)" || echo "4064-byte chunks")
    field "'| $alloc | $placement | %.3f | %.4f |' % (h['aborts']['capacity']/max(1,d['ops']), h['fallbacks']/max(1,d['ops']))" <"$tmp/$alloc.json"
  done
  echo
  echo '```'
  "$memlayout" report "$tmp/jemalloc.trace" --at mark:measured | grep -A1 'htm_capacity' | head -2 | cut -c1-400
  echo '```'
  rm -rf "$tmp"
  echo
fi

# Throughput, free schedule (the OS's), median of 3 interleaved runs.
if [[ $which == *throughput* ]]; then
  echo "### Throughput (Mops/s, key range 1 M half prefilled, median of 3 runs of 2 s)"
  echo
  echo "| tree | layout | htm | 50/0/0/50 uniform, 1 thr | 2 thr | 50/0/0/50 zipf 0.99, 1 thr | 2 thr |"
  echo "|---|---|---|---:|---:|---:|---:|"
  for tree in htm-bptree euno-bptree; do
    for layout in baseline fixed; do
      for htm in emulate lock; do
        row="| $tree | $layout | $htm"
        for dist in uniform zipf:0.99; do
          for threads in 1 2; do
            runs=()
            for rep in 1 2 3; do
              runs+=("$("$bench" --tree "$tree" --layout "$layout" --threads "$threads" --duration 2 \
                --key-range 1000000 --ops 50/0/0/50 --dist "$dist" --htm "$htm" --format json |
                field "d['mops']")")
            done
            row+=" | $(printf '%s\n' "${runs[@]}" | sort -g | sed -n 2p | xargs printf '%.3f')"
          done
        done
        echo "$row |"
      done
    done
  done
  echo
fi
