#include "thread_index.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace memlayout::trees::htm {
namespace {

std::atomic<bool> g_taken[kMaxThreads];
std::atomic<uint32_t> g_bound{0};

// Holds the thread's index and gives it back when the thread exits.
struct ThreadIndex {
  uint32_t index = kMaxThreads;
  ~ThreadIndex() {
    if (index < kMaxThreads)
      g_taken[index].store(false, std::memory_order_release);
  }
};
thread_local ThreadIndex t_index;

uint32_t claim() {
  for (uint32_t i = 0; i < kMaxThreads; ++i) {
    bool expected = false;
    if (!g_taken[i].load(std::memory_order_relaxed) &&
        g_taken[i].compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      uint32_t bound = g_bound.load(std::memory_order_relaxed);
      while (bound <= i && !g_bound.compare_exchange_weak(bound, i + 1))
        ;
      return i;
    }
  }
  std::fprintf(stderr, "memlayout htm: more than %u threads at once\n", kMaxThreads);
  std::abort();
}

} // namespace

uint32_t thread_index() {
  if (t_index.index == kMaxThreads)
    t_index.index = claim();
  return t_index.index;
}

uint32_t thread_index_bound() { return g_bound.load(std::memory_order_acquire); }

} // namespace memlayout::trees::htm
