// What the pool engine needs of jemalloc beyond mlje.h: the extent-hook
// types and the *allocx flag encoding from Debian's jemalloc 5.3 header (the
// same build as the renamed archive), and the mib-based mallctl entry points,
// which mlje.h does not declare.
#pragma once

#include "mlje.h"

#include <jemalloc/jemalloc.h>

extern "C" {
int mlje_mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp);
int mlje_mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp,
                      size_t newlen);
}

namespace memlayout::seg {

// MALLOCX_TCACHE(id) for an explicit cache, MALLOCX_TCACHE_NONE (the
// smallest such value) for none; 0 means "not set up yet" in our tables.
inline constexpr int kTcacheNone = MALLOCX_TCACHE_NONE;
constexpr int tcache_flags(unsigned id) { return MALLOCX_TCACHE(static_cast<int>(id)); }
constexpr unsigned tcache_id(int flags) { return static_cast<unsigned>((flags >> 8) - 2); }

// The alignment bits of *allocx flags (jemalloc's MALLOCX_LG_ALIGN_MASK).
inline constexpr int kLgAlignMask = 0x3f;

constexpr int lg_align_flags(size_t align) {
  return MALLOCX_LG_ALIGN(static_cast<int>(__builtin_ctzll(align)));
}

// Explicit thread caches jemalloc 5.3 can hand out per process (TCACHES_MAX
// less the ones it keeps): ids are below this.
inline constexpr unsigned kTcacheIdLimit = 4096;

} // namespace memlayout::seg
