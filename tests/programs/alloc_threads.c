/* Four worker threads churn through every C allocation entry point while a
 * fifth thread frees blocks the workers hand it (cross-thread frees).
 *
 *   alloc_threads LOG [ROUNDS]
 *
 * Prints a deterministic summary on stdout (counts, checksums: no addresses)
 * and writes the per-allocation log (ml_log.h) to LOG. */
#define _GNU_SOURCE
#include "ml_log.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))
#define WORKERS 4
#define LIVE 64

static int g_rounds = 1200;
/* Through a volatile, or the compiler turns realloc(NULL, n) into malloc(n). */
static void *volatile g_no_block = NULL;
static volatile size_t g_too_many = SIZE_MAX / 2; /* reallocarray overflows */

/* ---- the hand-off queue to the freeing thread ------------------------------- */

#define QCAP 4096
static void *g_queue[QCAP];
static unsigned g_qhead, g_qtail;
static int g_workers_done;
static pthread_mutex_t g_qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_qcond = PTHREAD_COND_INITIALIZER;
static unsigned long g_cross_frees;

static void hand_off(void *p) {
  pthread_mutex_lock(&g_qlock);
  while (g_qtail - g_qhead == QCAP)
    pthread_cond_wait(&g_qcond, &g_qlock);
  g_queue[g_qtail++ % QCAP] = p;
  pthread_cond_broadcast(&g_qcond);
  pthread_mutex_unlock(&g_qlock);
}

static void *freeing_thread(void *arg) {
  (void)arg;
  ml_log_thread("freer");
  for (;;) {
    pthread_mutex_lock(&g_qlock);
    while (g_qhead == g_qtail && !g_workers_done)
      pthread_cond_wait(&g_qcond, &g_qlock);
    if (g_qhead == g_qtail && g_workers_done) {
      pthread_mutex_unlock(&g_qlock);
      break;
    }
    void *p = g_queue[g_qhead++ % QCAP];
    pthread_cond_broadcast(&g_qcond);
    pthread_mutex_unlock(&g_qlock);
    ml_log_free("free", p);
    free(p);
    ++g_cross_frees;
  }
  return NULL;
}

/* ---- allocating functions: each one is a call site the trace must name ------ */

static uint64_t next_random(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

NOINLINE void *mlt_alloc_small(size_t size) {
  void *p = malloc(size);
  if (!p)
    abort();
  size_t usable = malloc_usable_size(p);
  memset(p, 0xab, usable); /* the whole usable size is ours to use */
  ml_log_alloc("malloc", "mlt_alloc_small", p, size, usable, 0);
  return p;
}

NOINLINE void *mlt_alloc_zeroed(size_t n, size_t each) {
  unsigned char *p = calloc(n, each);
  if (!p)
    abort();
  for (size_t i = 0; i < n * each; ++i)
    if (p[i])
      abort();
  ml_log_alloc("calloc", "mlt_alloc_zeroed", p, n * each, malloc_usable_size(p), 0);
  return p;
}

NOINLINE void *mlt_alloc_aligned(unsigned which, size_t size) {
  static const size_t aligns[] = {16, 32, 64, 128, 256, 4096};
  size_t align = aligns[which % 6];
  void *p = NULL;
  const char *api;
  size_t logged_align = align;
  switch ((which / 6) % 5) {
  case 0:
    api = "posix_memalign";
    if (posix_memalign(&p, align, size) != 0)
      abort();
    break;
  case 1:
    api = "aligned_alloc";
    size = (size + align - 1) / align * align; /* C11: a multiple of the alignment */
    p = aligned_alloc(align, size);
    break;
  case 2:
    api = "memalign";
    p = memalign(align, size);
    break;
  case 3:
    api = "valloc";
    logged_align = (size_t)sysconf(_SC_PAGESIZE);
    p = valloc(size);
    break;
  default:
    api = "pvalloc";
    logged_align = (size_t)sysconf(_SC_PAGESIZE);
    p = pvalloc(size);
    break;
  }
  if (!p || ((uintptr_t)p & (logged_align - 1)))
    abort();
  size_t usable = malloc_usable_size(p);
  /* pvalloc's contract: the size rounded up to whole pages is the caller's,
   * whatever rule or pool served it */
  if (strcmp(api, "pvalloc") == 0 &&
      usable < (size + logged_align - 1) / logged_align * logged_align)
    abort();
  memset(p, 0x5a, usable);
  ml_log_alloc(api, "mlt_alloc_aligned", p, size, usable, logged_align);
  return p;
}

/* A buffer grown 1 -> 64 KiB by realloc, one doubling at a time. */
NOINLINE char *mlt_grow_buffer(size_t *len_out) {
  char *buf = realloc(g_no_block, 1); /* realloc(NULL, n) allocates */
  if (!buf)
    abort();
  ml_log_alloc("realloc", "mlt_grow_buffer", buf, 1, malloc_usable_size(buf), 0);
  buf[0] = 'x';
  size_t len = 1;
  while (len < 65536) {
    size_t want = len * 2;
    uintptr_t old = (uintptr_t)buf;
    char *grown = realloc(buf, want);
    if (!grown)
      abort();
    ml_log_realloc("realloc", "mlt_grow_buffer", old, grown, want, malloc_usable_size(grown));
    memset(grown + len, 'x', want - len);
    buf = grown;
    len = want;
  }
  *len_out = len;
  return buf;
}

/* An int array grown with reallocarray, then shrunk back. */
NOINLINE int *mlt_grow_array(size_t *count_out) {
  size_t n = 4;
  int *a = reallocarray(g_no_block, n, sizeof *a);
  if (!a)
    abort();
  ml_log_alloc("reallocarray", "mlt_grow_array", a, n * sizeof *a, malloc_usable_size(a), 0);
  for (size_t i = 0; i < n; ++i)
    a[i] = (int)i;
  while (n < 4096) {
    size_t want = n * 4;
    uintptr_t old = (uintptr_t)a;
    int *b = reallocarray(a, want, sizeof *b);
    if (!b)
      abort();
    ml_log_realloc("reallocarray", "mlt_grow_array", old, b, want * sizeof *b,
                   malloc_usable_size(b));
    for (size_t i = n; i < want; ++i)
      b[i] = (int)i;
    a = b;
    n = want;
  }
  uintptr_t old = (uintptr_t)a;
  int *shrunk = reallocarray(a, 100, sizeof *a);
  if (!shrunk)
    abort();
  ml_log_realloc("reallocarray", "mlt_grow_array", old, shrunk, 100 * sizeof *a,
                 malloc_usable_size(shrunk));
  /* overflow must fail cleanly and leave the array alone */
  errno = 0;
  if (reallocarray(shrunk, g_too_many, 4) != NULL || errno != ENOMEM)
    abort();
  *count_out = 100;
  return shrunk;
}

/* realloc(p, 0): glibc frees p and returns NULL; other allocators may hand
 * back a minimal block instead. Either way the trace must say what happened. */
NOINLINE void mlt_realloc_to_nothing(void *p) {
  uintptr_t old = (uintptr_t)p;
  void *q = realloc(p, 0);
  if (q) {
    ml_log_realloc("realloc", "mlt_realloc_to_nothing", old, q, 0, malloc_usable_size(q));
    ml_log_free("free", q);
    free(q);
  } else {
    ml_log_free("realloc", (void *)old);
  }
}

NOINLINE void mlt_release(void *p) {
  ml_log_free("free", p);
  free(p);
}

struct worker {
  int index;
  unsigned long allocs, checksum;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  ml_log_thread("worker");
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->index + 1);
  void *live[LIVE] = {0};
  unsigned next = 0;
  for (int round = 0; round < g_rounds; ++round) {
    uint64_t r = next_random(&seed);
    void *p;
    switch (r % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
      p = mlt_alloc_small(1 + (size_t)(r >> 8) % 512);
      break;
    case 4:
    case 5:
      p = mlt_alloc_zeroed(1 + (size_t)(r >> 8) % 32, 1 + (size_t)(r >> 16) % 24);
      break;
    default:
      p = mlt_alloc_aligned((unsigned)(r >> 8), 1 + (size_t)(r >> 20) % 3000);
      break;
    }
    ++w->allocs;
    w->checksum += r % 997;
    if (round % 16 == 5) {
      hand_off(p); /* freed by the freeing thread */
      continue;
    }
    if (live[next % LIVE])
      mlt_release(live[next % LIVE]);
    live[next++ % LIVE] = p;
    if (round % 200 == 0) {
      size_t len;
      char *buf = mlt_grow_buffer(&len);
      w->checksum += len + (unsigned char)buf[len - 1];
      w->allocs += 17;
      mlt_release(buf);
      size_t count;
      int *a = mlt_grow_array(&count);
      w->checksum += count + (unsigned long)a[99];
      w->allocs += 7;
      mlt_realloc_to_nothing(a);
    }
  }
  for (unsigned i = 0; i < LIVE; ++i)
    if (live[i])
      mlt_release(live[i]);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s LOG [ROUNDS]\n", argv[0]);
    return 2;
  }
  if (argc == 3)
    g_rounds = atoi(argv[2]);
  ml_log_thread("main");
  pthread_t freer, threads[WORKERS];
  struct worker workers[WORKERS];
  if (pthread_create(&freer, NULL, freeing_thread, NULL))
    return 1;
  for (int i = 0; i < WORKERS; ++i) {
    workers[i] = (struct worker){.index = i};
    if (pthread_create(&threads[i], NULL, worker_main, &workers[i]))
      return 1;
  }
  unsigned long allocs = 0, checksum = 0;
  for (int i = 0; i < WORKERS; ++i) {
    pthread_join(threads[i], NULL);
    allocs += workers[i].allocs;
    checksum += workers[i].checksum;
  }
  pthread_mutex_lock(&g_qlock);
  g_workers_done = 1;
  pthread_cond_broadcast(&g_qcond);
  pthread_mutex_unlock(&g_qlock);
  pthread_join(freer, NULL);
  printf("workers=%d rounds=%d allocations=%lu cross_thread_frees=%lu checksum=%lu\n", WORKERS,
         g_rounds, allocs, g_cross_frees, checksum);
  if (ml_log_write(argv[1]) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
