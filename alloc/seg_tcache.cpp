#include "seg_tcache.h"

#include "seg_engine.h"
#include "seg_pool.h"

namespace memlayout::seg {

constinit thread_local ThreadPoolCache tl_caches[kMaxPools];

namespace {

// Set once the thread's exit has begun: later allocations (other
// destructors freeing pool objects) get no new cache or heap that nobody
// would release.
constinit thread_local bool tl_exiting = false;

struct Owner {
  ThreadPoolCache *entry = nullptr;
  unsigned pool_plus1 = 0;
};
Owner g_owners[kTcacheIdLimit]; // by cache id, under the engine lock
unsigned g_in_use = 0;

void destroy_tcache(unsigned id) {
  mlje_mallctl("tcache.destroy", nullptr, nullptr, &id, sizeof id);
}

// Under the lock: flushes cache `id` back to its arena and forgets it.
void retire(unsigned id) {
  Owner &owner = g_owners[id];
  destroy_tcache(id);
  owner.entry->flags.store(0, std::memory_order_relaxed);
  owner = Owner{};
  --g_in_use;
}

bool is_own_entry(const ThreadPoolCache *entry) {
  return entry >= &tl_caches[0] && entry < &tl_caches[kMaxPools];
}

} // namespace

int thread_cache_setup(Pool *pool, ThreadPoolCache &entry) {
  int flags = kTcacheNone;
  {
    EngineLock lock;
    bool usable = !tl_exiting && pool->live.load(std::memory_order_relaxed);
    int old = entry.flags.load(std::memory_order_relaxed);
    if (old != 0 && entry.generation == pool->generation.load(std::memory_order_relaxed)) {
      flags = old; // set up already (a heap was missing, or a race with ourselves)
    } else {
      unsigned id = 0;
      size_t len = sizeof id;
      if (usable && mlje_mallctl("tcache.create", &id, &len, nullptr, 0) == 0) {
        if (id < kTcacheIdLimit && !g_owners[id].entry) {
          g_owners[id] = Owner{&entry, pool->index + 1};
          ++g_in_use;
          flags = tcache_flags(id);
        } else {
          destroy_tcache(id);
        }
      }
      entry.generation = pool->generation.load(std::memory_order_relaxed);
      entry.flags.store(flags, std::memory_order_relaxed);
    }
    if (usable && !entry.heap) {
      entry.heap = heap_create(pool);
      if (entry.heap)
        entry.heap->entry = &entry;
    }
  }
  // Outside the lock: with many keys in use, pthread_setspecific allocates.
  if (flags != kTcacheNone || entry.heap)
    arm_thread_exit();
  return flags;
}

void thread_exit() {
  tl_exiting = true;
  bool any = false;
  for (const auto &entry : tl_caches)
    any |= entry.flags.load(std::memory_order_relaxed) > kTcacheNone || entry.heap;
  if (any) {
    EngineLock lock;
    for (auto &entry : tl_caches) {
      if (entry.heap) {
        heap_abandon(entry.heap);
        entry.heap = nullptr;
      }
      int flags = entry.flags.load(std::memory_order_relaxed);
      if (flags <= kTcacheNone)
        continue;
      unsigned id = tcache_id(flags);
      if (id < kTcacheIdLimit && g_owners[id].entry == &entry)
        retire(id);
    }
  }
  for (auto &entry : tl_caches)
    entry.flags.store(0, std::memory_order_relaxed);
}

void thread_caches_drop_pool(Pool *pool) {
  for (unsigned id = 0; id < kTcacheIdLimit; ++id)
    if (g_owners[id].pool_plus1 == pool->index + 1)
      retire(id);
  while (ThreadHeap *heap = pool->heaps) {
    auto *entry = static_cast<ThreadPoolCache *>(heap->entry);
    entry->heap = nullptr;
    entry->flags.store(0, std::memory_order_relaxed);
    heap_forget(heap);
  }
  small_area_drop_batches(pool);
}

void thread_caches_sum(const Pool *pool, uint64_t *allocations, uint64_t *frees,
                       int64_t *live_bytes) {
  *allocations = pool->shared_allocations.load(std::memory_order_relaxed);
  *frees = pool->shared_frees.load(std::memory_order_relaxed);
  *live_bytes = pool->shared_live_bytes.load(std::memory_order_relaxed);
  for (const ThreadHeap *heap = pool->heaps; heap; heap = heap->next_in_pool) {
    uint64_t a, f;
    int64_t live;
    heap_counts(heap, &a, &f, &live);
    *allocations += a;
    *frees += f;
    *live_bytes += live;
  }
}

// The threads that owned the other caches and heaps are gone in the child:
// their pages go to their pools, their caches are forgotten. Not flushed: a
// thread may have been inside its cache when the process forked (its
// owner updates it without a lock), and flushing a half-updated cache
// corrupted the arena (children of a process whose threads allocated 4 KiB
// pool objects crashed in 1 fork of 7). The objects they held stay out of
// use in the child, and jemalloc keeps their ids, as it does for the
// implicit caches of the threads a child does not have.
void thread_caches_after_fork_child() {
  for (unsigned id = 0; id < kTcacheIdLimit; ++id)
    if (g_owners[id].entry && !is_own_entry(g_owners[id].entry)) {
      g_owners[id] = Owner{};
      --g_in_use;
    }
  for (Pool &pool : g_pools)
    if (pool.live.load(std::memory_order_relaxed))
      heaps_after_fork_child(&pool);
}

unsigned thread_caches_in_use() {
  EngineLock lock;
  return g_in_use;
}

} // namespace memlayout::seg
