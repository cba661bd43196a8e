/* Threads hand blocks over to each other through one queue: each allocates
 * OBJECTS blocks, puts each one in the queue and frees one it takes out;
 * main frees what is left after joining them. At most QUEUE blocks, one per
 * thread in hand and the threads' own are live at once; none at the end.
 * With many more threads than CPUs most frees are of another thread's
 * blocks, by a thread that just waited for the queue's lock.
 *
 *   handoff [THREADS [OBJECTS]]   (default 48 x 5000) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE 1024
static void *g_queue[QUEUE];
static unsigned g_head, g_tail;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_objects = 5000;

static void *work(void *arg) {
  unsigned s = (unsigned)(size_t)arg * 2654435761u + 1;
  long sum = 0;
  for (long i = 0; i < g_objects; ++i) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    size_t n = 16 + s % 200;
    char *p = malloc(n);
    memset(p, 1, n);
    void *old = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_tail - g_head == QUEUE)
      old = g_queue[g_head++ % QUEUE];
    g_queue[g_tail++ % QUEUE] = p;
    if (!old && (s & 1) && g_tail - g_head > 1)
      old = g_queue[g_head++ % QUEUE];
    pthread_mutex_unlock(&g_lock);
    if (old) {
      sum += *(char *)old;
      free(old);
    }
  }
  return (void *)sum;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 48;
  g_objects = argc > 2 ? atol(argv[2]) : 5000;
  if (n < 1 || n > 1024 || g_objects < 1)
    return 2;
  pthread_t *threads = malloc((size_t)n * sizeof *threads);
  for (int t = 0; t < n; ++t)
    pthread_create(&threads[t], NULL, work, (void *)(size_t)t);
  long freed = 0;
  for (int t = 0; t < n; ++t) {
    void *r;
    pthread_join(threads[t], &r);
    freed += (long)r;
  }
  while (g_head != g_tail) {
    free(g_queue[g_head++ % QUEUE]);
    ++freed;
  }
  free(threads);
  printf("%d threads, %ld blocks freed\n", n, freed);
  return 0;
}
