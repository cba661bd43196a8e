/* Threads whose first call into the C library's allocator is inside
 * pthread_getattr_np, which reallocs its CPU set while it holds the
 * thread's lock: what Ruby's threads do first thing, to learn their stack.
 *
 *   getattr_first [THREADS]   (default 4) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *worker(void *arg) {
  pthread_attr_t attr;
  size_t size = 0;
  void *stack = NULL;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &stack, &size);
    pthread_attr_destroy(&attr);
  }
  char *p = malloc(64);
  if (p)
    p[0] = 1;
  free(p);
  *(size_t *)arg = size;
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  if (n < 1 || n > 64)
    return 2;
  pthread_t threads[64];
  size_t sizes[64];
  for (int i = 0; i < n; ++i)
    pthread_create(&threads[i], NULL, worker, &sizes[i]);
  int known = 0;
  for (int i = 0; i < n; ++i) {
    pthread_join(threads[i], NULL);
    known += sizes[i] > 0;
  }
  printf("%d of %d threads know their stack\n", known, n);
  return 0;
}
