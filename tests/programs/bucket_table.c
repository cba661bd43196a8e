/* A chained hash table as C services write one: the buckets (a lock and a
 * list head, 48 bytes) made by the main thread through an xmalloc wrapper
 * before it starts the workers, which insert entries under the bucket locks.
 *
 *   bucket_table [THREADS] [PUTS]
 *
 * Prints how many entries it holds; exit status 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fputs("bucket_table: out of memory\n", stderr);
    exit(1);
  }
  return p;
}

struct entry {
  struct entry *next;
  uint64_t key, value;
};

struct bucket {
  pthread_mutex_t lock;
  struct entry *head;
};

enum { kBuckets = 4096 };
static struct bucket *g_buckets[kBuckets];
static int g_puts = 20000;

static void *worker(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < g_puts; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    struct bucket *b = g_buckets[x % kBuckets];
    struct entry *e = xmalloc(sizeof *e);
    e->key = x;
    e->value = (uint64_t)i;
    pthread_mutex_lock(&b->lock);
    e->next = b->head;
    b->head = e;
    pthread_mutex_unlock(&b->lock);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  if (argc > 2)
    g_puts = atoi(argv[2]);
  if (threads < 1 || threads > 64)
    return 2;
  for (int i = 0; i < kBuckets; i++) {
    struct bucket *b = xmalloc(sizeof *b);
    pthread_mutex_init(&b->lock, NULL);
    b->head = NULL;
    g_buckets[i] = b;
  }
  pthread_t ids[64];
  for (int t = 0; t < threads; t++)
    pthread_create(&ids[t], NULL, worker, (void *)(uintptr_t)(t + 1));
  for (int t = 0; t < threads; t++)
    pthread_join(ids[t], NULL);
  long n = 0;
  for (int i = 0; i < kBuckets; i++)
    for (struct entry *e = g_buckets[i]->head; e; e = e->next)
      n++;
  printf("%ld entries\n", n);
  return 0;
}
