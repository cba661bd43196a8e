// occ-avl's own cases (trees/occ_avl.h): record layouts, strict AVL shape
// after ascending inserts, routing nodes (two-child removals) being revived
// and unlinked, lookups that never miss a key while rotations move it, and
// a few keys fought over by every thread.
#include "occ_avl.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

using namespace memlayout::trees;

namespace {

Value value_of(Key key) { return key * 3 + 1; }

template <class L> void ascending_inserts_stay_balanced() {
  OccAvl<L> tree(AllocPolicy::kMalloc);
  for (Key k = 1; k <= 4096; ++k)
    REQUIRE(tree.insert(k, value_of(k)));
  // check_structure checks exact heights and |balance| <= 1 at every node.
  CHECK(tree.check_structure() == "");
  CHECK(tree.node_count() == 4096);
  for (Key k = 4096; k >= 1; k -= 2)
    REQUIRE(tree.remove(k));
  CHECK(tree.check_structure() == "");
  Value v = 0;
  CHECK(tree.lookup(4095, &v));
  CHECK(v == value_of(4095));
  CHECK_FALSE(tree.lookup(4096, &v));
}

template <class L> void routing_nodes_are_revived_then_unlinked() {
  OccAvl<L> tree(AllocPolicy::kMalloc);
  for (Key k : {2, 1, 3})
    REQUIRE(tree.insert(k, value_of(k)));

  // 2 has two children: its node stays as a routing node.
  REQUIRE(tree.remove(2));
  CHECK(tree.node_count() == 3);
  CHECK(tree.routing_node_count() == 1);
  Value v = 0;
  CHECK_FALSE(tree.lookup(2, &v));
  CHECK_FALSE(tree.remove(2));
  CHECK(tree.check_structure() == "");

  // Inserting the key again revives the same node with the new value.
  REQUIRE(tree.insert(2, 77));
  CHECK(tree.node_count() == 3);
  CHECK(tree.routing_node_count() == 0);
  REQUIRE(tree.lookup(2, &v));
  CHECK(v == 77);

  // Once a routing node is down to one child, the removal that caused it
  // unlinks it.
  REQUIRE(tree.remove(2));
  REQUIRE(tree.remove(1));
  CHECK(tree.node_count() == 1);
  CHECK(tree.routing_node_count() == 0);
  CHECK(tree.check_structure() == "");
  REQUIRE(tree.lookup(3, &v));
  CHECK(v == value_of(3));
}

// Keys divisible by 4 are inserted first and never removed; writers insert
// and remove the others, rotating and unlinking around them. Every lookup
// of a stable key must find it with its value.
template <class L> void stable_keys_never_missed() {
  OccAvl<L> tree(AllocPolicy::kMalloc);
  constexpr Key kRange = 2048;
  for (Key k = 4; k <= kRange; k += 4)
    REQUIRE(tree.insert(k, value_of(k)));
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> misses{0}, lookups{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      for (int i = 0; i < 150'000; ++i) {
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

// Four threads on eight keys: revivals, routing nodes and unlinks race on
// the same few nodes. Per-key accounting as in the generic suite.
template <class L> void few_keys_many_threads() {
  OccAvl<L> tree(AllocPolicy::kMalloc);
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

TEST_CASE("occ-avl: record sizes of the two layouts", "[occ-avl]") {
  OccAvl<OccAvlBaselineLayout> baseline(AllocPolicy::kMalloc);
  OccAvl<OccAvlFixedLayout> fixed(AllocPolicy::kMalloc);
  REQUIRE(baseline.records().kind_count() == 1);
  CHECK(baseline.records().kind_name(0) == "node");
  CHECK(baseline.records().record_size(0) == 64);
  CHECK(fixed.records().record_size(0) == 56);
}

TEMPLATE_TEST_CASE("occ-avl: ascending inserts keep a strict AVL tree", "[occ-avl]",
                   OccAvlBaselineLayout, OccAvlFixedLayout) {
  ascending_inserts_stay_balanced<TestType>();
}

TEMPLATE_TEST_CASE("occ-avl: a two-child removal leaves a routing node, revived or unlinked later",
                   "[occ-avl]", OccAvlBaselineLayout, OccAvlFixedLayout) {
  routing_nodes_are_revived_then_unlinked<TestType>();
}

TEMPLATE_TEST_CASE("occ-avl: lookups never miss keys that rotations move", "[occ-avl]",
                   OccAvlBaselineLayout, OccAvlFixedLayout) {
  stable_keys_never_missed<TestType>();
}

TEMPLATE_TEST_CASE("occ-avl: four threads on eight keys", "[occ-avl]", OccAvlBaselineLayout,
                   OccAvlFixedLayout) {
  few_keys_many_threads<TestType>();
}
