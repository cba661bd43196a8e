// Memory for memlayout's own allocations inside the recorded process: those
// made before the program's allocator is known (dlsym's calloc) and those
// the C library makes while the recorder works (pthread_getattr_np's
// affinity mask when a thread's first event sets up its unwinder,
// pthread_setspecific's second-level array, stdio's buffers). Taken from the
// program's allocator they moved the program's own objects: a thread's
// blocks after its first event sat 208 bytes further on, freed chunks of
// ours were handed to the program from glibc's caches, and the report
// described a layout the program does not have without memlayout.
//
// A static region, carved into power-of-two classes with free lists. An
// allocation waits a few dozen spins at most: one that still finds the heap
// locked (by another thread, or by the code a signal handler interrupted)
// gets nullptr, and so does one the region cannot hold; the caller then uses
// the program's allocator, as before this heap existed. A release never waits either: it
// pushes the block onto a lock-free list, which the next allocation sorts
// into the classes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlayout::preload::own_heap {

inline constexpr size_t kRegionBytes = size_t{1} << 20;
extern unsigned char g_region[kRegionBytes];

// On every free: one compare.
inline bool contains(const void *p) {
  return static_cast<size_t>(static_cast<const unsigned char *>(p) - g_region) < kRegionBytes;
}

// `align` a power of two; zeroed where asked. nullptr: locked or full.
void *allocate(size_t size, size_t align, bool zero);
// A block of allocate(); any thread, any time.
void release(void *p);
// Bytes the block holds (its class, or its size where it has none).
size_t usable(const void *p);

// Around fork: the child gets a heap whose lock nobody holds and whose
// lists no thread was changing.
void prepare_fork();
void parent_after_fork();
void child_after_fork();

} // namespace memlayout::preload::own_heap
