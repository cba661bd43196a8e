// Helpers shared by the segregation-pool tests.
#pragma once

#include <memlayout/seg.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace seg_test {

struct Bounds {
  uintptr_t begin = 0, end = 0;
  bool contains(const void *p) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    return a >= begin && a < end;
  }
};

inline Bounds bounds_of(const seg_pool *pool) {
  struct seg_pool_stats s {};
  if (seg_pool_stats(pool, &s) != 0)
    return {};
  return {s.range_begin, s.range_end};
}

inline struct seg_pool_stats stats_of(const seg_pool *pool) {
  struct seg_pool_stats s {};
  seg_pool_stats(pool, &s);
  return s;
}

// The line of /proc/self/maps of the mapping holding addr ("" when none).
inline std::string mapping_of(uintptr_t addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  std::string found;
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi) {
      found = line;
      break;
    }
  }
  if (f)
    fclose(f);
  return found;
}

// The VmFlags line of the smaps entry starting at addr ("" when none).
inline std::string vm_flags_of(uintptr_t addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  std::string flags;
  char line[512];
  bool in_mapping = false;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
      in_mapping = lo <= addr && addr < hi;
    else if (in_mapping && !strncmp(line, "VmFlags:", 8)) {
      flags = line;
      break;
    }
  }
  if (f)
    fclose(f);
  return flags;
}

} // namespace seg_test
