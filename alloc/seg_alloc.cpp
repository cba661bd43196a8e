// The engine's allocation entry points (seg_core.h) over the inline paths,
// and the paths that leave them: jemalloc's large objects, set-up, frees
// from other threads, realloc.
#include "seg_hot_path.h"

namespace memlayout::seg {

namespace {

bool is_power_of_two(size_t v) { return v && !(v & (v - 1)); }

constinit thread_local bool tl_jemalloc_let_go = false;

} // namespace

bool jemalloc_let_go() { return tl_jemalloc_let_go; }

void *alloc_large(Pool *pool, size_t bytes, size_t align, bool zero) {
  ThreadPoolCache &entry = tl_caches[pool->index];
  int tcache = thread_flags(pool, entry);
  int flags =
      pool->arena_flags | tcache | (align ? lg_align_flags(align) : 0) | (zero ? MALLOCX_ZERO : 0);
  void *p = mlje_mallocx(bytes, flags);
  // Out of room with freed memory in dirty extents too large to fit the
  // request: purged to retained extents, it does.
  if (__builtin_expect(!p, 0) && pool_purge(pool))
    p = mlje_mallocx(bytes, flags);
  // jemalloc serves a thread whose own data it has torn down (late in the
  // thread's exit, after its cleanup: alloc/jemalloc/tsd_key.cpp) from arena
  // 0 whatever arena it is asked for: not the pool's memory, so not an
  // allocation the pool can make.
  if (__builtin_expect(p != nullptr && owner_of(p) != pool, 0)) {
    mlje_dallocx(p, MALLOCX_TCACHE_NONE);
    tl_jemalloc_let_go = true;
    p = nullptr;
  }
  if (__builtin_expect(!p, 0)) {
    errno = ENOMEM;
    return nullptr;
  }
  count_call(pool, entry.heap, true, static_cast<int64_t>(mlje_sallocx(p, 0)));
  return p;
}

void free_large(Pool *pool, void *p) {
  ThreadPoolCache &entry = tl_caches[pool->index];
  int tcache = thread_flags(pool, entry);
  size_t usable = mlje_sallocx(p, 0);
  count_call(pool, entry.heap, false, -static_cast<int64_t>(usable));
  mlje_sdallocx(p, usable, tcache);
}

void *alloc_slow(Pool *pool, size_t bytes, size_t align, bool zero) {
  ThreadPoolCache &entry = tl_caches[pool->index];
  unsigned c = small_class_for(bytes, align);
  if (c < kSmallClasses) {
    if (!entry.heap)
      thread_flags(pool, entry);
    if (ThreadHeap *heap = entry.heap) {
      void *p = small_pop(heap, c);
      if (!p)
        p = small_alloc_slow(heap, c);
      if (p) {
        add_own(heap->small_allocations[c], 1);
        if (zero)
          memset(p, 0, bytes);
        return p;
      }
    }
  }
  // Large, aligned beyond a class, no heap, or the small area is used up.
  return alloc_large(pool, bytes, align, zero);
}

void free_small_remote(SmallPage *page, void *p) {
  Pool *pool = owner_of(p);
  if (!pool)
    return small_free_remote(page, p);
  ThreadPoolCache &entry = tl_caches[pool->index];
  if (!entry.heap)
    thread_flags(pool, entry); // a thread that only frees batches too, as jemalloc caches them
  if (ThreadHeap *heap = entry.heap) {
    add_own(heap->small_frees[page->cls], 1);
    return small_free_batched(heap, page, p);
  }
  count_call(pool, nullptr, false, -static_cast<int64_t>(page->block_size));
  small_free_remote(page, p);
}

bool free_slow(void *p) {
  if (SmallPage *page = small_page_of(p)) {
    free_small_remote(page, p);
    return true;
  }
  Pool *pool = owner_of(p);
  if (!pool)
    return false;
  free_large(pool, p);
  return true;
}

void *pool_alloc(Pool *pool, size_t size, size_t align) {
  if (align && !is_power_of_two(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return alloc_in(pool, padded_size(pool, size), align > pool->alignment ? align : pool->alignment,
                  false);
}

void *pool_aligned_alloc(Pool *pool, size_t align, size_t size) {
  if (!align) { // pool_alloc's "the pool's own alignment", not a power of two
    errno = EINVAL;
    return nullptr;
  }
  return pool_alloc(pool, size, align);
}

void *pool_calloc(Pool *pool, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return alloc_in(pool, padded_size(pool, bytes), pool->alignment, true);
}

void pool_free(void *p) { free_any(p); }

bool pool_try_free(void *p) { return free_any(p); }

void *pool_realloc(void *p, size_t size) {
  Pool *pool = owner_of(p);
  if (!pool) {
    errno = EINVAL;
    return nullptr;
  }
  size_t bytes = padded_size(pool, size);
  SmallPage *page = small_page_of(p);
  size_t old_usable = page ? page->block_size : mlje_sallocx(p, 0);
  if (page && small_class_for(bytes, pool->alignment) == page->cls)
    return p; // the same class: in place
  if (!page && small_class_for(bytes, pool->alignment) == kSmallClasses) {
    // jemalloc to jemalloc: it may resize in place.
    ThreadPoolCache &entry = tl_caches[pool->index];
    int tcache = thread_flags(pool, entry);
    void *q = mlje_rallocx(p, bytes, pool->alloc_flags | tcache);
    if (!q) {
      errno = ENOMEM;
      return nullptr;
    }
    int64_t grown = static_cast<int64_t>(mlje_sallocx(q, 0)) - static_cast<int64_t>(old_usable);
    if (ThreadHeap *heap = entry.heap)
      add_own(heap->live_bytes, grown);
    else
      pool->shared_live_bytes.fetch_add(grown, std::memory_order_relaxed);
    return q;
  }
  void *q = alloc_in(pool, bytes, pool->alignment, false);
  if (!q)
    return nullptr;
  memcpy(q, p, old_usable < bytes ? old_usable : bytes);
  free_any(p);
  return q;
}

size_t pool_usable_size(const void *p) {
  if (const SmallPage *page = small_page_of(p))
    return page->block_size;
  return owner_of(p) ? mlje_sallocx(p, 0) : 0;
}

Pool *pool_of(const void *p) { return owner_of(p); }

} // namespace memlayout::seg
