// int-lf (trees/int_lf.h): the cases the generic suite reaches only by luck.
// Operations stopped half way (a thread preempted for good after flagging a
// successor RELOCATE, or after marking a node) must be completed or undone by
// whoever comes next, including when the relocation's destination changed or
// was unlinked meanwhile; relocation must move the value with the key and
// never hide the moved key from a concurrent lookup; each insert allocates
// one node and one descriptor, descriptors live until the tree dies, nodes
// are reclaimed while it runs.
#include "epoch.h"
#include "int_lf.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace memlayout::trees {

template <class L> struct IntLfProbe {
  using Tree = IntLf<L>;
  using Node = typename Tree::Node;
  using RelocateOp = typename Tree::RelocateOp;
  using Found = typename Tree::Found;
  using Position = typename Tree::Position;

  // A remove of a node with two children, preempted right after flagging
  // the successor RELOCATE: the destination is not flagged yet.
  static RelocateOp *stall_relocate(Tree &t, Key key) {
    EpochGuard guard;
    Position pos, succ;
    REQUIRE(t.find(key, pos, t.root_) == Found::kFound);
    Node *dest = pos.curr;
    REQUIRE_FALSE(dest->left.load() & int_lf::kNull); // two children
    REQUIRE_FALSE(dest->right.load() & int_lf::kNull);
    REQUIRE(t.find(key, succ, dest) == Found::kNotFoundLeft);
    RelocateOp *op = t.new_relocate_descriptor();
    op->state.store(int_lf::kOngoing);
    op->dest = dest;
    op->dest_op = pos.curr_op;
    op->remove = int_lf::KeyValue{key, pos.value};
    op->replace = succ.curr->kv;
    uintptr_t expected = succ.curr_op;
    REQUIRE(succ.curr->op.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(op) |
                                                                int_lf::kOpRelocate));
    t.descriptors_.add(t.relocate_kind_, op);
    return op;
  }

  // A remove of a node with at most one child, preempted right after its mark.
  static void stall_mark(Tree &t, Key key) {
    EpochGuard guard;
    Position pos;
    REQUIRE(t.find(key, pos, t.root_) == Found::kFound);
    uintptr_t expected = pos.curr_op;
    REQUIRE(pos.curr->op.compare_exchange_strong(expected, (pos.curr_op & ~int_lf::kOpStateMask) |
                                                               int_lf::kOpMark));
  }

  static int state(const RelocateOp *op) { return op->state.load(); }
  static size_t descriptors(const Tree &t) { return t.descriptors_.size(); }
};

} // namespace memlayout::trees

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace {

template <class L> void stalled_relocation_is_completed() {
  using Probe = IntLfProbe<L>;
  IntLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30, 70, 60, 80, 65});
  auto *op = Probe::stall_relocate(t, 50); // successor: 60
  CHECK(Probe::state(op) == int_lf::kOngoing);

  // The lookup meets 60 flagged, having turned right at 50 last: it flags
  // 50, copies 60 (key and value) into it and unlinks 60's old node.
  Value v = 0;
  REQUIRE(t.lookup(60, &v));
  CHECK(v == value_of(60));
  CHECK(Probe::state(op) == int_lf::kSuccessful);
  CHECK_FALSE(t.lookup(50, &v));
  CHECK(contents(t) == expected_of({30, 60, 65, 70, 80}));
  CHECK(t.check_structure() == "");
  CHECK_FALSE(t.remove(50));
  CHECK(t.remove(60)); // now in the old root's node, with two children
  CHECK(contents(t) == expected_of({30, 65, 70, 80}));
  CHECK(t.check_structure() == "");
}

template <class L> void relocation_fails_when_destination_changed() {
  using Probe = IntLfProbe<L>;
  IntLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30, 70, 60, 80});
  auto *op = Probe::stall_relocate(t, 50);
  REQUIRE(t.remove(30)); // unlinking 30 changes 50's op word
  Value v = 0;
  REQUIRE(t.lookup(60, &v)); // meets 60 flagged: 50 can no longer be flagged
  CHECK(v == value_of(60));
  CHECK(Probe::state(op) == int_lf::kFailed);
  CHECK(t.check_structure() == ""); // 60 was released
  CHECK(t.remove(50));              // one child now: a plain unlink
  CHECK(contents(t) == expected_of({60, 70, 80}));
  CHECK(t.check_structure() == "");
}

template <class L> void relocation_fails_when_destination_unlinked() {
  using Probe = IntLfProbe<L>;
  IntLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30, 70, 60, 80});
  auto *op = Probe::stall_relocate(t, 50);
  REQUIRE(t.remove(30));
  REQUIRE(t.remove(50)); // 50 is marked and unlinked: 60's relocation is doomed
  reclaim_all();         // 50's node is freed (no operation is running)
  REQUIRE(t.insert(90, value_of(90)));
  // A search to 60 no longer passes through 50: it decides FAILED without
  // touching the freed destination, and releases 60.
  Value v = 0;
  REQUIRE(t.lookup(60, &v));
  CHECK(v == value_of(60));
  CHECK(Probe::state(op) == int_lf::kFailed);
  CHECK(contents(t) == expected_of({60, 70, 80, 90}));
  CHECK(t.check_structure() == "");
}

template <class L> void stalled_mark_is_unlinked_by_next_visitor() {
  using Probe = IntLfProbe<L>;
  IntLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 30, 70, 20});
  Probe::stall_mark(t, 30); // one child: 20
  CHECK(t.check_structure() != "");
  Value v = 0;
  CHECK_FALSE(t.lookup(30, &v)); // helps the unlink on the way
  CHECK(t.lookup(20, &v));
  CHECK(t.check_structure() == "");
  CHECK(contents(t) == expected_of({20, 50, 70}));

  Probe::stall_mark(t, 70); // a leaf
  CHECK(t.insert(70, value_of(70)));
  CHECK(contents(t) == expected_of({20, 50, 70}));
  CHECK(t.check_structure() == "");
}

template <class L> void two_child_removes_move_values() {
  IntLf<L> t(AllocPolicy::kMalloc);
  // 50 over 30 and 80; 80's left subtree has a long left spine ending in 55,
  // whose right child 57 takes 55's place when 55 moves up.
  fill(t, {50, 30, 80, 20, 40, 70, 90, 60, 55, 57, 65});
  Value v = 0;
  REQUIRE(t.remove(50)); // successor 55, four levels down
  CHECK_FALSE(t.lookup(50, &v));
  REQUIRE(t.lookup(55, &v));
  CHECK(v == value_of(55));
  REQUIRE(t.lookup(57, &v));
  CHECK(v == value_of(57));
  CHECK(t.check_structure() == "");
  REQUIRE(t.remove(30)); // successor 40, a leaf right child
  REQUIRE(t.remove(55)); // the relocated key, relocated again: successor 57
  REQUIRE(t.lookup(57, &v));
  CHECK(v == value_of(57));
  CHECK(contents(t) == expected_of({20, 40, 57, 60, 65, 70, 80, 90}));
  CHECK(t.check_structure() == "");
}

TEST_CASE("int-lf: a relocation stalled after flagging the successor is completed by a lookup",
          "[int-lf]") {
  stalled_relocation_is_completed<IntLfBaselineLayout>();
  stalled_relocation_is_completed<IntLfFixedLayout>();
}

TEST_CASE("int-lf: a stalled relocation fails when its destination changed meanwhile", "[int-lf]") {
  relocation_fails_when_destination_changed<IntLfBaselineLayout>();
  relocation_fails_when_destination_changed<IntLfFixedLayout>();
}

TEST_CASE("int-lf: a stalled relocation whose destination was unlinked fails without it",
          "[int-lf]") {
  relocation_fails_when_destination_unlinked<IntLfBaselineLayout>();
  relocation_fails_when_destination_unlinked<IntLfFixedLayout>();
}

TEST_CASE("int-lf: a node marked by a stalled remove is unlinked by the next visitor", "[int-lf]") {
  stalled_mark_is_unlinked_by_next_visitor<IntLfBaselineLayout>();
  stalled_mark_is_unlinked_by_next_visitor<IntLfFixedLayout>();
}

TEST_CASE("int-lf: removing nodes with two children moves the successor's key and value",
          "[int-lf]") {
  two_child_removes_move_values<IntLfBaselineLayout>();
  two_child_removes_move_values<IntLfFixedLayout>();
}

TEST_CASE("int-lf: record sizes of both layouts", "[int-lf]") {
  CHECK(record_kinds(make_int_lf, Layout::kBaseline) ==
        std::vector<RecordKind>{{"node", 64}, {"descriptor", 64}, {"relocate_descriptor", 64}});
  CHECK(record_kinds(make_int_lf, Layout::kFixed) ==
        std::vector<RecordKind>{{"node", 40}, {"descriptor", 24}, {"relocate_descriptor", 56}});
}

template <class L> void allocation_counts() {
  PoolCount nodes("int-lf.node"), descriptors("int-lf.descriptor"),
      relocations("int-lf.relocate_descriptor");
  std::vector<Key> keys(2000);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = static_cast<Key>(i) * 3 + 1;
  std::mt19937_64 rng(11);
  std::shuffle(keys.begin(), keys.end(), rng);
  {
    IntLf<L> t(AllocPolicy::kSegregated);
    nodes.refresh();
    descriptors.refresh();
    uint64_t n0 = nodes.allocations, d0 = descriptors.allocations;
    for (Key k : keys)
      REQUIRE(t.insert(k, value_of(k)));
    for (Key k : keys)
      REQUIRE_FALSE(t.insert(k, 0)); // a failed insert allocates nothing
    nodes.refresh();
    descriptors.refresh();
    CHECK(nodes.allocations - n0 == keys.size());
    CHECK(descriptors.allocations - d0 == keys.size());

    // Removes: one unlink descriptor each (and a relocation descriptor for
    // two children), none freed while the tree lives; the nodes go back
    // through the epochs.
    uint64_t f0 = descriptors.frees, nf0 = nodes.frees;
    std::shuffle(keys.begin(), keys.end(), rng);
    for (Key k : keys)
      REQUIRE(t.remove(k));
    descriptors.refresh();
    nodes.refresh();
    relocations.refresh();
    CHECK(descriptors.allocations - d0 == 2 * keys.size());
    CHECK(descriptors.frees == f0);
    CHECK(IntLfProbe<L>::descriptors(t) ==
          2 * keys.size() + (relocations.allocations - relocations.frees));
    // Most removed nodes are free again: only the last epochs' may wait.
    CHECK(nodes.frees - nf0 + 500 >= keys.size());
  }
  // The tree frees everything it allocated.
  for (PoolCount *p : {&nodes, &descriptors, &relocations}) {
    p->refresh();
    CHECK(p->allocations == p->frees);
  }
}

TEST_CASE("int-lf: one node and one descriptor per insert; descriptors die with the tree",
          "[int-lf]") {
  allocation_counts<IntLfBaselineLayout>();
  allocation_counts<IntLfFixedLayout>();
}

// Cells of keys 8c+1 .. 8c+6, built so that 8c+2 has children 8c+1 and
// 8c+4, and 8c+4 has the right child 8c+6. Removing 8c+2 relocates 8c+4 into
// 8c+2's node; 8c+4 and 8c+6 stay in the map throughout, and lookups of them
// must never miss while the removes (and removes of 8c+1, which make some
// removes of 8c+2 plain unlinks, racing with relocations) go on.
template <class L> void relocated_keys_stay_visible() {
  constexpr int kCells = 1024;
  constexpr int kRounds = 4;
  std::mt19937_64 rng(3);
  for (int round = 0; round < kRounds; ++round) {
    IntLf<L> t(AllocPolicy::kMalloc);
    // Cells inserted in a balanced order so the tree stays shallow.
    std::vector<int> order;
    std::vector<std::pair<int, int>> ranges{{0, kCells}};
    while (!ranges.empty()) {
      auto [lo, hi] = ranges.front();
      ranges.erase(ranges.begin());
      if (lo >= hi)
        continue;
      int mid = (lo + hi) / 2;
      order.push_back(mid);
      ranges.push_back({lo, mid});
      ranges.push_back({mid + 1, hi});
    }
    for (int c : order)
      for (Key k : {2, 1, 4, 6})
        REQUIRE(t.insert(8 * c + k, value_of(8 * c + k)));

    std::vector<Key> twos, ones;
    for (int c = 0; c < kCells; ++c) {
      twos.push_back(8 * c + 2);
      ones.push_back(8 * c + 1);
    }
    std::shuffle(twos.begin(), twos.end(), rng);
    std::shuffle(ones.begin(), ones.end(), rng);
    std::atomic<int> removers_left{2};
    std::atomic<Key> target{twos.front()}; // the cell being relocated now
    std::atomic<uint64_t> misses{0}, lookups{0};
    std::atomic<int> removed{0};
    std::barrier start(4);
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (Key k : twos) {
        target.store(k); // lookups follow the relocations
        removed += t.remove(k);
      }
      --removers_left;
    });
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (Key k : ones)
        removed += t.remove(k);
      for (Key k : twos) // the same keys as the other remover: one of the two wins
        removed += t.remove(k);
      --removers_left;
    });
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&] {
        start.arrive_and_wait();
        uint64_t n = 0, missed = 0;
        while (removers_left.load() > 0) {
          // The key moving up (8c+4) and the one moving into its place (8c+6).
          Key k = target.load() + (n % 2 ? 2 : 4);
          Value v = 0;
          if (!t.lookup(k, &v) || v != value_of(k))
            ++missed;
          ++n;
        }
        misses += missed;
        lookups += n;
      });
    for (auto &th : threads)
      th.join();
    INFO("round " << round << ", " << lookups.load() << " lookups");
    CHECK(misses.load() == 0);
    CHECK(removed.load() == 2 * kCells);
    std::map<Key, Value> want;
    for (int c = 0; c < kCells; ++c)
      for (Key k : {4, 6})
        want.emplace(8 * c + k, value_of(8 * c + k));
    CHECK(contents(t) == want);
    CHECK(t.check_structure() == "");
  }
}

TEST_CASE("int-lf: relocated keys never disappear from concurrent lookups", "[int-lf]") {
  relocated_keys_stay_visible<IntLfBaselineLayout>();
  relocated_keys_stay_visible<IntLfFixedLayout>();
}

// Four threads on four keys: every update races with another on the same
// key, so most operations help someone. The contended keys start above the
// stable ones, so their first removes relocate (stable) successors. Per-key
// accounting as in the generic suite; stable keys must never be missed.
template <class L> void four_keys_under_contention() {
  constexpr Key kContended[] = {25, 50, 60, 75};
  constexpr Key kStable[] = {20, 30, 70, 80};
  IntLf<L> t(AllocPolicy::kMalloc);
  fill(t, {50, 25, 75, 20, 30, 70, 80, 60});
  check_contended_keys_next_to_stable_ones(t, kContended, kStable, true, 0);
}

TEST_CASE("int-lf: four threads on four keys, per-key accounting", "[int-lf]") {
  four_keys_under_contention<IntLfBaselineLayout>();
  four_keys_under_contention<IntLfFixedLayout>();
}

TEST_CASE("int-lf: removed nodes are reclaimed while the tree runs", "[int-lf]") {
  PoolCount nodes("int-lf.node");
  IntLf<IntLfFixedLayout> t(AllocPolicy::kSegregated);
  churn_sixteen_keys(t, 2000);
  nodes.refresh();
  // 32 000 nodes unlinked; only those of the last few epochs may wait.
  CHECK(nodes.allocations - nodes.frees < limbo_bound());
  CHECK(t.check_structure() == "");
}

} // namespace
