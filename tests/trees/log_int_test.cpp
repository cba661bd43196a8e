// log-int's own cases (trees/log_int.h): record layouts, the successor moved
// into a removed two-child node's place (check_structure compares the tree's
// in-order with the pred/succ list and checks parent pointers), the
// unbalanced shape of ascending inserts, lookups that never miss a key while
// removals move nodes around it, and a few keys fought over by every thread.
#include "log_int.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

using namespace memlayout::trees;

namespace {

Value value_of(Key key) { return key * 5 - 2; }

template <class L> void two_child_removals_move_the_successor() {
  LogInt<L> tree(AllocPolicy::kMalloc);
  std::map<Key, Value> ref;
  // 50 has two children; its successor 60 is deep and has a right child (65).
  for (Key k : {50, 30, 70, 20, 40, 60, 80, 65, 62, 67}) {
    REQUIRE(tree.insert(k, value_of(k)));
    ref.emplace(k, value_of(k));
  }
  REQUIRE(tree.remove(50));
  ref.erase(50);
  CHECK(tree.check_structure() == "");
  // 70's successor 80 is its right child: the other branch of the move.
  REQUIRE(tree.remove(70));
  ref.erase(70);
  CHECK(tree.check_structure() == "");

  // Then remove whatever is at the top, over and over, on a random tree.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    Key k = static_cast<Key>(rng() % 10'000) + 100;
    ref.emplace(k, value_of(k));
    tree.insert(k, value_of(k));
  }
  std::vector<Key> keys;
  for (const auto &[k, v] : ref)
    keys.push_back(k);
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("removing " << keys[i]);
    REQUIRE(tree.remove(keys[i]));
    ref.erase(keys[i]);
    if (i % 16 == 0)
      REQUIRE(tree.check_structure() == "");
    if (i % 64 == 0)
      for (const auto &[k, v] : ref) {
        Value got = 0;
        REQUIRE(tree.lookup(k, &got));
        REQUIRE(got == v);
      }
  }
  CHECK(tree.check_structure() == "");
}

template <class L> void ascending_inserts_make_a_path() {
  LogInt<L> tree(AllocPolicy::kMalloc);
  constexpr Key kCount = 1000;
  for (Key k = 1; k <= kCount; ++k)
    REQUIRE(tree.insert(k, value_of(k)));
  // Unbalanced: each key is the right child of the previous one (below the
  // root sentinel's left edge).
  CHECK(tree.depth() == static_cast<size_t>(kCount));
  CHECK(tree.check_structure() == "");
  for (Key k = 1; k <= kCount; k += 2)
    REQUIRE(tree.remove(k));
  CHECK(tree.depth() == static_cast<size_t>(kCount / 2));
  CHECK(tree.check_structure() == "");
}

// Keys divisible by 4 are inserted first and never removed; writers insert
// and remove the others, so stable keys are moved up as successors of
// removed two-child nodes. Lookups that lose their way in the tree must
// still find them through the list.
template <class L> void stable_keys_never_missed() {
  LogInt<L> tree(AllocPolicy::kMalloc);
  constexpr Key kRange = 2048;
  std::vector<Key> order;
  for (Key k = 1; k <= kRange; ++k)
    order.push_back(k);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(9));
  for (Key k : order)
    if (k % 4 == 0)
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

// Four threads on eight keys: neighbours on the list are inserted and
// removed at once, so succLocks, tree locks and choose_parent all contend.
template <class L> void few_keys_many_threads() {
  LogInt<L> tree(AllocPolicy::kMalloc);
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

TEST_CASE("log-int: record sizes of the two layouts", "[log-int]") {
  LogInt<LogIntBaselineLayout> baseline(AllocPolicy::kMalloc);
  LogInt<LogIntFixedLayout> fixed(AllocPolicy::kMalloc);
  REQUIRE(baseline.records().kind_count() == 1);
  CHECK(baseline.records().kind_name(0) == "node");
  CHECK(baseline.records().record_size(0) == 128);
  CHECK(fixed.records().record_size(0) == 72);
}

TEMPLATE_TEST_CASE("log-int: removing a two-child node moves its successor into its place",
                   "[log-int]", LogIntBaselineLayout, LogIntFixedLayout) {
  two_child_removals_move_the_successor<TestType>();
}

TEMPLATE_TEST_CASE("log-int: ascending inserts build an unbalanced path", "[log-int]",
                   LogIntBaselineLayout, LogIntFixedLayout) {
  ascending_inserts_make_a_path<TestType>();
}

TEMPLATE_TEST_CASE("log-int: lookups never miss keys that removals move", "[log-int]",
                   LogIntBaselineLayout, LogIntFixedLayout) {
  stable_keys_never_missed<TestType>();
}

TEMPLATE_TEST_CASE("log-int: four threads on eight keys", "[log-int]", LogIntBaselineLayout,
                   LogIntFixedLayout) {
  few_keys_many_threads<TestType>();
}
