// Small objects (up to 1 KiB) of a pool: pages of 64 KiB that each hold one
// size class, owned by one thread at a time, in the manner of mimalloc.
//
// Why: jemalloc's explicit-cache paths (mallocx/sdallocx with an arena and a
// cache) cost 1.4-1.5x its plain malloc/free before any work of ours, and a
// free had to find pool and class from the address in dependent lookups.
// Here an allocation pops the thread's current page of its class, and a
// free finds the page's descriptor from the address (owner slot, then the
// descriptor: seg_owner.h) and pushes the object on the page's local list
// when the calling thread owns the page: no atomic, no lock. Other threads'
// frees gather in the freeing thread's remote batch for the page and go to
// the page's thread_free stack a batch at a time (one compare-and-swap),
// which the owner takes over when its lists run dry.
//
// Layout. Pages are 64 KiB-aligned slices of the lower part of the pool's
// range, carved in ascending order; the descriptors live apart, two lines
// per slice, so objects start at the page's first byte and a class
// whose size divides 64 KiB continues without a gap from one page to the
// next, as jemalloc's slabs do. Fresh objects come in address order, freed
// ones are reused last-in first-out: a pool's layout is that of jemalloc
// for the type alone.
//
// Ownership. A page belongs to one (thread, pool) heap. When the thread
// exits (or a fork leaves it behind) its pages are abandoned to the pool and
// adopted by the next heap that needs a page of their class. Pages that
// empty go back to the pool, purged when the pool already keeps enough.
#pragma once

#include "size_class.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

struct seg_pool;

namespace memlayout::seg {

inline constexpr unsigned kPageShift = 16;
inline constexpr size_t kPageBytes = size_t{1} << kPageShift;
inline constexpr size_t kSmallMax = 1024;
inline constexpr unsigned kSmallClasses = 21; // jemalloc's 8, 16, 32, 48, ... 1024

namespace page_detail {

struct ClassTables {
  uint32_t size[kSmallClasses] = {};
  uint8_t class_of_bucket[kSmallMax / 8 + 1] = {}; // by (bytes + 7) / 8
};

constexpr ClassTables make_tables() {
  ClassTables t;
  unsigned c = 0;
  for (size_t bytes = 8; bytes <= kSmallMax; bytes += 8) {
    size_t cls = jemalloc_size_class(bytes);
    if (c == 0 || t.size[c - 1] != cls)
      t.size[c++] = static_cast<uint32_t>(cls);
    t.class_of_bucket[bytes / 8] = static_cast<uint8_t>(c - 1);
  }
  t.class_of_bucket[0] = 0;
  return t;
}

inline constexpr ClassTables kTables = make_tables();
static_assert(kTables.size[kSmallClasses - 1] == kSmallMax);
static_assert(kTables.size[3] == 48 && kTables.class_of_bucket[6] == 3 &&
              kTables.class_of_bucket[7] == 4);

} // namespace page_detail

// The class of a request of 1..kSmallMax bytes.
inline unsigned small_class(size_t bytes) {
  return page_detail::kTables.class_of_bucket[(bytes + 7) / 8];
}
inline size_t small_class_size(unsigned c) { return page_detail::kTables.size[c]; }

struct ThreadHeap;
using Pool = ::seg_pool;

// Blocks one thread freed into another thread's page, handed over together.
// Why: a free that links the block into a list writes the block, and so
// takes its cache line from the core that allocated (and wrote) it, and
// the owner's next allocation takes it back: two line transfers per object,
// 3.3-3.7x jemalloc's cost across threads on the Sapphire Rapids VM, whose
// remote free writes only the freeing thread's cache. A batch holds the
// pointers instead, and the owner links the blocks, in lines it still has.
inline constexpr unsigned kRemoteBatchBlocks = 62;
struct RemoteBatch {
  void *next; // the thread_free stack's link, tagged; or the spare batches'
  uint32_t count;
  void *blocks[kRemoteBatchBlocks]; // of one page
};
static_assert(sizeof(RemoteBatch) == 512);
// Pages a heap gathers remote frees for at once: objects of a few types or
// size classes freed in turn each keep their batch.
inline constexpr unsigned kRemoteSlots = 4;
// A thread_free node with this bit set is a RemoteBatch, not a block
// (blocks are at least 8-byte aligned).
inline constexpr uintptr_t kBatchTag = 1;

// A page's descriptor: two cache lines, in the pool's descriptor array. The
// first is the owner's, written on every allocation and free; the second
// is read by every thread that frees into the page. Why: on one line, each
// remote free's read of `owner` took the line from the owner, whose next
// allocation took it back; with remote frees batched, that was most of what
// they still cost (seg-pool-bench across threads, Sapphire Rapids VM: 53 to
// 150 ns per object on one line, 36-43 on two, jemalloc 40).
struct alignas(64) SmallPage {
  // The owner's.
  void *free;          // blocks to hand out next
  void *local_free;    // the owner's frees while the page was not current
  uint16_t used;       // blocks handed out and not back on free or local_free
  uint16_t fresh;      // blocks handed out at least once: the rest were never touched
  uint16_t capacity;   // blocks the page holds
  uint8_t where;       // PageList: which list holds the page
  uint32_t prev, next; // list links: slice numbers + 1, 0 for none

  // Everybody's. The owning thread's token (thread_token()); null when the
  // page is free or abandoned. Changed only by the owner, or under the
  // engine lock for a thread that is gone; read by every thread that frees
  // into the page, so atomic (relaxed: a thread only ever finds its own
  // token here if it put it there itself).
  alignas(64) std::atomic<const void *> owner;
  std::atomic<void *> thread_free; // blocks and batches (tagged) other threads freed
  ThreadHeap *heap;                // the owner's heap, for its counts
  uint16_t block_size;             // 0 for the empty sentinel
  uint8_t cls;
};
static_assert(sizeof(SmallPage) == 128);

enum PageList : uint8_t { kNoList, kCurrent, kAvailable, kFull, kPoolFree, kAbandoned };

// A page that never has a block: every heap's current page of every class
// before it has one, so the fast path needs no null check.
extern SmallPage g_empty_page;

// Doubly-linked lists of descriptors by slice number + 1.
struct PageQueue {
  uint32_t head = 0, tail = 0;
};

// One thread's allocator for one pool.
// Line-aligned: heaps sit side by side, and each is written by its thread.
struct alignas(64) ThreadHeap {
  SmallPage *current[kSmallClasses];
  // Written by the owning thread only, read by pool_stats: small objects'
  // calls by class (their usable bytes follow), large objects' calls and
  // usable bytes.
  std::atomic<uint64_t> small_allocations[kSmallClasses], small_frees[kSmallClasses];
  std::atomic<uint64_t> allocations, frees;
  std::atomic<int64_t> live_bytes;
  PageQueue available[kSmallClasses]; // with free blocks, besides the current one
  PageQueue full[kSmallClasses];      // no free block when last looked at
  Pool *pool;
  const void *owner;
  void *entry;              // the owner's ThreadPoolCache for the pool (seg_tcache.h)
  ThreadHeap *next_in_pool; // the pool's heaps, under the engine lock
  // The owner's frees into pages of other threads, not yet handed over: a
  // batch (or none at hand) per page it was last used for.
  RemoteBatch *remote[kRemoteSlots];
  SmallPage *remote_page[kRemoteSlots];
  unsigned remote_victim; // the slot a page without one takes next
};

// The calling thread's token: an address unique among live threads (in a
// forked child, the forking thread keeps its own).
extern constinit thread_local char tl_thread_token;
inline const void *thread_token() { return &tl_thread_token; }

inline void add_own(std::atomic<uint64_t> &counter, uint64_t v) {
  counter.store(counter.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}
inline void add_own(std::atomic<int64_t> &counter, int64_t v) {
  counter.store(counter.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

// Allocation fast path: a block of class c from the heap, or null when its
// current page has none ready (then small_alloc_slow).
inline void *small_pop(ThreadHeap *heap, unsigned c) {
  SmallPage *page = heap->current[c];
  void *b = page->free;
  if (__builtin_expect(b != nullptr, 1)) {
    page->free = *static_cast<void **>(b);
    ++page->used;
  }
  return b;
}

// Refills the current page or moves to another: null when the pool is full.
void *small_alloc_slow(ThreadHeap *heap, unsigned c);

// Frees into a page the calling thread owns: onto the free list of the
// page allocations come from, to be reused next (last freed, first reused,
// as jemalloc's thread cache does), or onto another page's local list. A
// page other than the current one that empties goes back to the pool; one
// that was full becomes available again.
void small_free_local_slow(ThreadHeap *heap, SmallPage *page);
inline void small_free_local(SmallPage *page, void *p) {
  uint16_t used = --page->used;
  if (__builtin_expect(page->where == kCurrent, 1)) {
    *static_cast<void **>(p) = page->free;
    page->free = p;
    return;
  }
  *static_cast<void **>(p) = page->local_free;
  page->local_free = p;
  if (used == 0 || page->where == kFull)
    small_free_local_slow(page->heap, page);
}

// Pushes `node` (a block, or a batch tagged with kBatchTag) onto the page's
// thread_free stack, its link at `link`.
inline void thread_free_push(SmallPage *page, void *node, void **link) {
  void *head = page->thread_free.load(std::memory_order_relaxed);
  do
    *link = head;
  while (!page->thread_free.compare_exchange_weak(head, node, std::memory_order_release,
                                                  std::memory_order_relaxed));
}

// Frees into a page another thread owns, or none, at once.
inline void small_free_remote(SmallPage *page, void *p) {
  thread_free_push(page, p, static_cast<void **>(p));
}

// The same through the heap's remote batch for the page: handed over when
// it is full, or when the heap frees into kRemoteSlots other pages, or when
// the thread exits. Until then the blocks wait, as objects wait in
// jemalloc's thread cache.
void small_free_batched(ThreadHeap *heap, SmallPage *page, void *p);

// A heap's counts: calls and net usable bytes.
void heap_counts(const ThreadHeap *heap, uint64_t *allocations, uint64_t *frees,
                 int64_t *live_bytes);

// Under the engine lock. A heap for the calling thread (null when none can
// be mapped); a heap's pages are abandoned to its pool and the heap freed.
ThreadHeap *heap_create(Pool *pool);
void heap_abandon(ThreadHeap *heap);
// The pool is being destroyed: its pages go with its range.
void heap_forget(ThreadHeap *heap);
// Under the engine lock, the pool being destroyed, its range still mapped:
// the batches waiting on its pages go back to the spares.
void small_area_drop_batches(Pool *pool);
// In a forked child: the heaps of the threads it does not have go, and
// their pages are left to the pool for adoption.
void heaps_after_fork_child(Pool *pool);

// Under the engine lock: the pool's small area (the first `bytes` of its
// range) and its descriptors; false when the descriptors cannot be mapped.
bool small_area_init(Pool *pool, size_t bytes);
void small_area_release(Pool *pool);
// Bytes of the small area carved into pages.
size_t small_area_held(const Pool *pool);

} // namespace memlayout::seg
