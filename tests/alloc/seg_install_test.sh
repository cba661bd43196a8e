#!/bin/sh
# seg_install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
# Installs libmemlayout_seg (component "seg") to a prefix, moves the prefix
# (it must be relocatable), then builds and runs a C program through
# pkg-config and a C/C++ project through find_package(memlayout).
set -eu
build=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/installed" --component seg >/dev/null
mv "$work/installed" "$work/moved"
prefix=$work/moved
for f in lib/libmemlayout_seg.so include/memlayout/seg.h include/memlayout/seg.hpp \
         lib/pkgconfig/memlayout-seg.pc lib/cmake/memlayout/memlayout-config.cmake; do
  [ -e "$prefix/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
done

# pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cflags=$(pkg-config --cflags memlayout-seg)
libs=$(pkg-config --libs memlayout-seg)
includedir=$(pkg-config --variable=includedir memlayout-seg)
if [ "$(cd "$includedir" && pwd -P)" != "$(cd "$prefix/include" && pwd -P)" ]; then
  echo "pkg-config's includedir is not the moved prefix's: $includedir" >&2
  exit 1
fi
${CC:-cc} -o "$work/pkgconfig_demo" "$src/install/demo.c" $cflags $libs
LD_LIBRARY_PATH="$prefix/lib" "$work/pkgconfig_demo"

# find_package(memlayout)
cmake -S "$src/install" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer_c"
"$work/consumer/consumer_cxx"

# The C++ header below C++17 says what it needs, rather than failing deep
# inside (clang 14 defaults to C++14).
printf '#include <memlayout/seg.hpp>\n' > "$work/cxx14.cpp"
if ${CXX:-c++} -std=c++14 -fsyntax-only $cflags "$work/cxx14.cpp" 2>"$work/cxx14.err"; then
  echo "<memlayout/seg.hpp> compiled as C++14" >&2
  exit 1
fi
grep -q "needs C++17 or later" "$work/cxx14.err" ||
  { echo "<memlayout/seg.hpp> as C++14 did not say it needs C++17:" >&2; cat "$work/cxx14.err" >&2; exit 1; }
