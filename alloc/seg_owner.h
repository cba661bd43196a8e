// Which pool owns an address, in a few instructions and without a lock.
//
// Every pool's range starts on a 1 GiB boundary, so no two pools share a
// gigabyte: a table with one slot per gigabyte of the 47-bit user address
// space (2^17 slots, touched only where pools are) names the one pool that
// may own an address, and that pool's bounds settle it. A pointer outside
// the table (kernel, LA57 or garbage) has no owner. The slot also holds the
// pool's class map, so a free reads the object's class with one more load.
#pragma once

#include "seg_pool.h"

#include <atomic>
#include <cstdint>

namespace memlayout::seg {

inline constexpr unsigned kOwnerShift = 30;
inline constexpr size_t kOwnerGranule = size_t{1} << kOwnerShift;
inline constexpr size_t kOwnerSlots = size_t{1} << (47 - kOwnerShift);

struct OwnerSlot {
  std::atomic<Pool *> pool{nullptr};
  std::atomic<ClassMap::Entry *> classes{nullptr}; // the pool's ClassMap::by_page()
};
extern OwnerSlot g_owner_table[kOwnerSlots];

inline Pool *owner_of(const void *p) {
  uintptr_t slot = reinterpret_cast<uintptr_t>(p) >> kOwnerShift;
  if (slot >= kOwnerSlots)
    return nullptr;
  Pool *pool = g_owner_table[slot].pool.load(std::memory_order_acquire);
  return pool && pool->range.contains(p) ? pool : nullptr;
}

struct OwnedObject {
  Pool *pool;    // NULL: not a pool object
  uint8_t klass; // its class map entry
};

// For a free: the owner and the object's class map entry. The bounds check
// is a branch, not a select, so what the caller does with the pool does not
// wait for the bounds to load.
inline OwnedObject owner_and_class(const void *p) {
  uintptr_t slot = reinterpret_cast<uintptr_t>(p) >> kOwnerShift;
  if (slot >= kOwnerSlots)
    return {nullptr, 0};
  const OwnerSlot &s = g_owner_table[slot];
  Pool *pool = s.pool.load(std::memory_order_acquire);
  if (!pool)
    return {nullptr, 0};
  uint8_t klass = ClassMap::get(s.classes.load(std::memory_order_relaxed), p);
  if (__builtin_expect(!pool->range.contains(p), 0)) {
    asm volatile("" ::: "memory"); // keep this a branch
    return {nullptr, 0};
  }
  return {pool, klass};
}

// Under the engine lock: make the pool's range findable, or no longer.
void owner_publish(Pool *pool);
void owner_withdraw(const Pool *pool);

} // namespace memlayout::seg
