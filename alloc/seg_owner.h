// Which pool owns an address, in a few instructions and without a lock.
//
// Every pool's range starts on a 1 GiB boundary, so no two pools share a
// gigabyte: a table with one slot per gigabyte of the 47-bit user address
// space (2^17 slots, touched only where pools are) names the one pool that
// may own an address, and that pool's bounds settle it. A pointer outside
// the table (kernel, LA57 or garbage) has no owner. The slot also holds the
// bounds of the pool's small area and its page descriptors indexed by
// address >> 16, so a free of a small object reads the slot and then the
// object's page descriptor, nothing else.
#pragma once

#include "seg_pool.h"

#include <atomic>
#include <cstdint>

namespace memlayout::seg {

inline constexpr unsigned kOwnerShift = 30;
inline constexpr size_t kOwnerGranule = size_t{1} << kOwnerShift;
inline constexpr size_t kOwnerSlots = size_t{1} << (47 - kOwnerShift);

struct alignas(32) OwnerSlot {
  std::atomic<Pool *> pool{nullptr};
  std::atomic<uintptr_t> small_begin{0}, small_end{0}; // empty: 0, 0
  std::atomic<SmallPage *> page_by_slice{nullptr};     // pool->pages - (small_begin >> 16)
};
extern OwnerSlot g_owner_table[kOwnerSlots];

inline Pool *owner_of(const void *p) {
  uintptr_t slot = reinterpret_cast<uintptr_t>(p) >> kOwnerShift;
  if (slot >= kOwnerSlots)
    return nullptr;
  Pool *pool = g_owner_table[slot].pool.load(std::memory_order_acquire);
  return pool && pool->range.contains(p) ? pool : nullptr;
}

// The descriptor of the page of a small pool object, or null for anything
// else (large pool objects, other pointers).
inline SmallPage *small_page_of(const void *p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  uintptr_t slot = a >> kOwnerShift;
  if (slot >= kOwnerSlots)
    return nullptr;
  const OwnerSlot &s = g_owner_table[slot];
  uintptr_t begin = s.small_begin.load(std::memory_order_relaxed);
  if (a - begin >= s.small_end.load(std::memory_order_relaxed) - begin)
    return nullptr;
  return s.page_by_slice.load(std::memory_order_relaxed) + (a >> kPageShift);
}

// Under the engine lock: make the pool's range findable, or no longer.
void owner_publish(Pool *pool);
void owner_withdraw(const Pool *pool);

} // namespace memlayout::seg
