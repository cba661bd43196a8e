// The pool engine behind <memlayout/seg.h>, shared by libmemlayout_seg and
// the interposer (which routes rule-matched allocations into pools). Rules of
// the room are the interposer's: no exceptions, no RTTI, no malloc, no
// iostreams; memory comes from the pools' own reserved ranges and jemalloc's
// renamed arenas (mlje_*), never from the process's malloc.
//
// Pools live in one process-wide table; each owns a contiguous, reserved
// address range, so finding the owner of a pointer is a range check (O(1)).
#pragma once

#include <memlayout/seg.h>

#include <cstddef>
#include <cstdint>

namespace memlayout::seg {

inline constexpr unsigned kMaxPools = 256;

struct PoolOptions {
  size_t alignment = 0; // 0 = natural for the size class
  size_t pad_to = 0;    // 0 = none
  bool huge_pages = false;
  size_t reserve_bytes = 0; // 0 = kDefaultReserve
};
inline constexpr size_t kDefaultReserve = size_t{64} << 30;

// seg_pool is the public name of a Pool.
using Pool = ::seg_pool;

// NULL with errno set on failure. An existing pool of that name is returned
// as it is (its options unchanged).
Pool *pool_create(const char *name, const PoolOptions &options);
void pool_destroy(Pool *pool);
// Returns the pool's freed pages that jemalloc keeps dirty to its retained
// extents, which any request can reuse (a dirty extent only one up to 64
// times its size): a bounded pool tries it before it answers ENOMEM.
bool pool_purge(Pool *pool);

// align 0: the pool's alignment option. NULL with errno ENOMEM on exhaustion.
void *pool_alloc(Pool *pool, size_t size, size_t align);
// seg_aligned_alloc's contract, wherever it is served (the library or the
// preload's dispatch): a power of two, else NULL with errno EINVAL.
void *pool_aligned_alloc(Pool *pool, size_t align, size_t size);
void *pool_calloc(Pool *pool, size_t n, size_t size);
// p must belong to a pool (pool_of(p) != NULL).
void pool_free(void *p);
// Frees p and returns true when it belongs to a pool; false (p untouched)
// otherwise: one ownership lookup for a free that may not be ours.
bool pool_try_free(void *p);
void *pool_realloc(void *p, size_t size);
size_t pool_usable_size(const void *p);

// The owning pool, or NULL: a few compares and one load, safe on any pointer.
Pool *pool_of(const void *p);

const char *pool_name(const Pool *pool);
unsigned pool_index(const Pool *pool); // stable small id, < kMaxPools
Pool *pool_by_name(const char *name);  // NULL when none
bool pool_stats(const Pool *pool, struct seg_pool_stats *out);

// Releases the calling thread's per-pool thread caches (thread exit). The
// engine calls it from a pthread key destructor; calling it earlier is
// safe. Afterwards the thread allocates from pools without caches.
void thread_exit();
// Whether jemalloc has let go of the calling thread (late in its exit,
// after jemalloc's own cleanup): pools have no memory to give it from then
// on, and their allocations fail with ENOMEM (alloc_large).
bool jemalloc_let_go();

// The C API's options (NULL: all defaults) as the engine's.
inline PoolOptions to_pool_options(const seg_pool_options *opts) {
  PoolOptions o;
  if (opts) {
    o.alignment = opts->alignment;
    o.pad_to = opts->pad_to;
    o.huge_pages = opts->huge_pages != 0;
    o.reserve_bytes = opts->reserve_bytes;
  }
  return o;
}

// The C API's entry points as a table: libmemlayout_seg forwards to the
// interposer's table when the program runs under `memlayout record`/`run`, so
// one engine serves the process and the recorder sees pool allocations.
struct Dispatch {
  seg_pool *(*create)(const char *, const seg_pool_options *);
  void *(*malloc)(seg_pool *, size_t);
  void *(*calloc)(seg_pool *, size_t, size_t);
  void *(*aligned_alloc)(seg_pool *, size_t, size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  seg_pool *(*pool_of)(const void *);
  size_t (*usable_size)(const void *);
  int (*stats)(const seg_pool *, struct seg_pool_stats *);
  void (*destroy)(seg_pool *);
};
// The interposer exports its table under this name (extern "C").
inline constexpr const char *kDispatchSymbol = "memlayout_seg_dispatch_impl";

} // namespace memlayout::seg
