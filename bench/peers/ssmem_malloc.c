/* ASCYLIB's ssmem interface (external/include/ssmem.h of the snapshot being
 * built) over the process's malloc, for bench/peers/compare_trees.sh.
 *
 * ASCYLIB's own libssmem carves every thread's objects from private 32 MiB
 * chunks: its nodes sit packed at their exact size, line-aligned, whatever
 * malloc the process uses. memlayout-bench's trees get theirs from malloc.
 * Linked instead of libssmem, this file gives the published trees the same
 * allocator as ours, so that a throughput ratio measures the code, not two
 * allocators' layouts. Reclamation keeps ssmem's scheme as its header
 * describes it: a thread's timestamp grows on every ssmem_free; freed objects
 * gather in sets of fs_size; a full set records every thread's timestamp and
 * is handed to free() once each thread's timestamp has moved past the
 * recorded one (or the thread has left).
 *
 * Written for memlayout from the header's description; no ssmem code. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ssmem.h"

#define MAX_THREADS 256

typedef struct {
  _Alignas(64) _Atomic size_t ts; /* grows on every ssmem_free */
  _Atomic int live;
} thread_ts_t;

static thread_ts_t thread_ts[MAX_THREADS];

typedef struct pending_set {
  size_t ts[MAX_THREADS]; /* every thread's timestamp when the set filled */
  int threads;            /* how many entries of ts are meaningful */
  size_t count;
  struct pending_set *next;
  void *objs[];
} pending_set_t;

typedef struct {
  int id;
  size_t fs_size;
  pending_set_t *filling;
  pending_set_t *pending; /* newest first */
} thread_state_t;

static __thread thread_state_t self = {-1, SSMEM_GC_FREE_SET_SIZE, NULL, NULL};
static _Atomic int highest_id = 0;

static pending_set_t *new_set(size_t fs_size) {
  pending_set_t *s = malloc(sizeof(pending_set_t) + fs_size * sizeof(void *));
  if (!s)
    abort();
  s->count = 0;
  s->next = NULL;
  return s;
}

static void join(int id, size_t fs_size) {
  if (id < 0 || id >= MAX_THREADS)
    abort();
  self.id = id;
  self.fs_size = fs_size ? fs_size : SSMEM_GC_FREE_SET_SIZE;
  atomic_store(&thread_ts[id].live, 1);
  int h = atomic_load(&highest_id);
  while (h < id + 1 && !atomic_compare_exchange_weak(&highest_id, &h, id + 1))
    ;
}

void ssmem_alloc_init_fs_size(ssmem_allocator_t *a, size_t size, size_t free_set_size, int id) {
  (void)a;
  (void)size;
  join(id, free_set_size);
}

void ssmem_alloc_init(ssmem_allocator_t *a, size_t size, int id) {
  ssmem_alloc_init_fs_size(a, size, SSMEM_GC_FREE_SET_SIZE, id);
}

void ssmem_gc_thread_init(ssmem_allocator_t *a, int id) {
  (void)a;
  join(id, SSMEM_GC_FREE_SET_SIZE);
}

void *ssmem_alloc(ssmem_allocator_t *a, size_t size) {
  (void)a;
  void *p = malloc(size);
  if (!p)
    abort();
  return p;
}

/* A set may be freed once every thread that was live when it filled has
 * freed something since (its timestamp moved) or has left. */
static int safe(const pending_set_t *s) {
  for (int t = 0; t < s->threads; ++t)
    if (s->ts[t] != (size_t)-1 && atomic_load(&thread_ts[t].live) &&
        atomic_load_explicit(&thread_ts[t].ts, memory_order_acquire) == s->ts[t])
      return 0;
  return 1;
}

static void collect(void) {
  /* Sets are newest first: once one is safe, all older ones are too. */
  pending_set_t **link = &self.pending;
  while (*link && !safe(*link))
    link = &(*link)->next;
  pending_set_t *s = *link;
  *link = NULL;
  while (s) {
    pending_set_t *next = s->next;
    for (size_t i = 0; i < s->count; ++i)
      free(s->objs[i]);
    free(s);
    s = next;
  }
}

void ssmem_free(ssmem_allocator_t *a, void *obj) {
  (void)a;
  if (self.id < 0)
    join(0, SSMEM_GC_FREE_SET_SIZE);
  if (!self.filling)
    self.filling = new_set(self.fs_size);
  pending_set_t *s = self.filling;
  s->objs[s->count++] = obj;
  atomic_fetch_add_explicit(&thread_ts[self.id].ts, 1, memory_order_release);
  if (s->count < self.fs_size)
    return;
  s->threads = atomic_load(&highest_id);
  for (int t = 0; t < s->threads; ++t)
    s->ts[t] = t == self.id ? (size_t)-1 : atomic_load(&thread_ts[t].ts);
  s->next = self.pending;
  self.pending = s;
  self.filling = NULL;
  collect();
}

void ssmem_release(ssmem_allocator_t *a, void *obj) {
  (void)a;
  free(obj);
}

void ssmem_ts_next(void) {
  if (self.id >= 0)
    atomic_fetch_add_explicit(&thread_ts[self.id].ts, 1, memory_order_release);
}

void ssmem_alloc_term(ssmem_allocator_t *a) {
  (void)a;
  if (self.id >= 0)
    atomic_store(&thread_ts[self.id].live, 0);
}

void ssmem_term(void) {}

void ssmem_ts_list_print(void) {}
size_t *ssmem_ts_set_collect(void) { return NULL; }
void ssmem_ts_set_print(size_t *set) { (void)set; }
void ssmem_free_list_print(ssmem_allocator_t *a) { (void)a; }
void ssmem_collected_list_print(ssmem_allocator_t *a) { (void)a; }
void ssmem_available_list_print(ssmem_allocator_t *a) { (void)a; }
void ssmem_all_list_print(ssmem_allocator_t *a, int id) {
  (void)a;
  (void)id;
}
