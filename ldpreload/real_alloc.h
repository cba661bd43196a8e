// The allocator the recorder forwards to: the program's own (the next
// definition after us in symbol lookup order, usually glibc) or the jemalloc
// linked into this library. Every entry point of ours calls through here.
#pragma once

#include "options.h"
#include "trace_format.h"

#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

struct RealAllocator {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*memalign)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*usable_size)(void *);
};

extern RealAllocator g_real;

// How the recorder learns an allocation's usable size: from the allocator's
// own layout where it knows it (no call per allocation), else by asking
// (kNone). The trace stores sizes against the same model.
extern trace::UsableModel g_usable_model;

// Fills g_real for the mode. Called once, early, possibly from inside the
// first malloc of the process: dlsym must not recurse into us unguarded.
void resolve_real_allocator(AllocatorMode mode);

} // namespace memlayout::preload
