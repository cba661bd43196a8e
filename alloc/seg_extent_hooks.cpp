// jemalloc's convention: the bool hooks return false on success.
#include "seg_extent_hooks.h"

#include <algorithm>

namespace memlayout::seg {

namespace {

Range &range_of(extent_hooks_t *hooks) { return reinterpret_cast<PoolHooks *>(hooks)->pool->range; }

void *extent_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment, bool *zero,
                   bool *commit, unsigned) {
  void *p = range_of(hooks).carve(new_addr, size, alignment);
  if (p) {
    *zero = true; // fresh or purged pages
    *commit = true;
  }
  return p;
}

// Taken back into the range's free list (purged), so that jemalloc does not
// keep it: only then is false returned.
bool extent_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool, unsigned) {
  return !range_of(hooks).give_back(addr, size);
}

// The arena is being destroyed; the range is unmapped right after.
void extent_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool, unsigned) {
  range_of(hooks).give_back(addr, size);
}

bool extent_commit(extent_hooks_t *hooks, void *addr, size_t, size_t offset, size_t length,
                   unsigned) {
  return !range_of(hooks).commit(static_cast<char *>(addr) + offset, length);
}

bool extent_decommit(extent_hooks_t *hooks, void *addr, size_t, size_t offset, size_t length,
                     unsigned) {
  return !range_of(hooks).decommit(static_cast<char *>(addr) + offset, length);
}

bool extent_purge_lazy(extent_hooks_t *, void *addr, size_t, size_t offset, size_t length,
                       unsigned) {
  return !Range::purge_lazy(static_cast<char *>(addr) + offset, length);
}

bool extent_purge_forced(extent_hooks_t *, void *addr, size_t, size_t offset, size_t length,
                         unsigned) {
  return !Range::purge_forced(static_cast<char *>(addr) + offset, length);
}

// Any two adjacent extents of one range may be split and merged: the range
// keeps no per-extent state. Left NULL, jemalloc cannot reuse a retained
// extent for a smaller request and keeps growing into the range.
bool extent_split(extent_hooks_t *, void *, size_t, size_t, size_t, bool, unsigned) {
  return false;
}

// jemalloc reuses a freed (dirty) extent for a request only where the
// extent is at most 64 times as large (opt.lg_extent_max_active_fit): the
// freed slabs of a class (5 or 7 pages for 1280 and 3584 bytes) merged into
// one span of megabytes were never reused until decay, and a bounded pool
// whose objects were all freed answered ENOMEM. Extents up to 1 MiB merge
// into spans of at most 1 MiB, which every slab and object up to 16 KiB fits
// within that ratio; extents larger than that merge with each other freely.
// A request above 1 MiB is not made of freed smaller neighbours.
constexpr size_t kMergedSpanMax = size_t{1} << 20;

bool extent_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
                  bool, unsigned) {
  Range &r = range_of(hooks);
  if (size_a + size_b > kMergedSpanMax && std::min(size_a, size_b) <= kMergedSpanMax)
    return true;
  return !(r.contains(addr_a) && r.contains(addr_b));
}

} // namespace

void init_extent_hooks(Pool *pool) {
  pool->hooks.hooks = extent_hooks_t{extent_alloc,        extent_dalloc,   extent_destroy,
                                     extent_commit,       extent_decommit, extent_purge_lazy,
                                     extent_purge_forced, extent_split,    extent_merge};
  pool->hooks.pool = pool;
}

} // namespace memlayout::seg
