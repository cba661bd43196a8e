/* Workers allocate; main joins them and frees everything they allocated.
 * Main's last clock sample is from before it started them: without a new
 * one after the join, its first frees would be stamped before the
 * allocations they end, and the replay would apply them on their arrival.
 *
 *   join_frees [WORKERS [OBJECTS]]   (default 3 workers x 200 objects) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct counter {
  long hits, key;
};

static long g_objects = 200;

static void *work(void *arg) {
  struct counter **mine = arg;
  for (long i = 0; i < g_objects; ++i) {
    mine[i] = malloc(sizeof **mine);
    memset(mine[i], 0, sizeof **mine);
    mine[i]->key = i;
  }
  return NULL;
}

int main(int argc, char **argv) {
  int workers = argc > 1 ? atoi(argv[1]) : 3;
  g_objects = argc > 2 ? atol(argv[2]) : 200;
  if (workers < 1 || workers > 64 || g_objects < 1)
    return 2;
  struct counter ***tables = calloc((size_t)workers, sizeof *tables);
  pthread_t threads[64];
  for (int t = 0; t < workers; ++t) {
    tables[t] = calloc((size_t)g_objects, sizeof **tables);
    pthread_create(&threads[t], NULL, work, tables[t]);
  }
  for (int t = 0; t < workers; ++t)
    pthread_join(threads[t], NULL);
  long sum = 0; /* all objects were live together until now */
  for (int t = 0; t < workers; ++t) {
    for (long i = 0; i < g_objects; ++i) {
      sum += tables[t][i]->key;
      free(tables[t][i]);
    }
    free(tables[t]);
  }
  free(tables);
  printf("%ld\n", sum);
  return 0;
}
