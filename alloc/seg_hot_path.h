// The allocation and free paths, inline so that the C API goes straight from
// its entry points to jemalloc; the engine's pool_alloc/pool_free
// (seg_alloc.cpp) are the same code behind one call.
//
// Small objects come from the thread's magazine for the pool when it has
// one of their class (seg_magazine.h); everything else goes to jemalloc with
// the pool's arena and the thread's cache for that pool, so objects never
// pass through a cache that serves another arena. A free learns the class
// from the pool's class map (seg_class_map.h). Counts go to the thread's
// entry for the pool (no shared writes), in usable bytes.
#pragma once

#include "seg_owner.h"
#include "seg_pool.h"
#include "seg_tcache.h"
#include "size_class.h"

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

// Without a cache of its own a thread counts into the pool's shared totals.
inline void count_call(Pool *pool, ThreadPoolCache &entry, int tcache, bool allocation,
                       int64_t bytes) {
  if (__builtin_expect(tcache > kTcacheNone, 1)) {
    add_own(allocation ? entry.allocations : entry.frees, 1);
    add_own(entry.live_bytes, bytes);
    return;
  }
  (allocation ? pool->shared_allocations : pool->shared_frees)
      .fetch_add(1, std::memory_order_relaxed);
  pool->shared_live_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

// The class map entry for an object of `usable` bytes.
inline uint8_t class_entry(size_t usable) {
  return usable <= kMagazineMaxSize ? static_cast<uint8_t>(magazine_class(usable) + 1)
                                    : ClassMap::kNone;
}

// bytes: the padded size; align: 0 or a power of two, already raised to the
// pool's alignment.
inline void *alloc_in(Pool *pool, size_t bytes, size_t align, bool zero) {
  ThreadPoolCache &entry = tl_caches[pool->index];
  int tcache = thread_flags(pool, entry);
  int flags =
      pool->arena_flags | tcache | (align ? lg_align_flags(align) : 0) | (zero ? MALLOCX_ZERO : 0);
  // Small enough for a magazine class (checked before rounding can overflow).
  size_t rounded = SIZE_MAX;
  if (bytes <= kMagazineMaxSize && align <= kMagazineMaxSize)
    rounded = align ? (bytes + align - 1) & ~(align - 1) : bytes;
  void *p;
  int64_t usable;
  if (__builtin_expect(rounded <= kMagazineMaxSize, 1)) {
    // jemalloc's class for (bytes, align) is the class of the rounded size,
    // and every region of that class is aligned to align.
    unsigned c = magazine_class(rounded);
    usable = static_cast<int64_t>(magazine_class_size(c));
    Magazine *m = entry.magazine;
    if (m && (p = m->pop(c)) != nullptr) {
      if (zero)
        memset(p, 0, static_cast<size_t>(usable));
    } else if ((p = mlje_mallocx(bytes, flags)) != nullptr) {
      pool->classes.set(p, static_cast<uint8_t>(c + 1));
    }
  } else if ((p = mlje_mallocx(bytes, flags)) != nullptr) { // large, or aligned beyond a class
    usable = static_cast<int64_t>(mlje_sallocx(p, 0));
    pool->classes.set(p, class_entry(static_cast<size_t>(usable)));
  }
  if (__builtin_expect(!p, 0)) {
    errno = ENOMEM;
    return nullptr;
  }
  count_call(pool, entry, tcache, true, usable);
  return p;
}

// cls: the object's class map entry (owner_and_class).
inline void free_in(Pool *pool, void *p, uint8_t cls) {
  ThreadPoolCache &entry = tl_caches[pool->index];
  int tcache = thread_flags(pool, entry);
  if (__builtin_expect(cls != ClassMap::kNone, 1)) {
    unsigned c = cls - 1u;
    count_call(pool, entry, tcache, false, -static_cast<int64_t>(magazine_class_size(c)));
    Magazine *m = entry.magazine;
    if (__builtin_expect(m != nullptr, 1)) {
      if (!m->push(c, p)) {
        magazine_spill(m, c, tcache);
        m->push(c, p);
      }
      return;
    }
    return mlje_sdallocx(p, magazine_class_size(c), tcache);
  }
  size_t usable = mlje_sallocx(p, 0);
  count_call(pool, entry, tcache, false, -static_cast<int64_t>(usable));
  mlje_sdallocx(p, usable, tcache);
}

} // namespace memlayout::seg
