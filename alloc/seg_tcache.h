// Per (thread, pool): a heap of small-object pages (seg_page.h) and one
// jemalloc thread cache for the large objects.
//
// jemalloc's default thread cache defeats arena separation: objects of one
// arena come back out of it for another arena's requests (jemalloc issues
// #1535, #825). So every pool has, in every thread that allocates or frees
// its large objects, an explicit cache (`tcache.create`) used with that
// pool's arena only; a free from another thread goes to the freeing thread's
// cache for the same pool. jemalloc has 4093 of them per process: past that
// a thread uses no cache for the pool (MALLOCX_TCACHE_NONE), slower but
// isolated all the same. Both live in an initial-exec TLS array indexed by
// pool, are set up on first use and released when the thread exits or the
// pool is destroyed; the registry (cache id -> owning entry) and the pool's
// list of heaps let the stats, pool destruction and fork reach other
// threads' entries.
#pragma once

#include "seg_core.h"
#include "seg_mallocx.h"
#include "seg_page.h"

#include <atomic>
#include <cstdint>

namespace memlayout::seg {

struct ThreadPoolCache {
  // 0: not set up; kTcacheNone: no cache; otherwise MALLOCX_TCACHE(id).
  // Other threads only reset it, under the engine lock, when the pool is
  // destroyed.
  std::atomic<int> flags{0};
  uint32_t generation = 0; // the pool's generation when set up
  // Null until set up, or when none could be made (then counts go to the
  // pool's shared counters). Reset like flags.
  ThreadHeap *heap = nullptr;
};

extern constinit thread_local ThreadPoolCache tl_caches[kMaxPools];

// Sets up the calling thread's entry for pool, returns the flags to use.
int thread_cache_setup(Pool *pool, ThreadPoolCache &entry);

// Under the engine lock.
void thread_caches_drop_pool(Pool *pool);
void thread_caches_sum(const Pool *pool, uint64_t *allocations, uint64_t *frees,
                       int64_t *live_bytes);
void thread_caches_after_fork_child();

// Explicit thread caches the engine holds now, in all threads.
unsigned thread_caches_in_use();

} // namespace memlayout::seg
