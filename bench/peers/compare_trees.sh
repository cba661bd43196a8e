#!/usr/bin/env bash
# memlayout-bench's trees against the published implementations of the same
# algorithms, side by side (docs/trees.md, "Against the published code").
#
#   bench/peers/compare_trees.sh --ascylib PATH --synchrobench PATH --lfibst PATH
#       [--bench BUILD/bin/memlayout-bench] [--out DIR] [--runs N] [--duration S]
#       [--size N] [--range N] [--threads N] [--mixes "80/10/10 100/0/0"]
#       [--trees "occ-avl log-int ..."] [--allocator glibc|jemalloc]
#       [--fixed-alloc segregated|malloc] [--drachsler-bytes N] [--no-build]
#   bench/peers/compare_trees.sh --table-only --out DIR [--trees ...] [--mixes ...]
#       (the table again from DIR/runs.tsv, nothing run)
#
# Each PATH is a snapshot as the `fetch` tool gives it (a git directory, bare
# or not) or a plain source tree: github:LPD-EPFL/ASCYLIB (bst-bronson,
# bst-drachsler, bst-howley, bst-aravind, bst-tk, bst-ellen),
# github:gramoli/synchrobench (the Citrus authors' tree-lock code) and
# github:arunmoezhi/lockFreeIBST (Ramachandran and Mittal's own code). The
# script exports each into OUT/src (nothing of theirs enters this
# repository), builds it there with its own Makefile or compiler line, and:
#
# - links ASCYLIB against bench/peers/ssmem_malloc.c instead of its libssmem,
#   so that its nodes come from malloc, as ours do with --alloc malloc (its
#   own allocator packs every thread's nodes into private chunks);
# - builds lockFreeIBST with std::atomic instead of TBB (its header's switch;
#   Debian's oneTBB has no tbb/atomic.h), returning the result its std::atomic
#   CAS computes and drops.
# - with --drachsler-bytes N, pads bst-drachsler's node to N bytes instead of
#   96 (its padding array; 128 is the study's port, our log-int baseline).
# It notes in OUT/bin/snapshots which commits it built; --no-build runs the
# binaries already in OUT/bin (built earlier, or copied to another machine
# with that file) and reports those commits.
#
# Then, for every run, tree and mix, it runs the peer, our baseline and our
# fixed layout in rotating order (one interleaved series), each with the
# same key range, prefill, threads and duration, under the same malloc
# (--allocator jemalloc preloads Debian's libjemalloc for all three). The
# fixed layout is the study's fixes entire: its records, each kind from a
# pool of its own (--alloc segregated); --fixed-alloc malloc takes its
# records from malloc like the other two, the layout change alone. It
# prints the medians and ratios as a Markdown table. Every process also
# preloads bench/peers/phase_cpu.c, which reports the CPU time its threads
# got during the measured phase: the table gives throughput per wall second
# and per CPU-second of the workers (times the thread count: what the run
# would do with its CPUs to itself), the steadier figure on a shared
# machine. Raw figures: OUT/runs.tsv.
# Defaults: 5 runs of 2 s, 1 M keys in 2 M, 2 threads, mixes 80/10/10 and
# 100/0/0, glibc malloc, OUT = peer-compare.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ascylib="" synchrobench="" lfibst=""
bench="$repo/build/bin/memlayout-bench"
out=peer-compare
runs=5 duration=2 size=1048576 range=2097152 threads=2
mixes="80/10/10 100/0/0"
trees="occ-avl log-int citrus int-lf edge-int-lf edge-ext-lf ticket ext-lf"
allocator=glibc
fixed_alloc=segregated
build=1 table_only=0
drachsler_bytes=""
die() { echo "compare_trees.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
  --ascylib) ascylib=$2; shift 2 ;;
  --synchrobench) synchrobench=$2; shift 2 ;;
  --lfibst) lfibst=$2; shift 2 ;;
  --bench) bench=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --duration) duration=$2; shift 2 ;;
  --size) size=$2; shift 2 ;;
  --range) range=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --mixes) mixes=$2; shift 2 ;;
  --trees) trees=$2; shift 2 ;;
  --allocator) allocator=$2; shift 2 ;;
  --fixed-alloc) fixed_alloc=$2; shift 2 ;;
  --drachsler-bytes) drachsler_bytes=$2; shift 2 ;;
  --no-build) build=0; shift ;;
  --table-only) table_only=1; build=0; shift ;;
  -h | --help) sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for n in runs duration size range threads; do
  [[ "${!n}" =~ ^[0-9]+$ && "${!n}" -gt 0 ]] || die "--$n: expected a positive whole number, got '${!n}'"
done
[[ -z "$drachsler_bytes" || ( "$drachsler_bytes" =~ ^[0-9]+$ && "$drachsler_bytes" -ge 96 ) ]] ||
  die "--drachsler-bytes: expected a whole number of bytes, 96 or more, got '$drachsler_bytes'"
[[ -x "$bench" ]] || die "$bench not found: build memlayout-bench first, or pass --bench"
[[ $fixed_alloc == segregated || $fixed_alloc == malloc ]] ||
  die "--fixed-alloc: expected segregated or malloc, got '$fixed_alloc'"
case "$allocator" in
glibc) preload="" ;;
jemalloc)
  preload=$(ldconfig -p | awk '/libjemalloc\.so\.2 .*x86-64/ {print $NF; exit}')
  [[ -n "$preload" ]] || die "--allocator jemalloc: libjemalloc.so.2 not found (apt-get install libjemalloc2)"
  ;;
*) die "--allocator: expected glibc or jemalloc, got '$allocator'" ;;
esac
mkdir -p "$out/src" "$out/bin"
out=$(cd "$out" && pwd)
if command -v cc >/dev/null; then
  cc -O2 -shared -fPIC -o "$out/bin/phase_cpu.so" "$here/phase_cpu.c" -ldl
elif [[ ! -s "$out/bin/phase_cpu.so" ]]; then
  die "no C compiler to build phase_cpu.so, and none copied into $out/bin"
fi # a --no-build machine without a compiler uses the one copied with the peers
preload="${preload:+$preload:}$out/bin/phase_cpu.so"

# The peer of each tree: which snapshot, and the binary built from it.
declare -A peer_of=(
  [occ-avl]=ascylib:lb-bst_bronson [log-int]=ascylib:lb-bst-drachsler
  [int-lf]=ascylib:lf-bst-howley [edge-ext-lf]=ascylib:lf-bst-aravind
  [ticket]=ascylib:lb-bst_tk [ext-lf]=ascylib:lf-bst_ellen
  [citrus]=synchrobench:MUTEX-RCU-tree [edge-int-lf]=lfibst:lockFreeIbst)

git_dir_of() { # a snapshot's git directory, or nothing for a plain tree
  if [[ -d "$1/.git" ]]; then echo "$1/.git"
  elif [[ -f "$1/HEAD" && -d "$1/objects" ]]; then echo "$1"
  fi
}
commit_of() {
  local g; g=$(git_dir_of "$1")
  if [[ -n "$g" ]]; then git --git-dir="$g" rev-parse HEAD; else echo "unknown (plain tree)"; fi
}
export_snapshot() { # PATH DEST
  rm -rf "$2"; mkdir -p "$2"
  local g; g=$(git_dir_of "$1")
  if [[ -n "$g" ]]; then git --git-dir="$g" archive HEAD | tar -x -C "$2"
  else cp -r "$1/." "$2/"; fi
}
needs() { # SNAPSHOT-NAME: whether a selected tree uses it
  local t; for t in $trees; do [[ "${peer_of[$t]%%:*}" == "$1" ]] && return 0; done; return 1
}

build_ascylib() {
  local src="$out/src/ascylib"
  export_snapshot "$ascylib" "$src"
  cc -O3 -Wall -I"$src/external/include" -c "$here/ssmem_malloc.c" -o "$out/src/ssmem_malloc.o"
  rm -f "$src/external/lib/libssmem_x86_64.a"
  if [[ -n "$drachsler_bytes" ]]; then
    local h="$src/src/bst-drachsler/bst-drachsler.h"
    grep -q 'char padding\[96-' "$h" || die "--drachsler-bytes: no 96-byte padding array in $h"
    sed -i "s/char padding\[96-/char padding[$drachsler_bytes-/" "$h"
  fi
  ar rcs "$src/external/lib/libssmem_x86_64.a" "$out/src/ssmem_malloc.o"
  local mk=(make -C "$src" FREQ_GHZ=1 CORE_NUM="$(nproc)") log="$out/src/ascylib-build.log"
  "${mk[@]}" bst_bronson bst_drachsler bst_tk >"$log" 2>&1 || die "ASCYLIB did not build (see $log)"
  "${mk[@]}" STM=LOCKFREE src/bst-howley src/bst-aravind src/bst-ellen >>"$log" 2>&1 ||
    die "ASCYLIB did not build (see $log)"
  for b in lb-bst_bronson lb-bst-drachsler lb-bst_tk lf-bst-howley lf-bst-aravind lf-bst_ellen; do
    [[ -x "$src/bin/$b" ]] || die "ASCYLIB: $b did not build (see $out/src/ascylib-build.log)"
    cp "$src/bin/$b" "$out/bin/"
  done
}
build_synchrobench() {
  local src="$out/src/synchrobench"
  export_snapshot "$synchrobench" "$src"
  make -C "$src/c-cpp/src/trees/tree-lock" >"$out/src/synchrobench-build.log" 2>&1 ||
    die "synchrobench: citrus did not build (see $out/src/synchrobench-build.log)"
  cp "$src/c-cpp/bin/MUTEX-RCU-tree" "$out/bin/"
}
build_lfibst() {
  local src="$out/src/lfibst"
  export_snapshot "$lfibst" "$src"
  # Without TBB its CAS falls through to a compare_exchange_strong whose
  # result it forgets to return; the build returns it.
  sed -i 's|^#define TBB|// #define TBB|' "$src/src/header.h"
  sed -i 's|^\([[:space:]]*\)parent->child\[which\]\.compare_exchange_strong|\1return parent->child[which].compare_exchange_strong|' \
    "$src/src/helper.h"
  g++ -O3 -std=gnu++11 -march=native -w -o "$out/bin/lockFreeIbst" "$src/src/TestLockFree.cpp" \
    -lgsl -lgslcblas -lpthread -lrt >"$out/src/lfibst-build.log" 2>&1 ||
    die "lockFreeIBST did not build (see $out/src/lfibst-build.log; it needs libgsl-dev)"
}

# Which snapshots the binaries in OUT/bin came from: written by the build,
# read back by a --no-build run (which may run on another machine).
snapshots="$out/bin/snapshots"
if [[ $build == 1 ]]; then
  if needs ascylib; then [[ -n "$ascylib" ]] || die "--ascylib PATH is required"; build_ascylib; fi
  if needs synchrobench; then [[ -n "$synchrobench" ]] || die "--synchrobench PATH is required"; build_synchrobench; fi
  if needs lfibst; then [[ -n "$lfibst" ]] || die "--lfibst PATH is required"; build_lfibst; fi
  echo "ASCYLIB $(commit_of "${ascylib:-/nonexistent}")${drachsler_bytes:+ (the bst-drachsler node padded to $drachsler_bytes bytes)}, synchrobench $(commit_of "${synchrobench:-/nonexistent}"), lockFreeIBST $(commit_of "${lfibst:-/nonexistent}")" >"$snapshots"
elif [[ $table_only == 0 && ! -s "$snapshots" ]]; then
  echo "ASCYLIB unknown, synchrobench unknown, lockFreeIBST unknown (no $snapshots)" >"$snapshots"
fi

# One run: prints "Mops/s wall-s cpu-s". $1 variant (peer|baseline|fixed), $2 tree, $3 mix.
run_one() {
  local mops phase
  phase=$(mktemp)
  mops=$(run_harness "$@" 2>"$phase" | tail -1)
  local w c
  read -r w c < <(sed -n 's/^phase_cpu: wall \([0-9.]*\) cpu \([0-9.]*\)$/\1 \2/p' "$phase" | tail -1)
  rm -f "$phase"
  echo "${mops:-nan} ${w:-nan} ${c:-nan}"
}

# Runs one harness; prints its Mops/s on stdout, its phase_cpu line on stderr.
run_harness() {
  local variant=$1 tree=$2 mix=$3 l i r
  IFS=/ read -r l i r <<<"$mix"
  local env=(env LD_PRELOAD="$preload")
  if [[ $variant != peer ]]; then
    # ASCYLIB pins thread i to CPU i; so does --pin.
    local pin=""; [[ "${peer_of[$tree]%%:*}" == ascylib ]] && pin=--pin
    local alloc=malloc; [[ $variant == fixed ]] && alloc=$fixed_alloc
    "${env[@]}" "$bench" --tree "$tree" --layout "$variant" --alloc "$alloc" --threads "$threads" \
      --duration "$duration" --key-range "$range" --prefill "$size" --ops "$mix" --seed "$seed" $pin --format json |
      grep -o '"mops":[0-9.e+-]*' | head -1 | cut -d: -f2 # the first: the run's, not a thread's
    return
  fi
  local bin="$out/bin/${peer_of[$tree]#*:}"
  case "${peer_of[$tree]%%:*}" in
  ascylib)
    "${env[@]}" "$bin" -d $((duration * 1000)) -i "$size" -r "$range" -n "$threads" \
      -u $((i + r)) -p "$i" | sed -n 's/^#Mops *\([0-9.]*\).*/\1/p' ;;
  synchrobench)
    # -f 0: --ops counts update attempts, as ours do.
    "${env[@]}" "$bin" -d $((duration * 1000)) -i "$size" -r "$range" -t "$threads" -u $((i + r)) -f 0 |
      awk '/^#txs/ { gsub(/[()]/, "", $4); printf "%.3f\n", $4 / 1e6 }' ;;
  lfibst)
    # Its key range is MAX-1 and it prefills half of it.
    "${env[@]}" "$bin" "$threads" "$l" "$i" "$r" "$duration" $((range + 1)) 1 | awk -F';' 'NF > 1 { print $NF }' ;;
  esac
}

machine="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
variants=(peer baseline fixed)
if [[ $table_only == 1 ]]; then
  [[ -s "$out/runs.tsv" ]] || die "--table-only: no $out/runs.tsv"
  runs=$(awk -F'\t' '$1 ~ /^[0-9]+$/ && $1 > n { n = $1 } END { print n + 0 }' "$out/runs.tsv")
  machine=$(sed -n '1s/^# [^ ]* \(.*\); allocator.*/\1/p' "$out/runs.tsv")
  fixed_alloc=$(sed -n '1s/.*; fixed records from \([a-z]*\);.*/\1/p' "$out/runs.tsv")
  fixed_alloc=${fixed_alloc:-malloc} # tables written before the option: malloc
else
{
  echo "# $(date -u +%FT%TZ) $machine; allocator $allocator; fixed records from $fixed_alloc; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $(cat "$snapshots")"
  echo -e "run\ttree\tmix\tvariant\tmops\twall_s\tcpu_s\tseed"
} >"$out/runs.tsv"
for ((run = 1; run <= runs; ++run)); do
  # The published harnesses seed their generators from the clock, so each
  # run is another random tree; ours takes a fresh seed per run likewise (one
  # fixed seed is one tree: seed 1's log-int is 3% deeper than the average
  # of seeds 1-9 at 1 M keys, a handicap in every run).
  seed=$((RANDOM << 15 | RANDOM | 1))
  for tree in $trees; do
    for mix in $mixes; do
      for ((k = 0; k < 3; ++k)); do
        v=${variants[$(((run + k) % 3))]}
        read -r m w c < <(run_one "$v" "$tree" "$mix" || echo nan nan nan)
        s=$seed; [[ $v == peer ]] && s=-
        echo -e "$run\t$tree\t$mix\t$v\t$m\t$w\t$c\t$s" >>"$out/runs.tsv"
      done
    done
  done
  echo "compare_trees.sh: run $run of $runs done" >&2
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/runs.tsv"
fi

# Median over the runs of column-expression E for one tree, mix and variant.
median() { # TREE MIX VARIANT AWK-EXPR
  awk -F'\t' -v t="$1" -v m="$2" -v v="$3" '$2 == t && $3 == m && $4 == v && $5 != "nan" && $7 != "nan" && $7 > 0 { print '"$4"' }' "$out/runs.tsv" |
    sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# Per run, VARIANT's "at full CPU" figure over the published code's in the same
# run: the median of those ratios and their range. The three sides of a run
# ran back to back, so a ratio within a run shares most of the load it met.
paired() { # TREE MIX VARIANT
  awk -F'\t' -v t="$1" -v m="$2" -v v="$3" -v n="$threads" '
    $2 == t && $3 == m && $5 != "nan" && $7 != "nan" && $7 > 0 { full[$1 "," $4] = $5 * $6 * n / $7; runs[$1] = 1 }
    END {
      k = 0
      for (r in runs) if ((r "," v) in full && (r ",peer") in full && full[r ",peer"] > 0) x[++k] = full[r "," v] / full[r ",peer"]
      if (k == 0) { print "nan"; exit }
      for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (x[j] < x[i]) { y = x[i]; x[i] = x[j]; x[j] = y }
      med = k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
      printf "%.2f (%.2f–%.2f)\n", med, x[1], x[k]
    }' "$out/runs.tsv"
}
echo "Median of $runs interleaved runs of ${duration} s; $size keys in $range, $threads threads; $machine;"
if [[ $fixed_alloc == segregated ]]; then
  echo "$allocator malloc for every process, the fixed layout's records from pools (--alloc segregated);"
else
  echo "$allocator malloc for every process and record;"
fi
echo "$(sed -n '2s/^# //p' "$out/runs.tsv")."
echo "Mops/s per wall second, and per CPU-second of the workers times $threads (\"at full CPU\")."
echo "$(sed -n '1s/.*load before/load before/p' "$out/runs.tsv"); $(tail -1 "$out/runs.tsv" | sed 's/^# //')."
echo
echo "The ratios: of the medians; then the median (and range) of each run's own ratio."
echo
echo "| tree | mix | published code | Mops/s: published | baseline | fixed | at full CPU: published | baseline | fixed | baseline / published | fixed / published | baseline / published, per run | fixed / published, per run |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for tree in $trees; do
  for mix in $mixes; do
    declare -A wall=() full=()
    for v in "${variants[@]}"; do
      wall[$v]=$(median "$tree" "$mix" "$v" '$5')
      full[$v]=$(median "$tree" "$mix" "$v" "\$5 * \$6 * $threads / \$7")
    done
    awk -v t="$tree" -v m="$mix" -v p="${peer_of[$tree]}" \
      -v pb="$(paired "$tree" "$mix" baseline)" -v pf="$(paired "$tree" "$mix" fixed)" \
      -v a="${wall[peer]}" -v b="${wall[baseline]}" -v f="${wall[fixed]}" \
      -v A="${full[peer]}" -v B="${full[baseline]}" -v F="${full[fixed]}" \
      'BEGIN { printf "| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", t, m, p, a, b, f, A, B, F, (A > 0 ? B / A : 0), (A > 0 ? F / A : 0), pb, pf }'
  done
done
