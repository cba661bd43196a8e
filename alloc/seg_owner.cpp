#include "seg_owner.h"

namespace memlayout::seg {

constinit OwnerSlot g_owner_table[kOwnerSlots] = {};

namespace {

template <class F> void for_each_slot(const Pool *pool, F f) {
  uintptr_t first = pool->range.begin() >> kOwnerShift;
  uintptr_t last = (pool->range.begin() + pool->range.size() - 1) >> kOwnerShift;
  for (uintptr_t slot = first; slot <= last && slot < kOwnerSlots; ++slot)
    f(g_owner_table[slot]);
}

} // namespace

void owner_publish(Pool *pool) {
  uintptr_t small_begin = pool->small_begin, small_end = small_begin + pool->small_bytes;
  SmallPage *by_slice = pool->pages - (small_begin >> kPageShift);
  for_each_slot(pool, [&](OwnerSlot &s) {
    s.page_by_slice.store(by_slice, std::memory_order_relaxed);
    s.small_begin.store(small_begin, std::memory_order_relaxed);
    s.small_end.store(small_end, std::memory_order_relaxed);
    s.pool.store(pool, std::memory_order_release);
  });
}

void owner_withdraw(const Pool *pool) {
  for_each_slot(pool, [](OwnerSlot &s) {
    s.pool.store(nullptr, std::memory_order_release);
    s.small_begin.store(0, std::memory_order_relaxed);
    s.small_end.store(0, std::memory_order_relaxed);
    s.page_by_slice.store(nullptr, std::memory_order_relaxed);
  });
}

} // namespace memlayout::seg
