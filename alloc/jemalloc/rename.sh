#!/bin/sh
# rename.sh IN.a OUT.a: copy jemalloc's PIC archive with its public API renamed
# to mlje_* and without the C++ operators and the load-time constructor.
set -eu
in=$1 out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"${AR:-ar}" x "$in"
rm -f jemalloc_cpp.pic.o
# Public symbols: everything defined and global that is not already je_-prefixed.
"${NM:-nm}" -g --defined-only ./*.o | awk 'NF==3 {print $3}' | grep -v '^je_' | sort -u |
  awk '{print $1 " mlje_" $1}' > syms
# jemalloc's thread data key: created by tsd_key.cpp, which puts jemalloc's
# cleanup off so that the program's key destructors run before it.
echo "pthread_key_create memlayout_seg_tsd_key_create" >> syms
for o in ./*.o; do "${OBJCOPY:-objcopy}" --redefine-syms=syms "$o"; done
# jemalloc_constructor would initialise jemalloc in every process we are loaded
# into; without it jemalloc initialises lazily on its first allocation.
"${OBJCOPY:-objcopy}" --remove-section=.init_array --remove-section=.rela.init_array jemalloc.pic.o
rm -f "$out"
"${AR:-ar}" rcs "$out" ./*.o
