/* A pool that only forwards: the compiler turns the call into a tail jump,
 * so pool_get leaves no frame of its own. */
#include "bst_pool.h"

#include <stdlib.h>

void *pool_get(size_t size) { return malloc(size); }

size_t pool_allocated(void) { return 0; }
