// jemalloc extent hooks that serve a pool's arena from the pool's own range.
#pragma once

#include "seg_pool.h"

namespace memlayout::seg {

// Fills pool->hooks: every extent of the pool's arena, its metadata
// included, then comes from pool->range.
void init_extent_hooks(Pool *pool);

} // namespace memlayout::seg
