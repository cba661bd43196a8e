// memlayout's own heap (ldpreload/own_heap.h): blocks in the region, reused
// by class once released, zeroed where asked, aligned as asked; an
// allocation that finds the heap locked gets nothing rather than waiting;
// and no block is handed to two holders when more threads than CPUs
// allocate and release at once.
#include "own_heap.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

using namespace memlayout::preload;

TEST_CASE("own heap: blocks lie in the region and are reused by class", "[own_heap]") {
  void *a = own_heap::allocate(40, 16, false);
  REQUIRE(a);
  CHECK(own_heap::contains(a));
  CHECK(reinterpret_cast<uintptr_t>(a) % 16 == 0);
  CHECK(own_heap::usable(a) == 64); // the 64-byte class
  std::memset(a, 0xab, 64);
  own_heap::release(a);
  void *b = own_heap::allocate(50, 16, true); // the same class: the block just released
  CHECK(b == a);
  std::vector<unsigned char> zeros(64, 0);
  CHECK(std::memcmp(b, zeros.data(), 64) == 0);
  void *c = own_heap::allocate(50, 16, false); // another block of the class
  CHECK(c != b);
  CHECK(own_heap::contains(c));
  own_heap::release(b);
  own_heap::release(c);
  int on_stack = 0;
  CHECK_FALSE(own_heap::contains(&on_stack));
}

TEST_CASE("own heap: aligned and oversized requests", "[own_heap]") {
  void *p = own_heap::allocate(100, 256, false);
  REQUIRE(p);
  CHECK(reinterpret_cast<uintptr_t>(p) % 256 == 0);
  CHECK(own_heap::usable(p) == 100);
  own_heap::release(p); // carved to its own size: dropped, never reused
  CHECK(own_heap::allocate(own_heap::kRegionBytes + 1, 16, false) == nullptr);
}

TEST_CASE("own heap: a locked heap gives nothing instead of waiting", "[own_heap]") {
  own_heap::prepare_fork(); // holds the lock, as around fork
  CHECK(own_heap::allocate(32, 16, false) == nullptr);
  void *outside = nullptr;
  std::thread([&] { outside = own_heap::allocate(32, 16, false); }).join();
  CHECK(outside == nullptr);
  own_heap::parent_after_fork();
  void *p = own_heap::allocate(32, 16, false);
  CHECK(p != nullptr);
  own_heap::release(p);
}

TEST_CASE("own heap: no block has two holders under preemption", "[own_heap][stress]") {
  const unsigned threads = 4 * std::max(2u, std::thread::hardware_concurrency());
  std::atomic<unsigned> shared_blocks{0}, served{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<unsigned char *> held;
      for (unsigned i = 0; i < 20000; ++i) {
        size_t size = 16 + (i * 37 + t * 11) % 600;
        auto *p = static_cast<unsigned char *>(own_heap::allocate(size, 16, false));
        if (p) {
          ++served;
          std::memset(p, static_cast<int>(t + 1), size);
          held.push_back(p);
        }
        if (held.size() > 8 || (!p && !held.empty())) {
          unsigned char *q = held.front();
          held.erase(held.begin());
          size_t n = own_heap::usable(q) < 16 ? own_heap::usable(q) : 16;
          for (size_t k = 0; k < n; ++k)
            if (q[k] != t + 1) {
              ++shared_blocks;
              break;
            }
          own_heap::release(q);
        }
      }
      for (unsigned char *q : held)
        own_heap::release(q);
    });
  for (std::thread &th : pool)
    th.join();
  CHECK(shared_blocks == 0);
  // An allocation that finds the heap taken gets nothing (its caller uses
  // the program's allocator): how many did depends on the machine's load,
  // but blocks went round.
  CHECK(served >= threads);
}
