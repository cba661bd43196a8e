// The allocation and free paths, inline so that the C API goes straight from
// its entry points to the page it takes from or gives to; the engine's
// pool_alloc/pool_free (seg_alloc.cpp) are the same code behind one call.
//
// Small objects (up to 1 KiB, at alignments their class provides) come from
// the thread's heap for the pool (seg_page.h); everything else goes to
// jemalloc with the pool's arena and the thread's cache for that pool, so
// objects never pass through a cache that serves another arena. Counts go
// to the thread's heap for the pool (no shared writes), in usable bytes.
#pragma once

#include "seg_owner.h"
#include "seg_pool.h"
#include "seg_tcache.h"

#include <cerrno>
#include <cstring>

namespace memlayout::seg {

inline size_t padded_size(const Pool *pool, size_t size) {
  size_t n = size > pool->pad_to ? size : pool->pad_to;
  return n ? n : 1; // mallocx(0) is undefined
}

// The thread's cache flags for the pool, set up on first use.
inline int thread_flags(Pool *pool, ThreadPoolCache &entry) {
  int flags = entry.flags.load(std::memory_order_relaxed);
  if (__builtin_expect(flags > kTcacheNone, 1))
    return flags;
  if (flags == 0 || entry.generation != pool->generation.load(std::memory_order_relaxed))
    return thread_cache_setup(pool, entry);
  return flags;
}

// Counts into the thread's heap, or the pool's shared totals without one.
inline void count_call(Pool *pool, ThreadHeap *heap, bool allocation, int64_t bytes) {
  if (__builtin_expect(heap != nullptr, 1)) {
    add_own(allocation ? heap->allocations : heap->frees, 1);
    add_own(heap->live_bytes, bytes);
    return;
  }
  (allocation ? pool->shared_allocations : pool->shared_frees)
      .fetch_add(1, std::memory_order_relaxed);
  pool->shared_live_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

// The small class for `bytes` at `align` (0 or a power of two), or
// kSmallClasses when jemalloc must serve it: a class holds alignments that
// divide its size, as every page starts on 64 KiB.
inline unsigned small_class_for(size_t bytes, size_t align) {
  if (__builtin_expect(!align, 1))
    return bytes <= kSmallMax ? small_class(bytes) : kSmallClasses;
  if (bytes > kSmallMax || align > kSmallMax)
    return kSmallClasses;
  size_t rounded = (bytes + align - 1) & ~(align - 1);
  if (rounded > kSmallMax)
    return kSmallClasses;
  unsigned c = small_class(rounded);
  return (small_class_size(c) & (align - 1)) == 0 ? c : kSmallClasses; // align: a power of two
}

// jemalloc's objects: large ones, aligned beyond a class, or all of a thread
// that has no heap for the pool.
void *alloc_large(Pool *pool, size_t bytes, size_t align, bool zero);
void free_large(Pool *pool, void *p);
// Everything alloc_in's fast path leaves: a page to refill, the thread's
// first allocation from the pool, large objects and alignments no class
// holds.
void *alloc_slow(Pool *pool, size_t bytes, size_t align, bool zero);
// A small object of a page the calling thread does not own.
void free_small_remote(SmallPage *page, void *p);
// What free_local leaves: frees into other threads' pages, large objects,
// other pointers (false, untouched).
bool free_slow(void *p);

#define SEG_HOT inline __attribute__((always_inline))

// bytes: the padded size; align: 0 or a power of two, already raised to the
// pool's alignment. The fast path pops the thread's current page of the
// class and keeps no register across a call. Aligned pools take it too: a
// pool aligned to 64 is what the report proposes for straddling objects.
SEG_HOT void *alloc_in(Pool *pool, size_t bytes, size_t align, bool zero) {
  ThreadHeap *heap = tl_caches[pool->index].heap;
  unsigned c = small_class_for(bytes, align);
  if (__builtin_expect(heap != nullptr && c < kSmallClasses, 1)) {
    if (void *p = small_pop(heap, c); __builtin_expect(p != nullptr, 1)) {
      add_own(heap->small_allocations[c], 1);
      if (zero)
        memset(p, 0, bytes);
      return p;
    }
  }
  return alloc_slow(pool, bytes, align, zero);
}

// Frees p when it is a small object of a page the calling thread owns: onto
// the page's local list, no atomic. False otherwise (p untouched).
SEG_HOT bool free_local(void *p) {
  SmallPage *page = small_page_of(p);
  if (__builtin_expect(
          page == nullptr || page->owner.load(std::memory_order_relaxed) != thread_token(), 0))
    return false;
  add_own(page->heap->small_frees[page->cls], 1);
  small_free_local(page, p);
  return true;
}

// Frees p and returns true when it belongs to a pool; false (p untouched)
// otherwise.
SEG_HOT bool free_any(void *p) { return free_local(p) || free_slow(p); }

} // namespace memlayout::seg
