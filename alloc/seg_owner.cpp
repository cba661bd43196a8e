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
  for_each_slot(pool, [pool](OwnerSlot &s) {
    s.classes.store(pool->classes.by_page(), std::memory_order_relaxed);
    s.pool.store(pool, std::memory_order_release);
  });
}

void owner_withdraw(const Pool *pool) {
  for_each_slot(pool, [](OwnerSlot &s) {
    s.pool.store(nullptr, std::memory_order_release);
    s.classes.store(nullptr, std::memory_order_relaxed);
  });
}

} // namespace memlayout::seg
