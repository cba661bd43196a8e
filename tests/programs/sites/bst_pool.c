/* A pool that is a malloc wrapper with bookkeeping: not a tail call. */
#include "bst_pool.h"

#include <stdio.h>
#include <stdlib.h>

static size_t allocated;

void *pool_get(size_t size) {
  void *p = malloc(size);
  if (!p) {
    fprintf(stderr, "pool_get: out of memory (%zu bytes)\n", size);
    exit(1);
  }
  allocated += size;
  return p;
}

size_t pool_allocated(void) { return allocated; }
