/* alloc_churn: an allocation-heavy multi-threaded program, the worst case for
 * a recorder. Each thread keeps a table of live objects and, per operation,
 * frees a random one and allocates a replacement of a random small size which
 * it initialises, as real programs do with what they allocate.
 *
 *   alloc_churn [THREADS [OPS_PER_THREAD [SLOTS]]]   (default 2 5000000 8192)
 *
 * Prints the operations done and a checksum, so a recorder that changed the
 * program's behaviour would show. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct worker {
  pthread_t thread;
  unsigned seed;
  long ops;
  long slots;
  uint64_t checksum;
};

static uint32_t next_random(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* Small sizes dominate real heaps: mostly 16-128 bytes, some up to 1 KiB. */
static size_t pick_size(uint32_t r) {
  uint32_t bucket = r & 15;
  if (bucket < 10)
    return 16 + (r >> 8) % 112;
  if (bucket < 15)
    return 128 + (r >> 8) % 384;
  return 512 + (r >> 8) % 512;
}

static void *run(void *arg) {
  struct worker *w = arg;
  unsigned char **table = calloc((size_t)w->slots, sizeof *table);
  uint32_t s = w->seed;
  uint64_t sum = 0;
  for (long i = 0; i < w->ops; ++i) {
    uint32_t r = next_random(&s);
    long k = (long)(r % (uint32_t)w->slots);
    if (table[k])
      sum += table[k][0];
    free(table[k]);
    size_t n = pick_size(next_random(&s));
    table[k] = malloc(n);
    memset(table[k], (int)(i & 0xff), n);
  }
  for (long k = 0; k < w->slots; ++k)
    free(table[k]);
  free(table);
  w->checksum = sum;
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  long ops = argc > 2 ? atol(argv[2]) : 5000000;
  long slots = argc > 3 ? atol(argv[3]) : 8192;
  if (threads < 1 || threads > 256 || ops < 1 || slots < 1) {
    fprintf(stderr, "usage: alloc_churn [THREADS [OPS_PER_THREAD [SLOTS]]]\n");
    return 2;
  }
  struct worker *w = calloc((size_t)threads, sizeof *w);
  for (int t = 0; t < threads; ++t) {
    w[t].seed = 0x9e3779b9u * (unsigned)(t + 1);
    w[t].ops = ops;
    w[t].slots = slots;
    pthread_create(&w[t].thread, NULL, run, &w[t]);
  }
  uint64_t sum = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(w[t].thread, NULL);
    sum += w[t].checksum;
  }
  printf("alloc_churn: %d threads x %ld ops, checksum %llu\n", threads, ops,
         (unsigned long long)sum);
  free(w);
  return 0;
}
