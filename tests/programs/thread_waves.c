/* Waves of worker threads: each worker allocates blocks, frees every other
 * one and hands the rest to main, then exits; the next wave starts after
 * the last one ended. What a wave's workers leave in their caches goes back
 * to the allocator when they exit, and glibc gives the next wave the arenas
 * the last one left: where the next wave's blocks land depends on when the
 * threads before it ended.
 *
 *   thread_waves [WAVES [THREADS [BLOCKS]]]   (default 3 x 2 x 3000) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void **g_kept;
static long g_blocks = 3000;

struct job {
  long first; /* its slots in g_kept */
  int size;
};

static void *wave_worker(void *arg) {
  const struct job *j = arg;
  void *batch[16]; /* freed sixteen at a time: some stay in the thread's cache */
  int held = 0;
  for (long i = 0; i < g_blocks; ++i) {
    char *p = malloc((size_t)j->size);
    memset(p, (int)i, (size_t)j->size);
    if (i % 2) {
      g_kept[j->first + i / 2] = p;
      continue;
    }
    batch[held++] = p;
    if (held == 16) {
      while (held)
        free(batch[--held]);
    }
  }
  while (held)
    free(batch[--held]);
  return NULL;
}

int main(int argc, char **argv) {
  int waves = argc > 1 ? atoi(argv[1]) : 3;
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  g_blocks = argc > 3 ? atol(argv[3]) : 3000;
  if (waves < 1 || threads < 1 || threads > 64 || g_blocks < 2)
    return 2;
  long per_thread = g_blocks / 2;
  g_kept = calloc((size_t)(waves * threads * per_thread), sizeof *g_kept);
  struct job jobs[64];
  pthread_t ids[64];
  for (int w = 0; w < waves; ++w) {
    for (int t = 0; t < threads; ++t) {
      jobs[t].first = (long)(w * threads + t) * per_thread;
      jobs[t].size = 40 + 8 * ((w + t) % 4); /* 40-64 bytes: several classes */
      pthread_create(&ids[t], NULL, wave_worker, &jobs[t]);
    }
    for (int t = 0; t < threads; ++t)
      pthread_join(ids[t], NULL);
  }
  long kept = 0;
  for (long i = 0; i < waves * threads * per_thread; ++i)
    kept += g_kept[i] != NULL;
  printf("%ld blocks kept\n", kept);
  return 0;
}
