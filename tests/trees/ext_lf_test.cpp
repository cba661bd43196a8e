// ext-lf (trees/ext_lf.h): the helping paths of Ellen et al.'s tree driven
// deterministically by stopping operations half way (an insert after its
// IFLAG, a remove after its DFLAG or its MARK), the back-out of a remove
// whose parent changed, removes that lift a whole subtree, contention on a
// few keys, and the record counts: three nodes and one info record per
// insert, one info record per remove, all of it reclaimed.
#include "epoch.h"
#include "ext_lf.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace memlayout::trees {

template <class L> struct ExtLfProbe {
  using Tree = ExtLf<L>;
  using Node = typename Tree::Node;
  using Info = typename Tree::Info;
  using SearchResult = typename Tree::SearchResult;

  static uintptr_t flagged(const Info *op, uintptr_t state) {
    return reinterpret_cast<uintptr_t>(op) | state;
  }

  // An insert preempted right after flagging the parent IFLAG.
  static Info *stall_insert(Tree &t, Key key, Value value) {
    EpochGuard guard;
    SearchResult s;
    t.search(key, s);
    REQUIRE(s.l->key != key);
    REQUIRE((s.pupdate & ext_lf::kStateMask) == ext_lf::kClean);
    Node *leaf = t.new_node(key, value, nullptr, nullptr);
    Node *sibling = t.new_node(s.l->key, s.l->value, nullptr, nullptr);
    Node *internal =
        key < s.l->key ? t.new_node(s.l->key, 0, leaf, sibling) : t.new_node(key, 0, sibling, leaf);
    Info *op = t.new_info();
    op->p = s.p;
    op->l = s.l;
    op->new_internal = internal;
    uintptr_t expected = s.pupdate;
    REQUIRE(s.p->update.compare_exchange_strong(expected, flagged(op, ext_lf::kIFlag)));
    t.retire_replaced_info(s.pupdate);
    return op;
  }

  // A remove preempted right after flagging the grandparent DFLAG, or also
  // after marking the parent.
  static Info *stall_remove(Tree &t, Key key, bool mark) {
    EpochGuard guard;
    SearchResult s;
    t.search(key, s);
    REQUIRE(s.l->key == key);
    REQUIRE((s.gpupdate & ext_lf::kStateMask) == ext_lf::kClean);
    REQUIRE((s.pupdate & ext_lf::kStateMask) == ext_lf::kClean);
    Info *op = t.new_info();
    op->gp = s.gp;
    op->p = s.p;
    op->l = s.l;
    op->pupdate = s.pupdate;
    uintptr_t expected = s.gpupdate;
    REQUIRE(s.gp->update.compare_exchange_strong(expected, flagged(op, ext_lf::kDFlag)));
    t.retire_replaced_info(s.gpupdate);
    if (mark) {
      expected = s.pupdate;
      REQUIRE(s.p->update.compare_exchange_strong(expected, flagged(op, ext_lf::kMark)));
      t.retire_replaced_info(s.pupdate);
    }
    return op;
  }

  // What the preempted remove does when it runs again: true if it took effect.
  static bool resume_remove(Tree &t, Info *op) {
    EpochGuard guard;
    return t.help_delete(op);
  }
};

} // namespace memlayout::trees

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace {

// 50 then 30: leaf 30's parent is the routing node 50 (children 30, 50),
// its grandparent the routing node kMaxKey + 1.
template <class L> void stalled_insert_is_completed() {
  using Probe = ExtLfProbe<L>;
  ExtLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30});
  Probe::stall_insert(t, 40, value_of(40));
  Value v = 0;
  CHECK_FALSE(t.lookup(40, &v)); // takes effect at the child CAS, not yet done
  CHECK(t.check_structure() != "");
  // The next insert of 40 meets the IFLAG, completes the stalled insert,
  // then finds 40 present.
  CHECK_FALSE(t.insert(40, 0));
  REQUIRE(t.lookup(40, &v));
  CHECK(v == value_of(40));
  CHECK(contents(t) == expected_of({30, 40, 50}));
  CHECK(t.check_structure() == "");
}

template <class L> void stalled_remove_is_completed(bool marked) {
  using Probe = ExtLfProbe<L>;
  ExtLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30});
  EpochGuard owner; // the preempted remove's epoch, held until it resumes
  auto *op = Probe::stall_remove(t, 30, marked);
  Value v = 0;
  CHECK(t.lookup(30, &v)); // a remove takes effect at its child CAS, not yet done
  // Removing the sibling 50 meets the DFLAG on its grandparent (or the MARK
  // on its parent), finishes the remove of 30, then removes 50.
  CHECK(t.remove(50));
  CHECK_FALSE(t.lookup(30, &v));
  CHECK(Probe::resume_remove(t, op)); // the owner learns its remove succeeded
  CHECK(contents(t).empty());
  CHECK(t.check_structure() == "");
}

template <class L> void remove_backs_out_when_parent_changed() {
  using Probe = ExtLfProbe<L>;
  ExtLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30});
  EpochGuard owner;
  auto *op = Probe::stall_remove(t, 30, false);
  // 55 goes under 30's parent (next to leaf 50): the parent's update word
  // changes, so the stalled remove can no longer mark it.
  CHECK(t.insert(55, value_of(55)));
  CHECK_FALSE(Probe::resume_remove(t, op)); // backs out: DFLAG cleared
  CHECK(t.check_structure() == "");
  CHECK(contents(t) == expected_of({30, 50, 55}));
  CHECK(t.remove(30)); // a fresh attempt succeeds
  CHECK(contents(t) == expected_of({50, 55}));
  CHECK(t.check_structure() == "");
}

template <class L> void remove_decided_by_others_is_reported() {
  using Probe = ExtLfProbe<L>;
  ExtLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30});
  EpochGuard owner;
  auto *op = Probe::stall_remove(t, 30, false);
  CHECK_FALSE(t.remove(30)); // helps the stalled remove through, then misses
  CHECK(Probe::resume_remove(t, op));
  CHECK(contents(t) == expected_of({50}));
  CHECK(t.check_structure() == "");
}

TEST_CASE("ext-lf: an insert stalled after its IFLAG is completed by the next insert", "[ext-lf]") {
  stalled_insert_is_completed<ExtLfBaselineLayout>();
  stalled_insert_is_completed<ExtLfFixedLayout>();
}

TEST_CASE("ext-lf: a remove stalled after its DFLAG or its MARK is completed by others",
          "[ext-lf]") {
  for (bool marked : {false, true}) {
    INFO("stalled after the " << (marked ? "MARK" : "DFLAG"));
    stalled_remove_is_completed<ExtLfBaselineLayout>(marked);
    stalled_remove_is_completed<ExtLfFixedLayout>(marked);
  }
}

TEST_CASE("ext-lf: a stalled remove whose parent changed backs out", "[ext-lf]") {
  remove_backs_out_when_parent_changed<ExtLfBaselineLayout>();
  remove_backs_out_when_parent_changed<ExtLfFixedLayout>();
}

TEST_CASE("ext-lf: a stalled remove completed by others reports success when it resumes",
          "[ext-lf]") {
  remove_decided_by_others_is_reported<ExtLfBaselineLayout>();
  remove_decided_by_others_is_reported<ExtLfFixedLayout>();
}

template <class L> void removes_lift_subtrees() {
  ExtLf<L> t(AllocPolicy::kMalloc);
  // Ascending inserts hang each new leaf at the far right: removing the
  // smallest key lifts its sibling, the whole rest of the tree, one level.
  for (Key k = 10; k <= 100; k += 10)
    REQUIRE(t.insert(k, value_of(k)));
  for (Key k = 10; k <= 100; k += 10) {
    REQUIRE(t.remove(k));
    REQUIRE(t.check_structure() == "");
    for (Key rest = k + 10; rest <= 100; rest += 10) {
      Value v = 0;
      REQUIRE(t.lookup(rest, &v));
      REQUIRE(v == value_of(rest));
    }
  }
  CHECK(contents(t).empty());
  // Keys at both ends of the user range, next to the sentinels.
  for (Key k : {kMaxKey, kMinKey, kMaxKey - 1})
    REQUIRE(t.insert(k, value_of(k)));
  CHECK(contents(t) == expected_of({kMinKey, kMaxKey - 1, kMaxKey}));
  CHECK(t.remove(kMaxKey));
  CHECK(t.check_structure() == "");
}

TEST_CASE("ext-lf: removes lift sibling subtrees; keys next to the sentinels", "[ext-lf]") {
  removes_lift_subtrees<ExtLfBaselineLayout>();
  removes_lift_subtrees<ExtLfFixedLayout>();
}

TEST_CASE("ext-lf: record sizes of both layouts", "[ext-lf]") {
  CHECK(record_kinds(make_ext_lf, Layout::kBaseline) ==
        std::vector<RecordKind>{{"node", 64}, {"info", 64}});
  CHECK(record_kinds(make_ext_lf, Layout::kFixed) ==
        std::vector<RecordKind>{{"node", 40}, {"info", 32}});
}

template <class L> void allocation_counts() {
  PoolCount nodes("ext-lf.node"), infos("ext-lf.info");
  std::vector<Key> keys(2000);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = static_cast<Key>(i) * 5 + 2;
  std::mt19937_64 rng(5);
  std::shuffle(keys.begin(), keys.end(), rng);
  {
    ExtLf<L> t(AllocPolicy::kSegregated);
    nodes.refresh();
    infos.refresh();
    uint64_t n0 = nodes.allocations, i0 = infos.allocations;
    uint64_t live_nodes0 = n0 - nodes.frees, live_infos0 = i0 - infos.frees;
    for (Key k : keys)
      REQUIRE(t.insert(k, value_of(k)));
    for (Key k : keys)
      REQUIRE_FALSE(t.insert(k, 0)); // a failed insert allocates nothing
    nodes.refresh();
    infos.refresh();
    CHECK(nodes.allocations - n0 == 3 * keys.size()); // leaf, copy of the sibling, routing node
    CHECK(infos.allocations - i0 == keys.size());

    std::shuffle(keys.begin(), keys.end(), rng);
    for (Key k : keys)
      REQUIRE(t.remove(k));
    nodes.refresh();
    infos.refresh();
    CHECK(nodes.allocations - n0 == 3 * keys.size()); // removes allocate no node
    CHECK(infos.allocations - i0 == 2 * keys.size());
    // The tree is empty again: replaced leaves, unlinked nodes and replaced
    // info records are free, but for the last epochs'.
    CHECK(nodes.allocations - nodes.frees < live_nodes0 + limbo_bound());
    CHECK(infos.allocations - infos.frees < live_infos0 + limbo_bound());
    CHECK(contents(t).empty());
    CHECK(t.check_structure() == "");
  }
  for (PoolCount *p : {&nodes, &infos}) {
    p->refresh();
    CHECK(p->allocations == p->frees);
  }
}

TEST_CASE("ext-lf: three nodes and one info record per insert, all reclaimed", "[ext-lf]") {
  allocation_counts<ExtLfBaselineLayout>();
  allocation_counts<ExtLfFixedLayout>();
}

// Four threads on four keys next to four keys nobody touches: every update
// races with another on the same key or its sibling leaf, so most operations
// help or back out; the untouched keys must never be missed.
template <class L> void four_keys_under_contention() {
  constexpr Key kContended[] = {21, 22, 41, 42};
  constexpr Key kStable[] = {20, 23, 40, 43};
  ExtLf<L> t(AllocPolicy::kMalloc);
  fill(t, {20, 23, 40, 43});
  check_contended_keys_next_to_stable_ones(t, kContended, kStable, false, 50);
}

TEST_CASE("ext-lf: four threads on four keys, per-key accounting", "[ext-lf]") {
  four_keys_under_contention<ExtLfBaselineLayout>();
  four_keys_under_contention<ExtLfFixedLayout>();
}

TEST_CASE("ext-lf: nodes and info records are reclaimed while the tree runs", "[ext-lf]") {
  PoolCount nodes("ext-lf.node"), infos("ext-lf.info");
  ExtLf<ExtLfFixedLayout> t(AllocPolicy::kSegregated);
  churn_sixteen_keys(t, 2000);
  nodes.refresh();
  infos.refresh();
  // 64 000 records replaced or unlinked; only the last few epochs' may wait.
  CHECK(nodes.allocations - nodes.frees < limbo_bound());
  CHECK(infos.allocations - infos.frees < limbo_bound());
  CHECK(t.check_structure() == "");
}

} // namespace
