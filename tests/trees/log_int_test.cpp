// log-int's own cases (trees/log_int.h): record layouts, the successor moved
// into a removed two-child node's place (check_structure compares the tree's
// in-order with the pred/succ list and checks parent pointers), the
// unbalanced shape of ascending inserts, lookups that never miss a key while
// removals move nodes around it, and a few keys fought over by every thread.
#include "log_int.h"

#include "tree_factories.h"
#include "tree_test_support.h"
#include <memlayout/seg.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace memlayout::trees {

// Runs a removal in two steps, as a remover preempted between them does.
template <class L> struct LogIntProbe {
  using Tree = LogInt<L>;
  using Node = typename Tree::Node;

  // Quiescent: every node on the list, sentinels included.
  template <class F> static void for_each_node(const Tree &t, F f) {
    for (const Node *n = t.min_; n; n = Tree::succ_of(n))
      f(n);
  }
  // The list half of remove(key): marked and off the list, still in the tree.
  static Node *remove_from_list_only(Tree &t, Key key) {
    Node *s = t.search(key);
    REQUIRE(s->key == key);
    Tree::unlink_from_list(s->pred.load(), s);
    return s;
  }
  // The tree half, then the node is retired as remove() retires it.
  static void finish_removal(Tree &t, Node *s) {
    EpochGuard guard;
    bool two_children = t.acquire_tree_locks(s);
    t.lock_parent(s);
    t.remove_from_tree(s, two_children);
    t.retire_node(s, /*one_more_epoch=*/true);
  }
  // Where a search for key ends: the node insert, remove and lookup start from.
  static Node *search(Tree &t, Key key) { return t.search(key); }
};

} // namespace memlayout::trees

namespace {

// Fix 1 of log_int.cpp: 20 is removed from the list but still in the tree
// (its remover preempted) when 20 is inserted again; a lookup of 20, whose
// search stops at the old node, must find the new one.
template <class L> void lookup_finds_a_key_reinserted_while_its_old_node_is_in_the_tree() {
  using Probe = LogIntProbe<L>;
  LogInt<L> tree(AllocPolicy::kMalloc);
  fill(tree, {20, 10, 30});
  auto *old20 = Probe::remove_from_list_only(tree, 20);
  Value v = 0;
  CHECK_FALSE(tree.lookup(20, &v)); // removed: its node is marked
  REQUIRE(tree.insert(20, 77));
  CHECK(tree.lookup(20, &v));
  CHECK(v == 77);
  CHECK(tree.lookup(10, &v));
  CHECK(tree.lookup(30, &v));
  CHECK_FALSE(tree.lookup(15, &v));
  CHECK_FALSE(tree.lookup(25, &v));
  Probe::finish_removal(tree, old20);
  CHECK(tree.lookup(20, &v));
  CHECK(v == 77);
  CHECK(contents(tree) == std::map<Key, Value>{{10, value_of(10)}, {20, 77}, {30, value_of(30)}});
  CHECK(tree.check_structure() == "");
}

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
  // root sentinel's left edge): a path of kCount nodes.
  CHECK(tree.height() == static_cast<size_t>(kCount));
  CHECK(tree.check_structure() == "");
  for (Key k = 1; k <= kCount; k += 2)
    REQUIRE(tree.remove(k));
  CHECK(tree.height() == static_cast<size_t>(kCount / 2));
  CHECK(tree.check_structure() == "");
}

// Keys divisible by 4 are inserted first and never removed; writers insert
// and remove the others, so stable keys are moved up as successors of
// removed two-child nodes. Lookups that lose their way in the tree must
// still find them through the list.
template <class L> void stable_keys_never_missed() {
  LogInt<L> tree(AllocPolicy::kMalloc);
  check_stable_keys_never_missed(tree, 2048, 150'000, 9);
}

// Fix 2 of log_int.cpp: 20 is off the list and still in the tree, its
// remover inside its operation; 10, 20's frozen pred, is removed and
// retired; a thread enters, finds 20 in the tree and may follow 20.pred to
// 10. However far the others move the epoch meanwhile, 10 must not be freed
// while that thread is inside.
template <class L> void a_removed_nodes_pred_outlives_its_readers() {
  using Probe = LogIntProbe<L>;
  using Node = typename LogInt<L>::Node;
  LogInt<L> tree(AllocPolicy::kMalloc);
  fill(tree, {10, 20, 30}); // a path: 10's removal hoists 20, whose removal waits
  reclaim_all();
  REQUIRE(retired_pending() == 0);
  std::atomic<int> step{0};
  auto wait_for = [&](int s) {
    while (step.load() < s)
      std::this_thread::yield();
  };
  // Guard exits of this thread, enough for a periodic advance of the epoch.
  auto move_epoch = [&] {
    Value v;
    for (int i = 0; i < 600; ++i)
      tree.lookup(30, &v);
  };
  std::thread remover([&] {
    EpochGuard operation;
    Node *x = Probe::remove_from_list_only(tree, 20);
    step = 1;
    wait_for(3); // preempted until a reader has found x in the tree
    Probe::finish_removal(tree, x);
    step = 4;
  });
  Node *seen_pred = nullptr;
  std::thread reader([&] {
    wait_for(2);
    EpochGuard operation;
    Node *x = Probe::search(tree, 20);
    REQUIRE(x->key == 20);
    REQUIRE(x->mark.load());
    step = 3;
    wait_for(5);
    seen_pred = x->pred.load(); // 10's node: must still be allocated
    CHECK(seen_pred->key == 10);
  });
  wait_for(1);
  REQUIRE(tree.remove(10)); // retired while 20's remover is inside
  move_epoch();             // one epoch on: the remover announced the current one
  step = 2;
  wait_for(4);
  move_epoch(); // the reader announced the current one: one more
  // 20's node and 10's are retired; the reader can still reach both.
  CHECK(retired_pending() == 2);
  step = 5;
  reader.join();
  remover.join();
  CHECK(tree.check_structure() == "");
  CHECK(contents(tree) == std::map<Key, Value>{{30, value_of(30)}});
}

} // namespace

TEMPLATE_TEST_CASE("log-int: a removed node's pred is not freed under a reader that reached it",
                   "[log-int]", LogIntBaselineLayout, LogIntFixedLayout) {
  a_removed_nodes_pred_outlives_its_readers<TestType>();
}

TEMPLATE_TEST_CASE(
    "log-int: a lookup finds a key re-inserted while its removed node is in the tree", "[log-int]",
    LogIntBaselineLayout, LogIntFixedLayout) {
  lookup_finds_a_key_reinserted_while_its_old_node_is_in_the_tree<TestType>();
}

TEST_CASE("log-int: record sizes of the two layouts", "[log-int]") {
  CHECK(record_kinds(make_log_int, Layout::kBaseline) == std::vector<RecordKind>{{"node", 128}});
  CHECK(record_kinds(make_log_int, Layout::kFixed) == std::vector<RecordKind>{{"node", 64}});
}

// In a pool the fixed layout's 64-byte nodes are each a line of their own:
// a lookup reads one line per node, its list links and mark included (at 72
// bytes, in the 80-byte class, one node in four had its search fields across
// a line, every other one its links and mark on a second).
TEST_CASE("log-int: the fixed layout's nodes each sit on one line of their own", "[log-int]") {
  LogInt<LogIntFixedLayout> t(AllocPolicy::kSegregated);
  seg_pool *pool = seg_pool_create("log-int.node", nullptr); // the tree's, by its name
  REQUIRE(pool);
  for (Key k = 1; k <= 2000; ++k)
    REQUIRE(t.insert(k * 7919 % 4001 + 1, k));
  struct seg_pool_stats st {};
  REQUIRE(seg_pool_stats(pool, &st) == 0);
  const uint64_t live = st.allocations - st.frees;
  CHECK(live >= 2000);
  CHECK(st.allocated_bytes == live * 64);
  // Every node the walk reaches starts a line.
  size_t misaligned = 0;
  size_t nodes = 0;
  LogIntProbe<LogIntFixedLayout>::for_each_node(t, [&](const void *n) {
    ++nodes;
    misaligned += reinterpret_cast<uintptr_t>(n) % 64 != 0;
  });
  CHECK(nodes == 2002);
  CHECK(misaligned == 0);
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

// Four threads on eight keys: neighbours on the list are inserted and
// removed at once, so succLocks, tree locks and choose_parent all contend.
TEMPLATE_TEST_CASE("log-int: four threads on eight keys", "[log-int]", LogIntBaselineLayout,
                   LogIntFixedLayout) {
  LogInt<TestType> tree(AllocPolicy::kMalloc);
  check_per_key_accounting(tree, 8, 4, 100'000);
}
