/* The allocation layer of the int-lf-like programs: a pool that hands out
 * memory for every record kind of the tree (ASCYLIB's ssalloc, switched to
 * malloc). Each variant of it lives in a translation unit of its own. */
#ifndef BST_POOL_H
#define BST_POOL_H
#include <stddef.h>

#ifdef BST_POOL_INLINE
/* Header-only: inlined into every constructor. */
#include <stdlib.h>
static inline void *pool_get(size_t size) {
  void *p = malloc(size);
  if (!p)
    abort();
  return p;
}
static inline size_t pool_allocated(void) { return 0; }
#else
void *pool_get(size_t size);
size_t pool_allocated(void);
#endif

#endif
