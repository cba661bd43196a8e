// Small objects a thread freed, kept for its next allocations from the same
// pool: one magazine per (thread, pool), in front of that pair's jemalloc
// thread cache.
//
// Why: jemalloc's explicit-cache paths (mallocx/dallocx with flags) cost
// 1.4-1.5x its plain malloc/free here, before any work of ours. A hit in the
// magazine costs a pop or a push; the free side learns the size class from
// sallocx. Reuse order is what jemalloc's own cache gives (last freed, first
// reused) and fresh objects still come from jemalloc in its order, so the
// layout a pool produces is unchanged. Only objects of this pool enter its
// magazines, so isolation holds as for the caches behind them.
//
// Classes 8..1024 bytes; each class holds at most 16 KiB or 256 objects.
// A full class sends its older half to jemalloc's cache. Memory: one
// 20 KiB mapping per (thread, pool) that has freed something.
#pragma once

#include "size_class.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::seg {

inline constexpr size_t kMagazineMaxSize = 1024;
inline constexpr unsigned kMagazineClasses = 21; // 8, 16, 32, 48, ... 1024

namespace magazine_detail {

struct Tables {
  uint32_t size[kMagazineClasses] = {};
  uint32_t capacity[kMagazineClasses] = {};
  uint32_t first_slot[kMagazineClasses] = {};
  uint8_t class_of_bucket[kMagazineMaxSize / 8 + 1] = {}; // by (bytes + 7) / 8
  uint32_t total_slots = 0;
};

constexpr Tables make_tables() {
  Tables t;
  unsigned c = 0;
  for (size_t bytes = 8; bytes <= kMagazineMaxSize; bytes += 8) {
    size_t cls = jemalloc_size_class(bytes);
    if (c == 0 || t.size[c - 1] != cls)
      t.size[c++] = static_cast<uint32_t>(cls);
    t.class_of_bucket[bytes / 8] = static_cast<uint8_t>(c - 1);
  }
  for (unsigned i = 0; i < kMagazineClasses; ++i) {
    uint32_t by_bytes = 16384 / t.size[i];
    t.capacity[i] = by_bytes < 256 ? by_bytes : 256;
    t.first_slot[i] = t.total_slots;
    t.total_slots += t.capacity[i];
  }
  return t;
}

inline constexpr Tables kTables = make_tables();
static_assert(kTables.size[kMagazineClasses - 1] == kMagazineMaxSize);
static_assert(kTables.size[3] == 48 && kTables.class_of_bucket[6] == 3 &&
              kTables.class_of_bucket[7] == 4);

} // namespace magazine_detail

// The class of a request of `bytes` (1..kMagazineMaxSize) or of a usable size.
inline unsigned magazine_class(size_t bytes) {
  return magazine_detail::kTables.class_of_bucket[(bytes + 7) / 8];
}
inline size_t magazine_class_size(unsigned c) { return magazine_detail::kTables.size[c]; }

// Written by the owning thread only; others touch a magazine only when its
// owner is gone or may not use it (pool destroyed, fork child).
struct Magazine {
  uint32_t count[kMagazineClasses];
  void *slots[magazine_detail::kTables.total_slots];

  void *pop(unsigned c) {
    uint32_t n = count[c];
    if (!n)
      return nullptr;
    count[c] = n - 1;
    return slots[magazine_detail::kTables.first_slot[c] + n - 1];
  }
  // False when the class is full.
  bool push(unsigned c, void *p) {
    uint32_t n = count[c];
    if (n == magazine_detail::kTables.capacity[c])
      return false;
    slots[magazine_detail::kTables.first_slot[c] + n] = p;
    count[c] = n + 1;
    return true;
  }
};

// A zeroed magazine from its own mapping; NULL when none can be mapped.
Magazine *magazine_create();
void magazine_destroy(Magazine *m);

// Hands the older half of a full class to jemalloc (sdallocx with `flags`),
// making room for a push.
void magazine_spill(Magazine *m, unsigned c, int flags);
// Hands every object to jemalloc; the magazine is empty after.
void magazine_flush(Magazine *m, int flags);

} // namespace memlayout::seg
