/* The program the exec tests start: allocates from a function with a name of
 * its own and says who it is.
 *
 *   exec_child LOG NAME
 *
 * stdout: "exec_child NAME: 20 blocks" (no pids: output is compared between
 * recorded and unrecorded runs); LOG: its allocations (ml_log.h). */
#define _GNU_SOURCE
#include "ml_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void *mlc_child_alloc(size_t size) {
  void *p = malloc(size);
  memset(p, 'c', size);
  ml_log_alloc("malloc", "mlc_child_alloc", p, size, 0, 0);
  return p;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LOG NAME\n", argv[0]);
    return 2;
  }
  void *blocks[20];
  for (int i = 0; i < 20; ++i)
    blocks[i] = mlc_child_alloc(700 + (size_t)i);
  for (int i = 0; i < 20; ++i) {
    ml_log_free("free", blocks[i]);
    free(blocks[i]);
  }
  if (ml_log_write(argv[1]) != 0)
    return 1;
  printf("exec_child %s: 20 blocks\n", argv[2]);
  return 0;
}
