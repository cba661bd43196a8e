// The engine's allocation entry points (seg_core.h) over the inline paths.
#include "seg_hot_path.h"

namespace memlayout::seg {

namespace {

bool is_power_of_two(size_t v) { return v && !(v & (v - 1)); }

} // namespace

void *pool_alloc(Pool *pool, size_t size, size_t align) {
  if (align && !is_power_of_two(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return alloc_in(pool, padded_size(pool, size), align > pool->alignment ? align : pool->alignment,
                  false);
}

void *pool_calloc(Pool *pool, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return alloc_in(pool, padded_size(pool, bytes), pool->alignment, true);
}

void pool_free(void *p) { pool_try_free(p); }

bool pool_try_free(void *p) {
  OwnedObject o = owner_and_class(p);
  if (!o.pool)
    return false;
  free_in(o.pool, p, o.klass);
  return true;
}

void *pool_realloc(void *p, size_t size) {
  Pool *pool = owner_of(p);
  if (!pool) {
    errno = EINVAL;
    return nullptr;
  }
  ThreadPoolCache &entry = tl_caches[pool->index];
  int tcache = thread_flags(pool, entry);
  uint64_t allocated = *tl_je_bytes.allocated, deallocated = *tl_je_bytes.deallocated;
  void *q = mlje_rallocx(p, padded_size(pool, size), pool->alloc_flags | tcache);
  if (!q) {
    errno = ENOMEM;
    return nullptr;
  }
  int64_t grown = static_cast<int64_t>(*tl_je_bytes.allocated - allocated) -
                  static_cast<int64_t>(*tl_je_bytes.deallocated - deallocated);
  pool->classes.set(q, class_entry(mlje_sallocx(q, 0)));
  if (tcache > kTcacheNone)
    add_own(entry.live_bytes, grown);
  else
    pool->shared_live_bytes.fetch_add(grown, std::memory_order_relaxed);
  return q;
}

size_t pool_usable_size(const void *p) { return owner_of(p) ? mlje_sallocx(p, 0) : 0; }

Pool *pool_of(const void *p) { return owner_of(p); }

} // namespace memlayout::seg
