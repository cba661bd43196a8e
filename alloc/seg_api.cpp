// The C API of libmemlayout_seg (<memlayout/seg.h>).
//
// Under `memlayout record` the interposer carries its own copy of the engine
// and exports its entry points as a Dispatch table: then every call goes
// there, so one engine serves the process and the recorder sees pool
// allocations. Otherwise this library's own engine answers.
#include "seg_core.h"
#include "seg_hot_path.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <dlfcn.h>

#define SEG_API extern "C" __attribute__((visibility("default")))

namespace memlayout::seg {
namespace {

enum class Route { kUnknown, kOwn, kForward };
std::atomic<Route> g_route{Route::kUnknown};
const Dispatch *g_forward = nullptr;

__attribute__((noinline)) const Dispatch *resolve() {
  auto *table = static_cast<const Dispatch *>(dlsym(RTLD_DEFAULT, kDispatchSymbol));
  g_forward = table;
  g_route.store(table ? Route::kForward : Route::kOwn, std::memory_order_release);
  return table;
}

// The interposer's table, or NULL for this library's own engine.
inline const Dispatch *forward() {
  Route r = g_route.load(std::memory_order_acquire);
  if (__builtin_expect(r == Route::kOwn, 1))
    return nullptr;
  return r == Route::kForward ? g_forward : resolve();
}

__attribute__((constructor)) void resolve_at_load() { resolve(); }

inline bool own_engine() {
  return __builtin_expect(g_route.load(std::memory_order_acquire) == Route::kOwn, 1);
}

// The paths malloc and free leave, out of line so that theirs keep no frame.
__attribute__((noinline)) void *forward_malloc(seg_pool *pool, size_t size) {
  if (const Dispatch *d = forward())
    return d->malloc(pool, size);
  return alloc_in(pool, padded_size(pool, size), pool->alignment, false);
}

__attribute__((noinline)) void free_elsewhere(void *ptr) {
  if (const Dispatch *d = forward())
    return d->free(ptr);
  if (!free_slow(ptr) && ptr)
    free(ptr);
}

} // namespace
} // namespace memlayout::seg

using namespace memlayout::seg;

SEG_API seg_pool *seg_pool_create(const char *name, const seg_pool_options *opts) {
  if (const Dispatch *d = forward())
    return d->create(name, opts);
  return pool_create(name, to_pool_options(opts));
}

SEG_API void *seg_malloc(seg_pool *pool, size_t size) {
  if (!own_engine())
    return forward_malloc(pool, size);
  return alloc_in(pool, padded_size(pool, size), pool->alignment, false);
}

SEG_API void *seg_calloc(seg_pool *pool, size_t n, size_t size) {
  if (const Dispatch *d = forward())
    return d->calloc(pool, n, size);
  return pool_calloc(pool, n, size);
}

SEG_API void *seg_aligned_alloc(seg_pool *pool, size_t align, size_t size) {
  if (const Dispatch *d = forward())
    return d->aligned_alloc(pool, align, size);
  return pool_aligned_alloc(pool, align, size);
}

SEG_API void *seg_realloc(void *ptr, size_t size) {
  if (const Dispatch *d = forward())
    return d->realloc(ptr, size);
  if (!pool_of(ptr))
    return realloc(ptr, size);
  if (size == 0) {
    pool_free(ptr);
    return nullptr;
  }
  return pool_realloc(ptr, size);
}

SEG_API void seg_free(void *ptr) {
  if (!own_engine() || !free_local(ptr))
    free_elsewhere(ptr);
}

SEG_API seg_pool *seg_pool_of(const void *ptr) {
  if (const Dispatch *d = forward())
    return d->pool_of(ptr);
  return pool_of(ptr);
}

SEG_API size_t seg_usable_size(const void *ptr) {
  if (const Dispatch *d = forward())
    return d->usable_size(ptr);
  return pool_usable_size(ptr);
}

SEG_API int seg_pool_stats(const seg_pool *pool, struct seg_pool_stats *stats) {
  if (const Dispatch *d = forward())
    return d->stats(pool, stats);
  return pool_stats(pool, stats) ? 0 : -1;
}

SEG_API void seg_pool_destroy(seg_pool *pool) {
  if (const Dispatch *d = forward())
    return d->destroy(pool);
  pool_destroy(pool);
}
