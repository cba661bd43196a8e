// edge-ext-lf (trees/edge_ext_lf.h): the helping paths of Natarajan and
// Mittal's remove, driven deterministically by stopping removes half way
// (a stalled thread), and the races the generic suite rarely produces:
// sibling leaves removed at once, one key inserted and removed by every
// thread.
#include "edge_ext_lf.h"
#include "epoch.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <map>
#include <vector>

namespace memlayout::trees {

// A remove that stops after its injection (flag) or after also tagging the
// sibling, as a thread preempted for good would.
template <class L> struct EdgeExtLfProbe {
  using Tree = EdgeExtLf<L>;

  static bool flag(Tree &t, Key key) {
    EpochGuard guard;
    auto s = t.seek(key);
    if (s.leaf->key != key)
      return false;
    uintptr_t seen = Tree::edge_to(s.leaf);
    return Tree::edge_of(s.parent, Tree::goes_right(key, s.parent))
        .compare_exchange_strong(seen, seen | Tree::kFlag);
  }

  static bool flag_and_tag(Tree &t, Key key) {
    if (!flag(t, key))
      return false;
    EpochGuard guard;
    auto s = t.seek(key);
    Tree::edge_of(s.parent, !Tree::goes_right(key, s.parent)).fetch_or(Tree::kTag);
    return true;
  }

  // Marked edges reachable from the root.
  static size_t marked_edges(Tree &t) {
    size_t marked = 0;
    Tree::walk_nodes(t.root_, [&](const typename Tree::Node *n) {
      for (bool right : {false, true})
        marked += ((right ? n->right : n->left).load() & Tree::kMarks) != 0;
    });
    return marked;
  }
};

} // namespace memlayout::trees

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace {

template <class L> void stalled_remove_is_helped() {
  using Probe = EdgeExtLfProbe<L>;
  EdgeExtLf<L> t(AllocPolicy::kMalloc);
  for (Key k : {50, 30, 70, 20, 40})
    REQUIRE(t.insert(k, k * 10));

  REQUIRE(Probe::flag(t, 30));
  CHECK(Probe::marked_edges(t) == 1);
  // Not yet unlinked: the stalled remove is linearized at its cleanup.
  Value v = 0;
  CHECK(t.lookup(30, &v));
  CHECK(v == 300);
  CHECK_FALSE(t.insert(30, 1));
  // The key belongs to the stalled remove: this one helps it and finds 30 gone.
  CHECK_FALSE(t.remove(30));
  CHECK_FALSE(t.lookup(30, &v));
  CHECK(Probe::marked_edges(t) == 0);
  CHECK(t.check_structure() == "");
  CHECK(t.insert(30, 31));
  CHECK(contents(t) == std::map<Key, Value>{{20, 200}, {30, 31}, {40, 400}, {50, 500}, {70, 700}});
}

template <class L> void insert_next_to_frozen_parent() {
  using Probe = EdgeExtLfProbe<L>;
  EdgeExtLf<L> t(AllocPolicy::kMalloc);
  for (Key k : {10, 20})
    REQUIRE(t.insert(k, k));
  // Routing node 20 over leaves 10 and 20: remove 10 stalls with leaf 20's
  // edge tagged, so an insert that would replace leaf 20 must help first.
  REQUIRE(Probe::flag_and_tag(t, 10));
  CHECK(Probe::marked_edges(t) == 2);
  CHECK(t.insert(25, 25));
  CHECK(Probe::marked_edges(t) == 0);
  CHECK(t.check_structure() == "");
  CHECK(contents(t) == std::map<Key, Value>{{20, 20}, {25, 25}});
}

template <class L> void one_cleanup_unlinks_a_tagged_chain() {
  using Probe = EdgeExtLfProbe<L>;
  EdgeExtLf<L> t(AllocPolicy::kMalloc);
  // Ascending inserts build routing nodes 20 -> 30 -> 40 -> 50 down the right,
  // each with its smaller leaf on the left.
  for (Key k : {10, 20, 30, 40, 50})
    REQUIRE(t.insert(k, k));
  // Removes of 10 and 20 stall after tagging: the edges 20 -> 30 and 30 -> 40
  // are frozen, so the seek for 30 sees ancestor above 20 and parent 40.
  REQUIRE(Probe::flag_and_tag(t, 10));
  REQUIRE(Probe::flag_and_tag(t, 20));
  CHECK(t.remove(30)); // one CAS unlinks 20, 30, 40 and leaves 10, 20, 30
  CHECK(Probe::marked_edges(t) == 0);
  CHECK(t.check_structure() == "");
  CHECK(contents(t) == std::map<Key, Value>{{40, 40}, {50, 50}});
  CHECK_FALSE(t.remove(10));
  CHECK_FALSE(t.remove(20));
  Value v = 0;
  CHECK(t.lookup(40, &v));
  CHECK(v == 40);
}

// Two threads remove the two leaves of one routing node at the same moment,
// so each flag meets the other's tag or flag (both siblings flagged).
template <class L> void sibling_leaves_removed_at_once() {
  EdgeExtLf<L> t(AllocPolicy::kMalloc);
  auto base_of = [](int round) { return Key{1000} + 4 * round; };
  int failures = failures_of_lockstep_races(
      3000,
      [&](int round) {
        t.insert(base_of(round), base_of(round));
        t.insert(base_of(round) + 1, base_of(round) + 1);
      },
      [&](int round, int id) { return t.remove(base_of(round) + id); });
  CHECK(failures == 0);
  CHECK(t.check_structure() == "");
  CHECK(contents(t).empty());
}

// Every thread inserts and removes the same key: at any moment exactly one
// insert holds it, so successes alternate.
template <class L> void one_key_contended() {
  EdgeExtLf<L> t(AllocPolicy::kMalloc);
  REQUIRE(t.insert(7, 7)); // neighbours, so the key's parent changes too
  REQUIRE(t.insert(9, 9));
  check_one_key_contended(t, 8, 8, false, 3, 20000);
  Value v = 0;
  CHECK(t.lookup(7, &v));
  CHECK(t.lookup(9, &v));
}

} // namespace

TEMPLATE_TEST_CASE("edge-ext-lf: a remove stalled after its flag is finished by the next remove",
                   "[edge-ext-lf]", EdgeExtLfBaselineLayout, EdgeExtLfFixedLayout) {
  stalled_remove_is_helped<TestType>();
}

TEMPLATE_TEST_CASE(
    "edge-ext-lf: an insert at a tagged edge helps the stalled remove, then succeeds",
    "[edge-ext-lf]", EdgeExtLfBaselineLayout, EdgeExtLfFixedLayout) {
  insert_next_to_frozen_parent<TestType>();
}

TEMPLATE_TEST_CASE("edge-ext-lf: one cleanup unlinks a chain of tagged routing nodes",
                   "[edge-ext-lf]", EdgeExtLfBaselineLayout, EdgeExtLfFixedLayout) {
  one_cleanup_unlinks_a_tagged_chain<TestType>();
  CHECK(retired_pending() == 0);
}

TEMPLATE_TEST_CASE("edge-ext-lf: sibling leaves removed by two threads at once", "[edge-ext-lf]",
                   EdgeExtLfBaselineLayout, EdgeExtLfFixedLayout) {
  sibling_leaves_removed_at_once<TestType>();
  CHECK(retired_pending() == 0);
}

TEMPLATE_TEST_CASE("edge-ext-lf: three threads insert and remove one key", "[edge-ext-lf]",
                   EdgeExtLfBaselineLayout, EdgeExtLfFixedLayout) {
  one_key_contended<TestType>();
  CHECK(retired_pending() == 0);
}

TEST_CASE("edge-ext-lf: record sizes and the one record kind", "[edge-ext-lf]") {
  CHECK(record_kinds(make_edge_ext_lf, Layout::kBaseline) == std::vector<RecordKind>{{"node", 64}});
  CHECK(record_kinds(make_edge_ext_lf, Layout::kFixed) == std::vector<RecordKind>{{"node", 32}});
}
