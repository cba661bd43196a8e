// Slow paths of the small-object pages: refilling a page, moving between
// pages, taking pages from the pool, and heaps coming and going.
#include "seg_page.h"

#include "seg_engine.h"
#include "seg_pool.h"

#include <cstring>
#include <sys/mman.h>

namespace memlayout::seg {

constinit thread_local char tl_thread_token = 0;
constinit SmallPage g_empty_page{};

namespace {

// Empty pages a pool keeps ready before it purges the ones it takes back.
constexpr uint32_t kKeepFreePages = 16;
// Fresh blocks linked onto a page's free list at a time.
constexpr uint32_t kFreshBatch = 16;
// Full pages an allocation that found no free block looks at for others'
// frees before it takes a new page.
constexpr int kFullPagesLooked = 8;
// The class byte of a free page whose memory was purged.
constexpr uint8_t kPurged = 0xff;

// ---- Lists of descriptors, linked by slice number + 1 ----------------------

SmallPage *page_at(Pool *pool, uint32_t id) { return id ? &pool->pages[id - 1] : nullptr; }
uint32_t id_of(const Pool *pool, const SmallPage *page) {
  return static_cast<uint32_t>(page - pool->pages) + 1;
}
char *base_of(const Pool *pool, const SmallPage *page) {
  return reinterpret_cast<char *>(pool->small_begin +
                                  (static_cast<uintptr_t>(page - pool->pages) << kPageShift));
}

void push_back(Pool *pool, PageQueue &q, SmallPage *page, PageList where) {
  uint32_t id = id_of(pool, page);
  page->prev = q.tail;
  page->next = 0;
  if (q.tail)
    page_at(pool, q.tail)->next = id;
  else
    q.head = id;
  q.tail = id;
  page->where = where;
}

void unlink(Pool *pool, PageQueue &q, SmallPage *page) {
  if (page->prev)
    page_at(pool, page->prev)->next = page->next;
  else
    q.head = page->next;
  if (page->next)
    page_at(pool, page->next)->prev = page->prev;
  else
    q.tail = page->prev;
  page->prev = page->next = 0;
  page->where = kNoList;
}

SmallPage *pop_front(Pool *pool, PageQueue &q) {
  SmallPage *page = page_at(pool, q.head);
  if (page)
    unlink(pool, q, page);
  return page;
}

// ---- Remote batches ----------------------------------------------------------

// Spare batches, from mmap in chunks, kept for good (engine lock): one is
// taken or given per kRemoteBatchBlocks remote frees.
RemoteBatch *g_spare_batches = nullptr;

RemoteBatch *batch_take() {
  EngineLock lock;
  if (!g_spare_batches) {
    constexpr size_t kChunk = 64 * 1024;
    void *p = mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return nullptr;
    auto *batches = static_cast<RemoteBatch *>(p);
    for (size_t i = 0, n = kChunk / sizeof(RemoteBatch); i < n; ++i)
      batches[i].next = i + 1 < n ? &batches[i + 1] : nullptr;
    g_spare_batches = batches;
  }
  RemoteBatch *batch = g_spare_batches;
  g_spare_batches = static_cast<RemoteBatch *>(batch->next);
  batch->count = 0;
  return batch;
}

void batch_give_locked(RemoteBatch *batch) {
  batch->next = g_spare_batches;
  g_spare_batches = batch;
}

// A batch the owner of its page has taken the blocks from: the owner's own
// for its next remote frees when it has a slot without one, a spare
// otherwise.
void batch_recycle(ThreadHeap *heap, RemoteBatch *batch) {
  batch->count = 0;
  if (heap)
    for (unsigned i = 0; i < kRemoteSlots; ++i)
      if (!heap->remote[i]) {
        heap->remote[i] = batch;
        heap->remote_page[i] = nullptr;
        return;
      }
  EngineLock lock;
  batch_give_locked(batch);
}

// Hands a slot's batch over to its page: the batch itself onto the page's
// thread_free, or its one block alone (the batch stays).
void remote_flush(ThreadHeap *heap, unsigned slot) {
  RemoteBatch *batch = heap->remote[slot];
  if (!batch || batch->count == 0)
    return;
  SmallPage *page = heap->remote_page[slot];
  if (batch->count == 1) {
    small_free_remote(page, batch->blocks[0]);
    batch->count = 0;
    return;
  }
  heap->remote[slot] = nullptr;
  thread_free_push(page, reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(batch) | kBatchTag),
                   &batch->next);
}

// Under the engine lock: every batch handed over, the heap keeps none.
void remote_flush_all_locked(ThreadHeap *heap) {
  for (unsigned i = 0; i < kRemoteSlots; ++i) {
    remote_flush(heap, i);
    if (heap->remote[i])
      batch_give_locked(heap->remote[i]);
    heap->remote[i] = nullptr;
  }
}

RemoteBatch *as_batch(void *node) {
  uintptr_t v = reinterpret_cast<uintptr_t>(node);
  return v & kBatchTag ? reinterpret_cast<RemoteBatch *>(v & ~kBatchTag) : nullptr;
}

// ---- One page ----------------------------------------------------------------

// Other threads' frees into the page, as one list of blocks in the order
// they were freed within each batch; the batches go back to `heap`.
void *take_thread_free(SmallPage *page, ThreadHeap *heap) {
  void *node = page->thread_free.exchange(nullptr, std::memory_order_acquire);
  void *list = nullptr;
  uint32_t n = 0;
  while (node) {
    if (RemoteBatch *batch = as_batch(node)) {
      node = batch->next;
      for (uint32_t i = batch->count; i-- > 0;) {
        *static_cast<void **>(batch->blocks[i]) = list;
        list = batch->blocks[i];
      }
      n += batch->count;
      batch_recycle(heap, batch);
    } else {
      void *next = *static_cast<void **>(node);
      *static_cast<void **>(node) = list;
      list = node;
      ++n;
      node = next;
    }
  }
  page->used = static_cast<uint16_t>(page->used - n);
  return list;
}

// The next block of the page, refilling its free list from the owner's
// frees, then from other threads' frees, then from blocks never handed out.
void *refill_and_pop(Pool *pool, SmallPage *page) {
  if (!page->free) {
    if (page->local_free) {
      page->free = page->local_free;
      page->local_free = nullptr;
    } else if (page->thread_free.load(std::memory_order_relaxed)) {
      page->free = take_thread_free(page, page->heap);
    } else if (page->fresh < page->capacity) {
      // Linked in address order: fresh blocks come out ascending.
      uint32_t size = page->block_size, n = page->capacity - page->fresh;
      if (n > kFreshBatch)
        n = kFreshBatch;
      char *first = base_of(pool, page) + size_t{page->fresh} * size;
      for (uint32_t i = 0; i + 1 < n; ++i)
        *reinterpret_cast<void **>(first + i * size) = first + (i + 1) * size;
      *reinterpret_cast<void **>(first + (n - 1) * size) = nullptr;
      page->fresh = static_cast<uint16_t>(page->fresh + n);
      page->free = first;
    } else {
      return nullptr;
    }
  }
  void *b = page->free;
  page->free = *static_cast<void **>(b);
  ++page->used;
  return b;
}

void init_page(SmallPage *page, ThreadHeap *heap, unsigned c) {
  size_t size = small_class_size(c);
  page->owner.store(heap->owner, std::memory_order_relaxed);
  page->free = nullptr;
  page->local_free = nullptr;
  page->thread_free.store(nullptr, std::memory_order_relaxed);
  page->heap = heap;
  page->used = 0;
  page->block_size = static_cast<uint16_t>(size);
  page->fresh = 0;
  page->capacity = static_cast<uint16_t>(kPageBytes / size);
  page->prev = page->next = 0;
  page->cls = static_cast<uint8_t>(c);
  page->where = kNoList;
}

// Under the engine lock: an empty page goes back to the pool.
void release_locked(Pool *pool, SmallPage *page) {
  page->owner.store(nullptr, std::memory_order_relaxed);
  page->heap = nullptr;
  page->free = page->local_free = nullptr;
  page->block_size = 0;
  page->cls = 0;
  if (pool->free_page_count >= kKeepFreePages) {
    pool->range.decommit(base_of(pool, page), kPageBytes);
    page->cls = kPurged;
    pool->small_held -= kPageBytes;
  }
  push_back(pool, pool->free_pages, page, kPoolFree);
  ++pool->free_page_count;
}

// A page for class c: one abandoned by an exited thread, an empty one, or a
// new one from the small area. Null when the area is used up.
SmallPage *take_page(ThreadHeap *heap, unsigned c) {
  Pool *pool = heap->pool;
  EngineLock lock;
  if (SmallPage *page = pop_front(pool, pool->abandoned[c])) {
    page->owner.store(heap->owner, std::memory_order_relaxed);
    page->heap = heap;
    return page;
  }
  SmallPage *page = pop_front(pool, pool->free_pages);
  if (page) {
    --pool->free_page_count;
    if (page->cls == kPurged) {
      if (!pool->range.commit(base_of(pool, page), kPageBytes)) {
        push_back(pool, pool->free_pages, page, kPoolFree);
        ++pool->free_page_count;
        return nullptr;
      }
      pool->small_held += kPageBytes;
    }
  } else {
    if (pool->small_bytes - pool->small_next < kPageBytes)
      return nullptr;
    page = &pool->pages[pool->small_next >> kPageShift];
    if (!pool->range.commit(base_of(pool, page), kPageBytes))
      return nullptr;
    pool->small_next += kPageBytes;
    pool->small_held += kPageBytes;
  }
  init_page(page, heap, c);
  return page;
}

void make_current(ThreadHeap *heap, unsigned c, SmallPage *page) {
  heap->current[c] = page;
  page->where = kCurrent;
}

} // namespace

void *small_alloc_slow(ThreadHeap *heap, unsigned c) {
  Pool *pool = heap->pool;
  SmallPage *page = heap->current[c];
  if (page != &g_empty_page) {
    if (void *b = refill_and_pop(pool, page))
      return b;
    push_back(pool, heap->full[c], page, kFull);
    heap->current[c] = &g_empty_page;
  }
  while ((page = pop_front(pool, heap->available[c])) != nullptr) {
    make_current(heap, c, page);
    if (void *b = refill_and_pop(pool, page))
      return b;
    push_back(pool, heap->full[c], page, kFull);
    heap->current[c] = &g_empty_page;
  }
  // Others may have freed into full pages: a few of them, oldest first.
  for (int i = 0; i < kFullPagesLooked && heap->full[c].head; ++i) {
    page = pop_front(pool, heap->full[c]);
    if (page->thread_free.load(std::memory_order_relaxed) || page->local_free) {
      make_current(heap, c, page);
      return refill_and_pop(pool, page);
    }
    push_back(pool, heap->full[c], page, kFull);
  }
  page = take_page(heap, c);
  if (!page)
    return nullptr;
  make_current(heap, c, page);
  return refill_and_pop(pool, page);
}

void small_free_batched(ThreadHeap *heap, SmallPage *page, void *p) {
  unsigned slot = 0;
  while (slot < kRemoteSlots && heap->remote_page[slot] != page)
    ++slot;
  RemoteBatch *batch = slot < kRemoteSlots ? heap->remote[slot] : nullptr;
  if (__builtin_expect(!batch, 0)) {
    if (slot == kRemoteSlots) { // a slot no page has, else each in turn
      slot = 0;
      while (slot < kRemoteSlots && heap->remote_page[slot])
        ++slot;
      if (slot == kRemoteSlots) {
        slot = heap->remote_victim;
        heap->remote_victim = (slot + 1) % kRemoteSlots;
        remote_flush(heap, slot);
      }
    }
    batch = heap->remote[slot];
    if (!batch) {
      batch = batch_take();
      if (!batch)
        return small_free_remote(page, p);
      heap->remote[slot] = batch;
    }
    heap->remote_page[slot] = page;
  }
  batch->blocks[batch->count] = p;
  if (++batch->count == kRemoteBatchBlocks)
    remote_flush(heap, slot);
}

void small_free_local_slow(ThreadHeap *heap, SmallPage *page) {
  Pool *pool = heap->pool;
  unsigned c = page->cls;
  if (page->where == kFull) {
    unlink(pool, heap->full[c], page);
    if (page->used)
      return push_back(pool, heap->available[c], page, kAvailable);
  } else if (page->where == kAvailable) {
    unlink(pool, heap->available[c], page);
  } else {
    return;
  }
  EngineLock lock;
  release_locked(pool, page);
}

namespace {

// Heaps come from mmap in chunks and are reused once freed (engine lock).
ThreadHeap *g_free_heaps = nullptr;

void heap_free_locked(ThreadHeap *heap) {
  for (ThreadHeap **h = &heap->pool->heaps; *h; h = &(*h)->next_in_pool)
    if (*h == heap) {
      *h = heap->next_in_pool;
      break;
    }
  heap->pool = nullptr;
  heap->next_in_pool = g_free_heaps;
  g_free_heaps = heap;
}

// Under the engine lock: a page of a heap that goes away.
void abandon_page(Pool *pool, SmallPage *page) {
  if (page->used == 0)
    return release_locked(pool, page);
  page->owner.store(nullptr, std::memory_order_relaxed);
  page->heap = nullptr;
  push_back(pool, pool->abandoned[page->cls], page, kAbandoned);
}

} // namespace

ThreadHeap *heap_create(Pool *pool) {
  ThreadHeap *heap = g_free_heaps;
  if (heap) {
    g_free_heaps = heap->next_in_pool;
  } else {
    constexpr size_t kChunk = 64 * 1024;
    void *p = mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return nullptr;
    auto *heaps = static_cast<ThreadHeap *>(p);
    size_t n = kChunk / sizeof(ThreadHeap);
    for (size_t i = 1; i < n; ++i)
      heaps[i].next_in_pool = i + 1 < n ? &heaps[i + 1] : nullptr;
    g_free_heaps = n > 1 ? &heaps[1] : nullptr;
    heap = &heaps[0];
  }
  memset(static_cast<void *>(heap), 0, sizeof *heap);
  for (auto &page : heap->current)
    page = &g_empty_page;
  heap->pool = pool;
  heap->owner = thread_token();
  heap->next_in_pool = pool->heaps;
  pool->heaps = heap;
  return heap;
}

namespace {

// A heap that is going away: its statistics join the pool's shared ones.
void retire_heap(Pool *pool, ThreadHeap *heap) {
  uint64_t allocations, frees;
  int64_t live_bytes;
  heap_counts(heap, &allocations, &frees, &live_bytes);
  pool->shared_allocations.fetch_add(allocations, std::memory_order_relaxed);
  pool->shared_frees.fetch_add(frees, std::memory_order_relaxed);
  pool->shared_live_bytes.fetch_add(live_bytes, std::memory_order_relaxed);
  heap_free_locked(heap);
}

} // namespace

void heap_abandon(ThreadHeap *heap) {
  Pool *pool = heap->pool;
  remote_flush_all_locked(heap);
  for (unsigned c = 0; c < kSmallClasses; ++c) {
    if (heap->current[c] != &g_empty_page)
      abandon_page(pool, heap->current[c]);
    heap->current[c] = &g_empty_page;
    for (PageQueue *q : {&heap->available[c], &heap->full[c]})
      while (SmallPage *page = pop_front(pool, *q))
        abandon_page(pool, page);
  }
  retire_heap(pool, heap);
}

void heap_forget(ThreadHeap *heap) {
  for (RemoteBatch *batch : heap->remote)
    if (batch)
      batch_give_locked(batch);
  heap_free_locked(heap);
}

void small_area_drop_batches(Pool *pool) {
  for (size_t i = 0, n = pool->small_next >> kPageShift; i < n; ++i) {
    SmallPage *page = &pool->pages[i];
    if (page->where == kPoolFree)
      continue; // no blocks out, and maybe no memory
    void *node = page->thread_free.exchange(nullptr, std::memory_order_relaxed);
    while (node) {
      RemoteBatch *batch = as_batch(node);
      node = batch ? batch->next : *static_cast<void **>(node);
      if (batch)
        batch_give_locked(batch);
    }
  }
}

void heaps_after_fork_child(Pool *pool) {
  // The other threads may have been inside their heaps' lists when the
  // process forked: their heaps go without being walked, and their pages
  // are found by their owner instead, whatever list they were on.
  const void *self = thread_token();
  for (ThreadHeap *heap = pool->heaps, *next; heap; heap = next) {
    next = heap->next_in_pool;
    if (heap->owner == self)
      continue;
    // Its batches stay out, and the blocks in them in use: its thread may
    // have been handing one over when the process forked.
    for (RemoteBatch *&batch : heap->remote)
      batch = nullptr;
    retire_heap(pool, heap);
  }
  for (size_t i = 0, n = pool->small_next >> kPageShift; i < n; ++i) {
    SmallPage *page = &pool->pages[i];
    const void *owner = page->owner.load(std::memory_order_relaxed);
    if (!owner || owner == self)
      continue;
    page->owner.store(nullptr, std::memory_order_relaxed);
    page->heap = nullptr;
    push_back(pool, pool->abandoned[page->cls], page, kAbandoned);
  }
}

void heap_counts(const ThreadHeap *heap, uint64_t *allocations, uint64_t *frees,
                 int64_t *live_bytes) {
  *allocations = heap->allocations.load(std::memory_order_relaxed);
  *frees = heap->frees.load(std::memory_order_relaxed);
  *live_bytes = heap->live_bytes.load(std::memory_order_relaxed);
  for (unsigned c = 0; c < kSmallClasses; ++c) {
    uint64_t a = heap->small_allocations[c].load(std::memory_order_relaxed);
    uint64_t f = heap->small_frees[c].load(std::memory_order_relaxed);
    *allocations += a;
    *frees += f;
    *live_bytes += static_cast<int64_t>((a - f) * small_class_size(c));
  }
}

bool small_area_init(Pool *pool, size_t bytes) {
  size_t count = bytes >> kPageShift;
  size_t map_bytes = count * sizeof(SmallPage);
  void *p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return false;
  pool->pages = static_cast<SmallPage *>(p);
  pool->small_begin = pool->range.begin();
  pool->small_bytes = bytes;
  pool->small_next = pool->small_held = 0;
  pool->free_pages = {};
  pool->free_page_count = 0;
  for (auto &q : pool->abandoned)
    q = {};
  pool->heaps = nullptr;
  return true;
}

void small_area_release(Pool *pool) {
  if (pool->pages)
    munmap(pool->pages, (pool->small_bytes >> kPageShift) * sizeof(SmallPage));
  pool->pages = nullptr;
  pool->small_begin = 0;
  pool->small_bytes = pool->small_next = pool->small_held = 0;
}

size_t small_area_held(const Pool *pool) { return pool->small_held; }

} // namespace memlayout::seg
