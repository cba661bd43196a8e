/* A program that allocates rarely, as an interpreter growing a table does:
 * every few milliseconds it allocates a table one step larger, copies the
 * old one over and frees it. Each allocation must carry its own time: with
 * a clock sample every so many events, most of these would carry one from
 * steps before, and the peak would be placed at the wrong time.
 *
 *   sparse_allocs [STEPS [MS]]   (default 30 steps, 5 ms apart)
 * Table i is 50000 + i bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 30;
  long ms = argc > 2 ? atol(argv[2]) : 5;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  char *table = NULL;
  size_t bytes = 0;
  for (int i = 0; i < steps; ++i) {
    nanosleep(&pause, NULL);
    size_t grown = 50000 + (size_t)i;
    char *next = malloc(grown);
    if (!next)
      return 1;
    memset(next, i, grown);
    if (table)
      memcpy(next, table, bytes);
    free(table);
    table = next;
    bytes = grown;
  }
  printf("%d tables, the last %zu bytes\n", steps, bytes);
  free(table);
  return 0;
}
