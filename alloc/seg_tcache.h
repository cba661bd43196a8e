// One jemalloc thread cache per (thread, pool).
//
// jemalloc's default thread cache defeats arena separation: objects of one
// arena come back out of it for another arena's requests (jemalloc issues
// #1535, #825). So every pool has, in every thread that allocates or frees
// its objects, an explicit cache (`tcache.create`) used with that pool's
// arena only; a free from another thread goes to the freeing thread's cache
// for the same pool. The caches' ids live in an initial-exec TLS array
// indexed by pool, created on first use, released when the thread exits or
// the pool is destroyed. jemalloc has 4093 of them per process: past that a
// thread uses no cache for the pool (MALLOCX_TCACHE_NONE), slower but
// isolated all the same.
//
// In front of each explicit cache sits a magazine of recently freed small
// objects (seg_magazine.h). Each entry also counts its thread's
// allocations, frees and net usable bytes for the pool; the registry (cache
// id -> owning entry) lets the stats, pool destruction and fork reach other
// threads' entries.
#pragma once

#include "seg_core.h"
#include "seg_magazine.h"
#include "seg_mallocx.h"

#include <atomic>
#include <cstdint>

namespace memlayout::seg {

struct ThreadPoolCache {
  // 0: not set up; kTcacheNone: no cache (counts go to the pool's shared
  // counters); otherwise MALLOCX_TCACHE(id). Other threads only reset it,
  // under the engine lock, when the pool is destroyed.
  std::atomic<int> flags{0};
  uint32_t generation = 0;      // the pool's generation when set up
  Magazine *magazine = nullptr; // with an explicit cache only (may be NULL)
  // Written by the owning thread only, read by pool_stats.
  std::atomic<uint64_t> allocations{0}, frees{0};
  std::atomic<int64_t> live_bytes{0};
};

extern constinit thread_local ThreadPoolCache tl_caches[kMaxPools];

// jemalloc's running totals of usable bytes this thread allocated and freed
// (thread.allocatedp / thread.deallocatedp): their change across a realloc
// is what it did to the pool's usable bytes.
struct JemallocThreadBytes {
  const uint64_t *allocated = nullptr, *deallocated = nullptr;
};
extern constinit thread_local JemallocThreadBytes tl_je_bytes;

// Sets up the calling thread's entry for pool, returns the flags to use.
int thread_cache_setup(Pool *pool, ThreadPoolCache &entry);

// Under the engine lock.
void thread_caches_drop_pool(Pool *pool);
void thread_caches_sum(const Pool *pool, uint64_t *allocations, uint64_t *frees,
                       int64_t *live_bytes);
void thread_caches_after_fork_child();

// Explicit thread caches the engine holds now, in all threads.
unsigned thread_caches_in_use();

inline void add_own(std::atomic<uint64_t> &counter, uint64_t v) {
  counter.store(counter.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}
inline void add_own(std::atomic<int64_t> &counter, int64_t v) {
  counter.store(counter.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

} // namespace memlayout::seg
