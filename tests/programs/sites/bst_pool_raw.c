/* The raw layer of bst_pool_nested.c: per-pool accounting over malloc. */
#include "bst_pool.h"

#include <stdio.h>
#include <stdlib.h>

static size_t allocated[4];

void *pool_raw_alloc(unsigned pool, size_t size) {
  void *p = malloc(size);
  if (!p) {
    fprintf(stderr, "pool %u: out of memory\n", pool);
    abort();
  }
  allocated[pool & 3] += size;
  return p;
}

size_t pool_allocated(void) { return allocated[0] + allocated[1] + allocated[2] + allocated[3]; }
