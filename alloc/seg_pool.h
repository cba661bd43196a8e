// The pool record behind seg_pool, and the process-wide table of them.
#pragma once

#include "seg_core.h"
#include "seg_mallocx.h"
#include "seg_page.h"
#include "seg_range.h"

#include <atomic>
#include <cstdint>

namespace memlayout::seg {

inline constexpr size_t kMaxNameLength = 127;

// The hooks jemalloc hands back to every extent call, with the pool they serve.
struct PoolHooks {
  extent_hooks_t hooks; // first: the hooks' pointer is this struct's
  Pool *pool;
};

} // namespace memlayout::seg

struct alignas(64) seg_pool {
  // What every allocation and free reads, on one line with the range bounds.
  unsigned index = 0;
  int alloc_flags = 0; // MALLOCX_ARENA(arena) and the pool's alignment
  int arena_flags = 0; // MALLOCX_ARENA(arena) alone
  size_t pad_to = 0;
  size_t alignment = 0;
  memlayout::seg::Range range; // small area first, then jemalloc's extents

  // Small objects' pages (seg_page.h): the first small_bytes of the range,
  // carved in order up to small_next; one descriptor per page. Under the
  // engine lock.
  uintptr_t small_begin = 0;
  size_t small_bytes = 0, small_next = 0, small_held = 0;
  memlayout::seg::SmallPage *pages = nullptr;
  memlayout::seg::PageQueue free_pages; // empty, ready for any class
  uint32_t free_page_count = 0;
  memlayout::seg::PageQueue abandoned[memlayout::seg::kSmallClasses]; // of exited threads
  memlayout::seg::ThreadHeap *heaps = nullptr;

  unsigned arena = 0;
  bool huge_pages = false;
  std::atomic<bool> live{false};
  // Changes each time the slot is destroyed: thread entries set up for an
  // earlier pool in this slot are recognised as stale.
  std::atomic<uint32_t> generation{0};
  // Counts of threads that have exited or have no heap of their own.
  std::atomic<uint64_t> shared_allocations{0}, shared_frees{0};
  std::atomic<int64_t> shared_live_bytes{0};
  memlayout::seg::PoolHooks hooks{};
  char name[memlayout::seg::kMaxNameLength + 1] = {};
};

namespace memlayout::seg {

extern Pool g_pools[kMaxPools];

// A pointer to one of g_pools that is in use, not garbage.
bool is_live_pool(const Pool *pool);

} // namespace memlayout::seg
