// The pool API served by the interposer: when a program linked against
// libmemlayout_seg runs under `memlayout record` or `run`, that library
// forwards every seg_* call here, so one pool engine serves both the program's
// own pools and the rules' pools, and pool allocations are recorded, tagged
// with their pool's name.
#include "lifecycle.h"
#include "recorder.h"
#include "rule_router.h"
#include "seg_core.h"

#include <cerrno>
#include <cstring>

using namespace memlayout::preload;
namespace seg = memlayout::seg;
using memlayout::trace::Api;

namespace {

bool enter(ThreadState &ts) {
  if (ts.busy || !initialize())
    return false;
  enter_busy(ts);
  return true;
}

void record_pool_alloc(void *p, size_t size, size_t align, const UnwindStart &start) {
  ThreadState &ts = tl_state;
  if (!p || !enter(ts))
    return;
  // kSegPool whatever the alignment: the report groups a pool's objects by
  // that api and their tag, and a helper that takes the pool as an argument
  // makes one group per pool only so. The alignment shows in the address.
  record_alloc(ts, Api::kSegPool, p, size, align, start, seg::pool_usable_size(p));
  if (seg::Pool *pool = seg::pool_of(p))
    record_tag(ts, p, seg::pool_name(pool), true);
  ts.busy = 0;
}

void record_pool_free(void *p) {
  ThreadState &ts = tl_state;
  if (!enter(ts))
    return;
  record_free(ts, Api::kSegPool, p);
  ts.busy = 0;
}

seg_pool *dispatch_create(const char *name, const seg_pool_options *opts) {
  initialize(); // the engine's first use may be before any malloc of ours
  seg_pool *pool = seg::pool_create(name, seg::to_pool_options(opts));
  if (pool)
    g_pools_exist.store(true, std::memory_order_release);
  return pool;
}

void *dispatch_malloc(seg_pool *pool, size_t size) {
  void *p = seg::pool_alloc(pool, size, 0);
  record_pool_alloc(p, size, 0, MEMLAYOUT_UNWIND_START());
  return p;
}

void *dispatch_calloc(seg_pool *pool, size_t n, size_t size) {
  void *p = seg::pool_calloc(pool, n, size);
  record_pool_alloc(p, n * size, 0, MEMLAYOUT_UNWIND_START());
  return p;
}

void *dispatch_aligned_alloc(seg_pool *pool, size_t align, size_t size) {
  void *p = seg::pool_aligned_alloc(pool, align, size);
  record_pool_alloc(p, size, align, MEMLAYOUT_UNWIND_START());
  return p;
}

void *dispatch_realloc(void *old, size_t size) {
  if (!old || !seg::pool_of(old))
    return realloc(old, size); // ours: recorded as a realloc
  if (size == 0) {
    record_pool_free(old);
    seg::pool_free(old);
    return nullptr;
  }
  void *p = seg::pool_realloc(old, size);
  if (p) {
    record_pool_free(old);
    record_pool_alloc(p, size, 0, MEMLAYOUT_UNWIND_START());
  }
  return p;
}

void dispatch_free(void *p) {
  if (!p)
    return;
  if (!seg::pool_of(p))
    return free(p);
  record_pool_free(p);
  seg::pool_free(p);
}

seg_pool *dispatch_pool_of(const void *p) { return p ? seg::pool_of(p) : nullptr; }

size_t dispatch_usable_size(const void *p) {
  return p && seg::pool_of(p) ? seg::pool_usable_size(p) : 0;
}

int dispatch_stats(const seg_pool *pool, struct seg_pool_stats *out) {
  if (!pool || !out || !seg::pool_stats(pool, out)) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

// The pool's objects end with it, though nobody frees them one by one: the
// trace says so for its whole range, or a report would keep them live.
void dispatch_destroy(seg_pool *pool) {
  if (!pool)
    return;
  struct seg_pool_stats stats;
  bool live;
  {
    sys::KeepErrno keep; // a pool already gone sets EINVAL; destroy sets nothing
    live = seg::pool_stats(pool, &stats);
  }
  ThreadState &ts = tl_state;
  if (live && enter(ts)) {
    record_free_range(ts, stats.range_begin, stats.range_end - stats.range_begin);
    ts.busy = 0;
  }
  seg::pool_destroy(pool);
}

} // namespace

ML_EXPORT const seg::Dispatch memlayout_seg_dispatch_impl = {
    dispatch_create,  dispatch_malloc, dispatch_calloc,  dispatch_aligned_alloc,
    dispatch_realloc, dispatch_free,   dispatch_pool_of, dispatch_usable_size,
    dispatch_stats,   dispatch_destroy};
