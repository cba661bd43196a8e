/* memlayout segregation pools: give a type its own allocator so its objects
 * are never interleaved with others (the BST study's fix for cache-set
 * underutilization, collocation luck and TLB spread), with optional padding,
 * alignment and huge pages.
 *
 *   seg_pool *nodes = seg_pool_create("nodes", NULL);
 *   struct node *n = seg_malloc(nodes, sizeof *n);
 *   ...
 *   seg_free(n);                       the pool is found from the address
 *
 * Each pool reserves its own contiguous address range: objects of up to
 * 1 KiB live in 64 KiB pages of one size class each, owned by one thread's
 * heap for the pool; larger ones come from a jemalloc arena carved from the
 * same range. A pool's objects never share a line or a page with another
 * pool's or with the program's malloc. Linking this library does not replace
 * the program's malloc. Under `memlayout record` pool allocations are recorded and
 * their groups named after the pool.
 *
 * Link: pkg-config --cflags --libs memlayout-seg, or CMake
 * find_package(memlayout) and target_link_libraries(... memlayout::seg). */
#ifndef MEMLAYOUT_SEG_H
#define MEMLAYOUT_SEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SEG_MALLOC_ATTR(...) __attribute__((malloc, warn_unused_result, __VA_ARGS__))
#define SEG_NONNULL(...) __attribute__((nonnull(__VA_ARGS__)))
#define SEG_REALLOC_ATTR __attribute__((warn_unused_result, alloc_size(2)))
#else
#define SEG_MALLOC_ATTR(...)
#define SEG_NONNULL(...)
#define SEG_REALLOC_ATTR
#endif

typedef struct seg_pool seg_pool;

typedef struct seg_pool_options {
  /* Every object starts on a multiple of this (a power of two; 0 = the size
   * class's natural alignment). align=64 keeps objects of at most a line from
   * straddling lines. */
  size_t alignment;
  /* Every object is given at least this many bytes (0 = its requested size):
   * pad=64 keeps small hot objects of different threads off each other's
   * lines; pad=192 gives 128-byte objects an odd line stride. */
  size_t pad_to;
  /* Back the pool with 2 MiB pages where the kernel allows (madvise). */
  int huge_pages;
  /* Address space reserved for the pool, in bytes (0 = 64 GiB). Only what
   * is used is backed by memory. Allocations fail with ENOMEM once it is
   * full. */
  size_t reserve_bytes;
} seg_pool_options;

/* Like struct stat and stat(): the struct and the function share a name. */
struct seg_pool_stats {
  const char *name;
  uintptr_t range_begin, range_end; /* the pool's reserved address range */
  size_t mapped_bytes;              /* address space the pool holds in it (not resident) */
  size_t allocated_bytes;           /* usable bytes of live objects */
  uint64_t allocations, frees;      /* counted since creation */
};

/* Creates a pool; NULL (errno ENOMEM or EINVAL) when the address range cannot
 * be reserved, the process has too many pools, or opts are invalid (an
 * alignment not a power of two or above 1 GiB, a pad_to larger than the
 * pool could ever serve: 28 MiB of a 64 MiB reserve, 28 GiB of the default
 * 64 GiB, docs/segregation-api.md). A name
 * already in use returns the existing pool. */
seg_pool *seg_pool_create(const char *name, const seg_pool_options *opts) SEG_NONNULL(1);

/* Allocate from a pool: NULL with errno ENOMEM on exhaustion, like malloc. */
void *seg_malloc(seg_pool *pool, size_t size) SEG_MALLOC_ATTR(alloc_size(2)) SEG_NONNULL(1);
void *seg_calloc(seg_pool *pool, size_t n, size_t size) SEG_MALLOC_ATTR(alloc_size(2, 3))
    SEG_NONNULL(1);
void *seg_aligned_alloc(seg_pool *pool, size_t align, size_t size)
    SEG_MALLOC_ATTR(alloc_size(3), alloc_align(2)) SEG_NONNULL(1);

/* Resizes within ptr's pool (or with realloc() when ptr is not from a pool).
 * Size 0 frees ptr and returns NULL, as glibc's realloc does. */
void *seg_realloc(void *ptr, size_t size) SEG_REALLOC_ATTR;
/* Frees an object of any pool, found from its address in O(1); a pointer not
 * from a pool goes to free(), NULL is ignored. Any thread may free. */
void seg_free(void *ptr);
/* The pool ptr was allocated from, NULL when it is not from a pool. */
seg_pool *seg_pool_of(const void *ptr);
/* Usable bytes of a pool object (what seg_realloc may grow into for free);
 * 0 when ptr is not from a pool. As for malloc_usable_size, ptr must be
 * what an allocation returned: a pointer into an object, or to a freed one,
 * is undefined. */
size_t seg_usable_size(const void *ptr);

/* 0 and *stats filled, or -1 with errno EINVAL. */
#if defined(__cplusplus) && defined(__GNUC__)
/* The function and the struct share the name, as C allows: -Wshadow in C++
 * would say the function hides the struct's constructor. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
/* pool may be NULL (EINVAL, as documented): no nonnull on it, or the caller's own
 * NULL check after the call would be compiled away. */
int seg_pool_stats(const seg_pool *pool, struct seg_pool_stats *stats) SEG_NONNULL(2);
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
/* Frees every object of the pool at once and returns its memory and address
 * range. Its pointers are dangling afterwards, and so is the handle: like a
 * jemalloc arena index after arena.<i>.destroy, using it is undefined (a pool
 * created later may get the same handle and range). */
void seg_pool_destroy(seg_pool *pool);

#ifdef __cplusplus
}
#endif

#endif
