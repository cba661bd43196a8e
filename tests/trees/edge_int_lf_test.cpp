// edge-int-lf (trees/edge_int_lf.h): a delete stopped after each of its
// phases (a stalled thread) must be finished by whoever meets its flags, and
// every key must keep its value while a complex delete moves it; plus the
// races the generic suite rarely produces: a target and its successor
// deleted at once, lookups of a successor key while it is promoted.
#include "edge_int_lf.h"
#include "epoch.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <map>
#include <thread>
#include <vector>

namespace memlayout::trees {

// Where a probed delete stops.
enum class Stop {
  kInjectFlag,      // the edge into the target flagged, nothing more
  kFrozen,          // the target's edges delete-flagged too
  kSuccessorChosen, // the successor's left edge promote-flagged
  kKeyPromoted,     // the successor's key in the target, not its value
  kValuePromoted,   // key and value in the target, successor still linked
  kSuccessorGone,   // successor unlinked, target not yet replaced
};

// Runs a delete's phases one at a time, as its thread would before stalling.
// Hold an EpochGuard while a probe's state is alive: it points into the tree.
template <class L> struct EdgeIntLfProbe {
  using Tree = EdgeIntLf<L>;
  using State = typename Tree::StateRecord;
  using Mode = typename Tree::Mode;

  static State stall(Tree &t, Key key, Stop stop) {
    State st{};
    st.target_key = st.current_key = key;
    st.mode = Mode::kInjection;
    typename Tree::SeekRecord s;
    t.seek(key, &s);
    REQUIRE(Tree::key_of(s.last.child) == key);
    st.target = s.last;
    st.previous_target = s.previous;
    if (stop == Stop::kInjectFlag) {
      uintptr_t plain = Tree::edge_to(s.last.child);
      REQUIRE(Tree::cas_child(s.last.parent, s.last.which, plain, plain | Tree::kInject));
      return st;
    }
    t.inject(&st);
    REQUIRE(st.mode != Mode::kInjection);
    if (stop == Stop::kFrozen)
      return st;
    REQUIRE(st.mode == Mode::kDiscovery);
    t.find_and_mark_successor(&st);
    if (stop == Stop::kSuccessorChosen)
      return st;
    REQUIRE(t.find_smallest(st.target.child, &st.successor));
    typename Tree::Node *succ = st.successor.last.child;
    t.mark_child_edge(&st, Tree::kRight);
    if (stop == Stop::kKeyPromoted) {
      auto &word = L::key_word(st.target.child);
      uint64_t w = word.load();
      REQUIRE(word.compare_exchange_strong(w, L::marked_word(Tree::key_of(succ))));
      return st;
    }
    t.promote(st.target.child, succ);
    if (stop == Stop::kValuePromoted)
      return st;
    t.remove_successor(&st);
    REQUIRE(st.mode == Mode::kCleanup);
    return st;
  }

  // The stalled thread wakes up, finishes the step it was in, and runs its
  // delete's loop to the end.
  static bool resume(Tree &t, State &st, Stop stop) {
    if (stop == Stop::kInjectFlag) {
      if (!t.mark_child_edge(&st, Tree::kLeft))
        return t.run_delete(&st);
      t.mark_child_edge(&st, Tree::kRight);
      t.initialize_type_and_update_mode(&st);
    }
    if (st.mode == Mode::kDiscovery)
      t.find_and_mark_successor(&st);
    if (st.mode == Mode::kDiscovery)
      t.remove_successor(&st);
    if (st.mode == Mode::kCleanup) {
      if (t.cleanup(&st))
        return true;
      st.current_key = Tree::key_of(st.target.child);
    }
    return t.run_delete(&st);
  }

  static size_t flagged_edges(Tree &t) {
    size_t flagged = 0;
    Tree::walk_nodes(t.t_, [&](const typename Tree::Node *n) {
      for (int which : {Tree::kLeft, Tree::kRight})
        flagged += (n->child[which].load() & (Tree::kInject | Tree::kDelete | Tree::kPromote)) != 0;
    });
    return flagged;
  }
};

} // namespace memlayout::trees

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace {

// 50 has two children; its successor 60 is the left child of 70 and has a
// right child 65.
template <class L> void build(EdgeIntLf<L> &t) {
  for (Key k : {50, 30, 70, 20, 40, 60, 80, 65})
    REQUIRE(t.insert(k, value_of(k)));
}

template <class L> void expect_value(EdgeIntLf<L> &t, Key k) {
  Value v = 0;
  INFO("key " << k);
  REQUIRE(t.lookup(k, &v));
  CHECK(v == value_of(k));
}

template <class L> void stalled_delete_of_two_child_node(Stop stop) {
  using P = EdgeIntLfProbe<L>;
  EdgeIntLf<L> t(AllocPolicy::kMalloc);
  build(t);
  {
    EpochGuard hold; // the stalled state's nodes stay allocated
    auto st = P::stall(t, 50, stop);
    CHECK(P::flagged_edges(t) > 0);
    // Every other key keeps its value, wherever the delete stands.
    for (Key k : {20, 30, 40, 60, 65, 70, 80})
      expect_value(t, k);
    if (stop >= Stop::kKeyPromoted) { // key 50 was overwritten: gone
      Value v = 0;
      CHECK_FALSE(t.lookup(50, &v));
    }
    // Inserts below the successor and beside the target.
    CHECK(t.insert(55, value_of(55)));
    CHECK(t.insert(45, value_of(45)));
    CHECK_FALSE(t.insert(60, 1));
    // The stalled thread resumes: its delete reports success exactly once.
    CHECK(P::resume(t, st, stop));
  }
  CHECK(P::flagged_edges(t) == 0);
  CHECK(t.check_structure() == "");
  Value v = 0;
  CHECK_FALSE(t.lookup(50, &v));
  CHECK_FALSE(t.remove(50));
  for (Key k : {20, 30, 40, 45, 55, 60, 65, 70, 80})
    expect_value(t, k);
}

template <class L> void stalled_delete_is_helped(Stop stop) {
  using P = EdgeIntLfProbe<L>;
  EdgeIntLf<L> t(AllocPolicy::kMalloc);
  build(t);
  {
    EpochGuard hold;
    P::stall(t, 50, stop);
    // A delete of the key now in the target (50, or 60 once promoted) meets
    // the inject flag and finishes the stalled delete first.
    if (stop >= Stop::kKeyPromoted) {
      CHECK(t.remove(60));
    } else {
      CHECK_FALSE(t.remove(50)); // the stalled delete owns 50
      CHECK(t.remove(60));
    }
  }
  CHECK(P::flagged_edges(t) == 0);
  CHECK(t.check_structure() == "");
  CHECK(contents(t) == std::map<Key, Value>{{20, value_of(20)},
                                            {30, value_of(30)},
                                            {40, value_of(40)},
                                            {65, value_of(65)},
                                            {70, value_of(70)},
                                            {80, value_of(80)}});
}

// A leaf's delete stalled with its edges frozen: the insert that wants one
// of those null edges finishes it, then inserts elsewhere.
template <class L> void insert_at_frozen_leaf() {
  using P = EdgeIntLfProbe<L>;
  EdgeIntLf<L> t(AllocPolicy::kMalloc);
  build(t);
  {
    EpochGuard hold;
    P::stall(t, 20, Stop::kFrozen);
    CHECK(t.insert(15, value_of(15)));
    CHECK(P::flagged_edges(t) == 0);
    Value v = 0;
    CHECK_FALSE(t.lookup(20, &v));
  }
  CHECK(t.check_structure() == "");
  expect_value(t, 15);
  CHECK(contents(t).size() == 8);
}

// One thread deletes a node with two children while another looks up its
// successor's key, which moves up during the delete: never missing, never
// another key's value.
template <class L> void successor_lookups_during_complex_deletes() {
  EdgeIntLf<L> t(AllocPolicy::kMalloc);
  constexpr int kRounds = 2000;
  std::barrier sync(2);
  std::atomic<bool> deleting{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    for (int round = 0; round < kRounds; ++round) {
      Key base = 1000 * (round + 1);
      sync.arrive_and_wait();
      do {
        Value v = 0;
        if (!t.lookup(base + 150, &v) || v != value_of(base + 150))
          wrong.fetch_add(1);
        if (t.lookup(base + 100, &v) && v != value_of(base + 100))
          wrong.fetch_add(1);
      } while (deleting.load());
      sync.arrive_and_wait();
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    Key base = 1000 * (round + 1);
    for (Key k : {100, 50, 200, 150, 170})
      t.insert(base + k, value_of(base + k));
    deleting.store(true);
    sync.arrive_and_wait();
    CHECK(t.remove(base + 100));
    deleting.store(false);
    sync.arrive_and_wait();
  }
  reader.join();
  CHECK(wrong.load() == 0);
  CHECK(t.check_structure() == "");
  CHECK(contents(t).size() == 4 * kRounds);
}

// A target and its successor deleted at the same moment: the successor's
// delete meets the promote flag (or the target's delete meets the
// successor's inject flag); both succeed and the rest keeps its values.
template <class L> void target_and_successor_deleted_at_once() {
  EdgeIntLf<L> t(AllocPolicy::kMalloc);
  constexpr int kRounds = 2000;
  auto base_of = [](int round) { return Key{1000} * (round + 1); };
  int failures = failures_of_lockstep_races(
      kRounds,
      [&](int round) {
        for (Key k : {100, 50, 200, 150, 170})
          t.insert(base_of(round) + k, value_of(base_of(round) + k));
      },
      [&](int round, int id) { return t.remove(base_of(round) + (id == 0 ? 100 : 150)); });
  CHECK(failures == 0);
  CHECK(t.check_structure() == "");
  auto got = contents(t);
  CHECK(got.size() == 3 * kRounds);
  for (auto [k, v] : got)
    if (v != value_of(k)) {
      FAIL_CHECK("key " << k << " has value " << v);
      break;
    }
}

template <class L> void one_key_contended() {
  EdgeIntLf<L> t(AllocPolicy::kMalloc);
  for (Key k : {8, 4, 12, 2, 6, 10, 14})
    REQUIRE(t.insert(k, value_of(k)));
  // 8 is in the tree with two children, so its deletes are complex.
  check_one_key_contended(t, 8, value_of(8), true, 3, 20000);
  for (Key k : {2, 4, 6, 10, 12, 14})
    expect_value(t, k);
}

constexpr Stop kAllStops[] = {Stop::kInjectFlag,  Stop::kFrozen,        Stop::kSuccessorChosen,
                              Stop::kKeyPromoted, Stop::kValuePromoted, Stop::kSuccessorGone};
const char *name_of(Stop s) {
  switch (s) {
  case Stop::kInjectFlag:
    return "inject flag";
  case Stop::kFrozen:
    return "frozen";
  case Stop::kSuccessorChosen:
    return "successor chosen";
  case Stop::kKeyPromoted:
    return "key promoted";
  case Stop::kValuePromoted:
    return "value promoted";
  case Stop::kSuccessorGone:
    return "successor gone";
  }
  return "?";
}

} // namespace

TEMPLATE_TEST_CASE("edge-int-lf: a complex delete stalled after any phase; others go on, it "
                   "resumes",
                   "[edge-int-lf]", EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout) {
  for (Stop stop : kAllStops) {
    INFO("stalled after: " << name_of(stop));
    stalled_delete_of_two_child_node<TestType>(stop);
  }
  CHECK(retired_pending() == 0);
}

TEMPLATE_TEST_CASE("edge-int-lf: a complex delete stalled after any phase is finished by helpers",
                   "[edge-int-lf]", EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout) {
  for (Stop stop : kAllStops) {
    INFO("stalled after: " << name_of(stop));
    stalled_delete_is_helped<TestType>(stop);
  }
  CHECK(retired_pending() == 0);
}

TEMPLATE_TEST_CASE("edge-int-lf: an insert at a frozen leaf finishes its delete", "[edge-int-lf]",
                   EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout) {
  insert_at_frozen_leaf<TestType>();
}

TEMPLATE_TEST_CASE("edge-int-lf: lookups of a successor key while it is promoted", "[edge-int-lf]",
                   EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout) {
  successor_lookups_during_complex_deletes<TestType>();
  CHECK(retired_pending() == 0);
}

TEMPLATE_TEST_CASE("edge-int-lf: a target and its successor deleted by two threads at once",
                   "[edge-int-lf]", EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout) {
  target_and_successor_deleted_at_once<TestType>();
  CHECK(retired_pending() == 0);
}

TEMPLATE_TEST_CASE("edge-int-lf: three threads insert and remove one key with two children",
                   "[edge-int-lf]", EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout) {
  one_key_contended<TestType>();
  CHECK(retired_pending() == 0);
}

TEST_CASE("edge-int-lf: record sizes: node 40 / 32 bytes, state record 152", "[edge-int-lf]") {
  CHECK(record_kinds(make_edge_int_lf, Layout::kBaseline) ==
        std::vector<RecordKind>{{"node", 40}, {"state", 152}});
  CHECK(record_kinds(make_edge_int_lf, Layout::kFixed) ==
        std::vector<RecordKind>{{"node", 32}, {"state", 152}});
}
