// citrus's own cases (trees/citrus.h): record layouts, the successor copy
// that replaces a removed two-child node, the RCU grace period (it ends
// while readers keep coming, and removals that wait for it finish), lookups
// that never miss a key while its node is copied, and a few keys fought over
// by every thread (the tags' empty-slot validation).
#include "citrus.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

using namespace memlayout::trees;

namespace {

Value value_of(Key key) { return key * 7 + 3; }

template <class L> void two_child_removals_copy_the_successor() {
  Citrus<L> tree(AllocPolicy::kMalloc);
  std::map<Key, Value> ref;
  for (Key k : {50, 30, 70, 20, 40, 60, 80, 65, 62, 67}) {
    REQUIRE(tree.insert(k, value_of(k)));
    ref.emplace(k, value_of(k));
  }
  // 50's successor 60 is deep, with a right child; 70's is its right child.
  for (Key k : {50, 70}) {
    REQUIRE(tree.remove(k));
    ref.erase(k);
    CHECK(tree.check_structure() == "");
    for (const auto &[key, v] : ref) {
      Value got = 0;
      REQUIRE(tree.lookup(key, &got));
      CHECK(got == v);
    }
  }
  // The copies carry the successors' values and stay removable.
  REQUIRE(tree.remove(60));
  REQUIRE(tree.remove(80));
  CHECK(tree.check_structure() == "");
  CHECK_FALSE(tree.remove(60));
  Value got = 0;
  CHECK_FALSE(tree.lookup(80, &got));
}

// Keys divisible by 4 are inserted first and never removed; writers insert
// and remove the others, so stable keys are copied up as successors of
// removed two-child nodes while lookups are on their way to the original.
template <class L> void stable_keys_never_missed() {
  Citrus<L> tree(AllocPolicy::kMalloc);
  constexpr Key kRange = 2048;
  std::vector<Key> order;
  for (Key k = 1; k <= kRange; ++k)
    order.push_back(k);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(11));
  for (Key k : order)
    if (k % 4 == 0)
      REQUIRE(tree.insert(k, value_of(k)));
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> misses{0}, lookups{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      for (int i = 0; i < 100'000; ++i) {
        Key k = static_cast<Key>(rng() % kRange) + 1;
        if (k % 4 == 0)
          continue;
        if (rng() % 2)
          tree.insert(k, value_of(k));
        else
          tree.remove(k);
      }
      writers_done.fetch_add(1);
    });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      uint64_t missed = 0, done = 0;
      while (writers_done.load(std::memory_order_relaxed) < 2) {
        Key k = 4 * (static_cast<Key>(rng() % (kRange / 4)) + 1);
        Value v = 0;
        if (!tree.lookup(k, &v) || v != value_of(k))
          ++missed;
        ++done;
      }
      misses.fetch_add(missed);
      lookups.fetch_add(done);
    });
  for (auto &t : threads)
    t.join();
  CHECK(misses.load() == 0);
  CHECK(lookups.load() > 0);
  CHECK(tree.check_structure() == "");
}

// Four threads on eight keys: slots empty and fill again all the time, which
// the tags must tell apart. Per-key accounting as in the generic suite.
template <class L> void few_keys_many_threads() {
  Citrus<L> tree(AllocPolicy::kMalloc);
  constexpr Key kRange = 8;
  constexpr int kThreads = 4;
  std::vector<std::vector<int>> delta(kThreads, std::vector<int>(kRange + 1, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 100'000; ++i) {
        Key k = static_cast<Key>(rng() % kRange) + 1;
        if (rng() % 2)
          delta[t][k] += tree.insert(k, value_of(k));
        else
          delta[t][k] -= tree.remove(k);
      }
    });
  for (auto &t : threads)
    t.join();
  for (Key k = 1; k <= kRange; ++k) {
    int sum = 0;
    for (int t = 0; t < kThreads; ++t)
      sum += delta[t][k];
    INFO("key " << k);
    REQUIRE((sum == 0 || sum == 1));
    Value v = 0;
    CHECK(tree.lookup(k, &v) == (sum == 1));
  }
  CHECK(tree.check_structure() == "");
}

} // namespace

TEST_CASE("citrus: record sizes of the two layouts", "[citrus]") {
  Citrus<CitrusBaselineLayout> baseline(AllocPolicy::kMalloc);
  Citrus<CitrusFixedLayout> fixed(AllocPolicy::kMalloc);
  REQUIRE(baseline.records().kind_count() == 1);
  CHECK(baseline.records().kind_name(0) == "node");
  CHECK(baseline.records().record_size(0) == 64);
  CHECK(fixed.records().record_size(0) == 48);
}

TEMPLATE_TEST_CASE("citrus: removing a two-child node puts a copy of its successor in its place",
                   "[citrus]", CitrusBaselineLayout, CitrusFixedLayout) {
  two_child_removals_copy_the_successor<TestType>();
}

// Readers enter and leave read-side sections back to back; each grace
// period must still end (a reader is waited for once, not until it is idle),
// and the readers must still make progress meanwhile.
TEST_CASE("citrus: grace periods end while readers keep reading", "[citrus]") {
  Citrus<CitrusFixedLayout> tree(AllocPolicy::kMalloc);
  for (Key k = 1; k <= 256; ++k)
    REQUIRE(tree.insert(k, value_of(k)));
  std::atomic<bool> stop{false};
  std::atomic<int> reading{0};
  std::atomic<uint64_t> found{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&, r] {
      uint64_t n = 0;
      Value v = 0;
      n += tree.lookup(r + 1, &v);
      reading.fetch_add(1);
      for (Key k = r + 1; !stop.load(std::memory_order_relaxed); k = k % 256 + 1)
        n += tree.lookup(k, &v);
      found.fetch_add(n);
    });
  while (reading.load() < 2)
    std::this_thread::yield();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i)
    citrus_synchronize_readers();
  auto elapsed = std::chrono::steady_clock::now() - start;
  stop.store(true);
  for (auto &t : readers)
    t.join();
  CHECK(found.load() > 2); // every key is present: each lookup finds one
  CHECK(elapsed < std::chrono::seconds(20));
}

TEMPLATE_TEST_CASE("citrus: lookups never miss keys whose nodes are copied", "[citrus]",
                   CitrusBaselineLayout, CitrusFixedLayout) {
  stable_keys_never_missed<TestType>();
}

TEMPLATE_TEST_CASE("citrus: four threads on eight keys", "[citrus]", CitrusBaselineLayout,
                   CitrusFixedLayout) {
  few_keys_many_threads<TestType>();
}
