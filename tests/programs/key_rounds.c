/* Threads whose thread-specific value's destructor keeps itself alive for
 * glibc's four rounds of destructors, allocating through the program's own
 * wrapper in each, the last block in the fourth round. The key is created
 * after the first allocations (as a library set up on first use would), so
 * its destructor runs after the allocator's own in every round.
 *
 *   key_rounds [THREADS]   (default 16) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_key_t g_key;
static int g_last_rounds;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void *node_alloc(size_t n) {
  void *p = malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void again(void *value) {
  static __thread int rounds;
  free(value);
  if (++rounds < 4) {
    pthread_setspecific(g_key, node_alloc(40 + (size_t)rounds));
    return;
  }
  char *volatile last = node_alloc(99);
  memset(last, 1, 99);
  free(last);
  pthread_mutex_lock(&g_lock);
  ++g_last_rounds;
  pthread_mutex_unlock(&g_lock);
}

static void *work(void *arg) {
  pthread_setspecific(g_key, node_alloc(40));
  for (int i = 0; i < 100; ++i) {
    void *volatile p = node_alloc(64);
    free(p);
  }
  return arg;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 16;
  if (n < 1 || n > 1024)
    return 2;
  void *volatile first = node_alloc(8);
  free(first);
  pthread_key_create(&g_key, again);
  pthread_t *threads = malloc((size_t)n * sizeof *threads);
  for (int t = 0; t < n; ++t)
    pthread_create(&threads[t], NULL, work, NULL);
  for (int t = 0; t < n; ++t)
    pthread_join(threads[t], NULL);
  free(threads);
  printf("last-round destructors: %d of %d\n", g_last_rounds, n);
  return 0;
}
