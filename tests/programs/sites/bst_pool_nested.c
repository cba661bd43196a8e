/* A pool in two layers, as ssalloc has them: pool_get zeroes what the raw
 * layer (bst_pool_raw.c) allocates and accounts for. */
#include "bst_pool.h"

#include <string.h>

void *pool_raw_alloc(unsigned pool, size_t size);

void *pool_get(size_t size) {
  void *p = pool_raw_alloc(0, size);
  memset(p, 0, size);
  return p;
}
