/* Many more threads than cores, released together: each allocates and
 * frees, keeps one object, and exits, so every thread flushes its events at
 * the same moment. Main joins them (or, with "detach", exits while they
 * may still run).
 *
 *   many_threads [THREADS [detach]]   (default 400) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t g_start;

static void *work(void *arg) {
  (void)arg;
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < 2000; ++i) {
    char *volatile p = malloc((size_t)(i % 300) + 1);
    p[0] = (char)i;
    free(p);
  }
  return malloc(10);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 400;
  int detach = argc > 2 && strcmp(argv[2], "detach") == 0;
  if (n < 1 || n > 4096)
    return 2;
  pthread_t *threads = malloc((size_t)n * sizeof *threads);
  pthread_barrier_init(&g_start, NULL, (unsigned)n);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (int i = 0; i < n; ++i)
    if (pthread_create(&threads[i], &attr, work, NULL) != 0) {
      printf("create failed at %d\n", i);
      return 1;
    }
  if (detach) {
    for (int i = 0; i < n; ++i)
      pthread_detach(threads[i]);
    printf("%d threads detached\n", n);
    exit(0);
  }
  for (int i = 0; i < n; ++i) {
    void *kept;
    pthread_join(threads[i], &kept);
    free(kept);
  }
  free(threads);
  printf("%d threads joined\n", n);
  return 0;
}
