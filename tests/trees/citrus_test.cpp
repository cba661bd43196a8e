// citrus's own cases (trees/citrus.h): record layouts, the successor copy
// that replaces a removed two-child node, the RCU grace period (it ends
// while readers keep coming, and removals that wait for it finish), lookups
// that never miss a key while its node is copied, and a few keys fought over
// by every thread (the tags' empty-slot validation).
#include "citrus.h"
#include "tree_factories.h"
#include "tree_test_support.h"

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
using namespace memlayout::trees::test;

namespace {

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
  check_stable_keys_never_missed(tree, 2048, 100'000, 11);
}

} // namespace

TEST_CASE("citrus: record sizes of the two layouts", "[citrus]") {
  CHECK(record_kinds(make_citrus, Layout::kBaseline) == std::vector<RecordKind>{{"node", 64}});
  CHECK(record_kinds(make_citrus, Layout::kFixed) == std::vector<RecordKind>{{"node", 48}});
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

// Four threads on eight keys: slots empty and fill again all the time, which
// the tags must tell apart. Per-key accounting as in the generic suite.
TEMPLATE_TEST_CASE("citrus: four threads on eight keys", "[citrus]", CitrusBaselineLayout,
                   CitrusFixedLayout) {
  Citrus<TestType> tree(AllocPolicy::kMalloc);
  check_per_key_accounting(tree, 8, 4, 100'000);
}
