#include "own_heap.h"

#include <atomic>
#include <cstring>

namespace memlayout::preload::own_heap {

alignas(4096) unsigned char g_region[kRegionBytes];

namespace {

// Before each block: its class, or kUnsized for a block carved at its own
// size and alignment (an aligned or large request: never reused), and the
// bytes it holds. A free block's first word links it into a list.
struct Header {
  uint32_t cls;
  uint32_t unused;
  uint64_t usable;
};
static_assert(sizeof(Header) == 16);
constexpr uint32_t kUnsized = ~uint32_t{0};
constexpr unsigned kMinShift = 4, kClasses = 13; // 16 B to 64 KiB

struct FreeBlock {
  FreeBlock *next;
};

std::atomic<bool> g_locked{false};
// Under the lock.
size_t g_carved = 0; // bytes of the region handed out so far, headers included
FreeBlock *g_free[kClasses];
// Pushed by release() without the lock; sorted into g_free by allocate().
std::atomic<FreeBlock *> g_released{nullptr};
bool g_held_for_fork = false;

Header &header_of(const void *p) { return reinterpret_cast<Header *>(const_cast<void *>(p))[-1]; }

bool try_lock() { return !g_locked.exchange(true, std::memory_order_acquire); }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Another thread holds the lock for a few instructions: a short wait gets
// it. The code a signal handler interrupted may hold it too, and would wait
// forever: after the spin, give up.
bool lock_briefly() {
  for (unsigned i = 0; i < 64; ++i) {
    if (!g_locked.load(std::memory_order_relaxed) && try_lock())
      return true;
    cpu_relax();
  }
  return false;
}
void unlock() { g_locked.store(false, std::memory_order_release); }

void sort_released() {
  FreeBlock *b = g_released.exchange(nullptr, std::memory_order_acquire);
  while (b) {
    FreeBlock *next = b->next;
    uint32_t cls = header_of(b).cls;
    b->next = g_free[cls];
    g_free[cls] = b;
    b = next;
  }
}

unsigned class_of(size_t size) {
  unsigned shift = size <= 16 ? kMinShift : 64 - static_cast<unsigned>(__builtin_clzll(size - 1));
  return shift - kMinShift;
}

// `bytes` at `align` (16 or more) with room for a header before it.
void *carve(size_t bytes, size_t align) {
  uintptr_t base = reinterpret_cast<uintptr_t>(g_region);
  uintptr_t p = (base + g_carved + sizeof(Header) + align - 1) & ~(align - 1);
  if (p < base || p - base > kRegionBytes || bytes > base + kRegionBytes - p)
    return nullptr;
  g_carved = p + bytes - base;
  return reinterpret_cast<void *>(p);
}

} // namespace

void *allocate(size_t size, size_t align, bool zero) {
  if (size == 0)
    size = 1;
  if (align < 16)
    align = 16;
  if (size > kRegionBytes || align > kRegionBytes || !lock_briefly())
    return nullptr;
  sort_released();
  void *p = nullptr;
  unsigned cls = class_of(size);
  if (align == 16 && cls < kClasses) {
    if (FreeBlock *b = g_free[cls]) {
      g_free[cls] = b->next;
      p = b;
    } else if ((p = carve(size_t{16} << cls, 16))) {
      header_of(p) = {cls, 0, size_t{16} << cls};
    }
  } else if ((p = carve(size, align))) {
    header_of(p) = {kUnsized, 0, size};
  }
  unlock();
  if (p && zero)
    std::memset(p, 0, header_of(p).usable);
  return p;
}

void release(void *p) {
  if (header_of(p).cls >= kClasses)
    return;
  auto *b = static_cast<FreeBlock *>(p);
  FreeBlock *head = g_released.load(std::memory_order_relaxed);
  do
    b->next = head;
  while (!g_released.compare_exchange_weak(head, b, std::memory_order_release,
                                           std::memory_order_relaxed));
}

size_t usable(const void *p) { return header_of(p).usable; }

void prepare_fork() {
  // The holder lets go within a few instructions, unless it is the code
  // this thread's signal handler interrupted: then the child starts over.
  for (unsigned i = 0; i < (1u << 16) && !(g_held_for_fork = try_lock()); ++i)
    cpu_relax();
}

void parent_after_fork() {
  if (g_held_for_fork)
    unlock();
}

void child_after_fork() {
  if (!g_held_for_fork) { // a thread gone with the fork may have been changing the lists
    for (FreeBlock *&f : g_free)
      f = nullptr;
    g_released.store(nullptr, std::memory_order_relaxed);
  }
  unlock();
}

} // namespace memlayout::preload::own_heap
