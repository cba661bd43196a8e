// --noise: the study's "allocation calls of random sizes between BST
// operations", which break a tree's regular allocation pattern. Each call
// frees the oldest of a small ring of live objects and mallocs a new one of
// 8-512 bytes, so the heap around the tree's records keeps changing while the
// live noise stays small.
#pragma once

#include "random.h"

#include <array>
#include <cstdlib>

namespace memlayout::trees::bench {

class AllocationNoise {
public:
  AllocationNoise() { ring_.fill(nullptr); }
  ~AllocationNoise() {
    for (void *p : ring_)
      std::free(p);
  }
  AllocationNoise(const AllocationNoise &) = delete;
  AllocationNoise &operator=(const AllocationNoise &) = delete;

  [[gnu::noinline]] void churn(Xoshiro256 &rng) {
    void *&slot = ring_[next_++ % ring_.size()];
    std::free(slot);
    size_t size = 8 + rng.below(512 - 8 + 1);
    slot = std::malloc(size);
    if (slot)
      static_cast<volatile char *>(slot)[0] = 1; // touch it, as a program would
  }

private:
  std::array<void *, 64> ring_;
  size_t next_ = 0;
};

} // namespace memlayout::trees::bench
