#include "seg_tcache.h"

#include "seg_engine.h"
#include "seg_pool.h"

namespace memlayout::seg {

constinit thread_local ThreadPoolCache tl_caches[kMaxPools];
constinit thread_local JemallocThreadBytes tl_je_bytes;

namespace {

// Set once the thread's exit has begun: later allocations (other
// destructors freeing pool objects) get no new cache that nobody would
// release.
constinit thread_local bool tl_exiting = false;

struct Owner {
  ThreadPoolCache *entry = nullptr;
  unsigned pool_plus1 = 0;
};
Owner g_owners[kTcacheIdLimit]; // by cache id, under the engine lock
unsigned g_in_use = 0;

// Where jemalloc keeps no byte counters, nothing changes across a call.
constexpr uint64_t kNoCounter = 0;

void fetch_jemalloc_counters() {
  if (tl_je_bytes.allocated)
    return;
  uint64_t *allocated = nullptr, *deallocated = nullptr;
  size_t len = sizeof allocated;
  if (mlje_mallctl("thread.allocatedp", &allocated, &len, nullptr, 0) != 0 ||
      mlje_mallctl("thread.deallocatedp", &deallocated, &len, nullptr, 0) != 0)
    allocated = deallocated = const_cast<uint64_t *>(&kNoCounter);
  tl_je_bytes = {allocated, deallocated};
}

void destroy_tcache(unsigned id) {
  mlje_mallctl("tcache.destroy", nullptr, nullptr, &id, sizeof id);
}

// Under the lock: flushes cache `id` (and its magazine, when the arena
// lives on) back to its arena, folds its entry's counts into the pool and
// forgets both.
void retire(unsigned id, bool arena_lives_on) {
  Owner &owner = g_owners[id];
  ThreadPoolCache *entry = owner.entry;
  Pool *pool = &g_pools[owner.pool_plus1 - 1];
  if (entry->magazine) {
    if (arena_lives_on)
      magazine_flush(entry->magazine, tcache_flags(id));
    magazine_destroy(entry->magazine);
    entry->magazine = nullptr;
  }
  destroy_tcache(id);
  pool->shared_allocations.fetch_add(entry->allocations.load(std::memory_order_relaxed),
                                     std::memory_order_relaxed);
  pool->shared_frees.fetch_add(entry->frees.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  pool->shared_live_bytes.fetch_add(entry->live_bytes.load(std::memory_order_relaxed),
                                    std::memory_order_relaxed);
  entry->allocations.store(0, std::memory_order_relaxed);
  entry->frees.store(0, std::memory_order_relaxed);
  entry->live_bytes.store(0, std::memory_order_relaxed);
  entry->flags.store(0, std::memory_order_relaxed);
  owner = Owner{};
  --g_in_use;
}

bool is_own_entry(const ThreadPoolCache *entry) {
  return entry >= &tl_caches[0] && entry < &tl_caches[kMaxPools];
}

} // namespace

int thread_cache_setup(Pool *pool, ThreadPoolCache &entry) {
  fetch_jemalloc_counters();
  int flags = kTcacheNone;
  {
    EngineLock lock;
    unsigned id = 0;
    size_t len = sizeof id;
    if (!tl_exiting && pool->live.load(std::memory_order_relaxed) &&
        mlje_mallctl("tcache.create", &id, &len, nullptr, 0) == 0) {
      if (id < kTcacheIdLimit && !g_owners[id].entry) {
        g_owners[id] = Owner{&entry, pool->index + 1};
        ++g_in_use;
        flags = tcache_flags(id);
        entry.magazine = magazine_create();
      } else {
        destroy_tcache(id);
      }
    }
    entry.generation = pool->generation.load(std::memory_order_relaxed);
    entry.flags.store(flags, std::memory_order_relaxed);
  }
  // Outside the lock: with many keys in use, pthread_setspecific allocates.
  if (flags != kTcacheNone)
    arm_thread_exit();
  return flags;
}

void thread_exit() {
  tl_exiting = true;
  bool any = false;
  for (const auto &entry : tl_caches)
    any |= entry.flags.load(std::memory_order_relaxed) > kTcacheNone;
  if (any) {
    EngineLock lock;
    for (auto &entry : tl_caches) {
      int flags = entry.flags.load(std::memory_order_relaxed);
      if (flags <= kTcacheNone)
        continue;
      unsigned id = tcache_id(flags);
      if (id < kTcacheIdLimit && g_owners[id].entry == &entry)
        retire(id, true);
    }
  }
  for (auto &entry : tl_caches)
    entry.flags.store(0, std::memory_order_relaxed);
}

void thread_caches_drop_pool(Pool *pool) {
  for (unsigned id = 0; id < kTcacheIdLimit; ++id)
    if (g_owners[id].pool_plus1 == pool->index + 1)
      retire(id, false);
}

void thread_caches_sum(const Pool *pool, uint64_t *allocations, uint64_t *frees,
                       int64_t *live_bytes) {
  *allocations = pool->shared_allocations.load(std::memory_order_relaxed);
  *frees = pool->shared_frees.load(std::memory_order_relaxed);
  *live_bytes = pool->shared_live_bytes.load(std::memory_order_relaxed);
  for (const Owner &owner : g_owners) {
    if (owner.pool_plus1 != pool->index + 1)
      continue;
    *allocations += owner.entry->allocations.load(std::memory_order_relaxed);
    *frees += owner.entry->frees.load(std::memory_order_relaxed);
    *live_bytes += owner.entry->live_bytes.load(std::memory_order_relaxed);
  }
}

// The threads that owned the other caches are gone in the child: flush what
// they held back to the arenas and give their ids back.
void thread_caches_after_fork_child() {
  for (unsigned id = 0; id < kTcacheIdLimit; ++id)
    if (g_owners[id].entry && !is_own_entry(g_owners[id].entry))
      retire(id, true);
}

unsigned thread_caches_in_use() {
  EngineLock lock;
  return g_in_use;
}

} // namespace memlayout::seg
