/* Threads hand blocks over to each other through one queue: each allocates
 * OBJECTS blocks, puts each one in the queue and frees one it takes out;
 * main frees what is left after joining them. At most QUEUE blocks, one per
 * thread in hand and the threads' own are live at once; none at the end.
 * With many more threads than CPUs most frees are of another thread's
 * blocks, by a thread that just waited for the queue's lock.
 *
 * With `log`, each thread notes the address and requested size of every
 * block it frees (the size is in the block), and main prints them all at
 * the end, thread by thread in each one's order: what a recording's frees
 * must say they freed.
 *
 *   handoff [THREADS [OBJECTS [log]]]   (default 48 x 5000) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct freed {
  void *p;
  size_t n;
};
struct free_log {
  long tid, count;
  struct freed *entries; /* room for g_objects */
};

#define QUEUE 1024
static void *g_queue[QUEUE];
static unsigned g_head, g_tail;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_objects = 5000;

static struct free_log *g_logs; /* one per thread, when logging */

static void *work(void *arg) {
  size_t t = (size_t)arg;
  unsigned s = (unsigned)t * 2654435761u + 1;
  long sum = 0;
  struct free_log *log = g_logs ? &g_logs[t] : NULL;
  if (log)
    log->tid = (long)syscall(SYS_gettid);
  for (long i = 0; i < g_objects; ++i) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    size_t n = 16 + s % 200;
    char *p = malloc(n);
    memset(p, 1, n);
    memcpy(p + 8, &n, sizeof n);
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
      if (log) {
        size_t size;
        memcpy(&size, (char *)old + 8, sizeof size);
        log->entries[log->count++] = (struct freed){old, size};
      }
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
  static struct freed main_log[QUEUE + 1024 * 2 + 2];
  long main_count = 0;
  if (argc > 3 && strcmp(argv[3], "log") == 0) {
    g_logs = calloc((size_t)n, sizeof *g_logs);
    for (int t = 0; t < n; ++t)
      g_logs[t].entries = malloc((size_t)g_objects * sizeof(struct freed));
  }
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
    void *p = g_queue[g_head++ % QUEUE];
    size_t size;
    memcpy(&size, (char *)p + 8, sizeof size);
    main_log[main_count++] = (struct freed){p, size};
    free(p);
    ++freed;
  }
  main_log[main_count++] = (struct freed){threads, (size_t)n * sizeof *threads};
  free(threads);
  printf("%d threads, %ld blocks freed\n", n, freed);
  if (g_logs) {
    for (int t = 0; t < n; ++t)
      for (long i = 0; i < g_logs[t].count; ++i)
        printf("free %ld %p %zu\n", g_logs[t].tid, g_logs[t].entries[i].p, g_logs[t].entries[i].n);
    for (int t = 0; t < n; ++t) {
      main_log[main_count++] =
          (struct freed){g_logs[t].entries, (size_t)g_objects * sizeof(struct freed)};
      free(g_logs[t].entries);
    }
    main_log[main_count++] = (struct freed){g_logs, (size_t)n * sizeof *g_logs};
    free(g_logs);
    fflush(stdout);
    long pid = (long)getpid();
    for (long i = 0; i < main_count; ++i)
      printf("free %ld %p %zu\n", pid, main_log[i].p, main_log[i].n);
  }
  return 0;
}
