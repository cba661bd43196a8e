// occ-avl's own cases (trees/occ_avl.h): record layouts, strict AVL shape
// after ascending inserts, routing nodes (two-child removals) being revived
// and unlinked, lookups that never miss a key while rotations move it, and
// a few keys fought over by every thread.
#include "occ_avl.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace memlayout::trees {

// Builds trees node by node and runs pieces of an update with the locks an
// operation would hold, to replay interleavings that a run on few cores
// meets once in a hundred runs.
template <class L> struct OccAvlProbe {
  using Tree = OccAvl<L>;
  using Node = typename Tree::Node;

  static Node *find(Tree &t, Key key) {
    Node *n = t.holder_->right.load();
    while (n && n->key != key)
      n = (key > n->key ? n->right : n->left).load();
    REQUIRE(n);
    return n;
  }
  // A present node under parent (which must have that slot free), with the
  // height a thread that repaired it would have stored.
  static Node *link(Tree &t, Node *parent, bool right, Key key, int height) {
    Node *n = t.new_node(key, value_of(key), true, parent);
    n->height.store(static_cast<decltype(n->height.load())>(height));
    (right ? parent->right : parent->left).store(n);
    return n;
  }
  static Node *root_of(Tree &t, Key key, int height) {
    return link(t, t.holder_, true, key, height);
  }
  static void set_height(Node *n, int h) {
    n->height.store(static_cast<decltype(n->height.load())>(h));
  }
  static void lock(Node *n) { L::lock(n->lock); }
  static void unlock(Node *n) { L::unlock(n->lock); }

  // n's heavy child rises over n (rebalance_heavy_nl's single rotation),
  // judged from the heights given, which the caller may make stale; then
  // the repair walk that follows in fix_height_and_rebalance.
  static void rotate_single(Tree &t, Node *n, bool heavy_right, int h_other, int h_outer,
                            int h_inner) {
    EpochGuard guard;
    Node *parent = n->parent.load();
    Node *heavy = (heavy_right ? n->right : n->left).load();
    Node *inner = (heavy_right ? heavy->left : heavy->right).load();
    std::vector<Node *> revisit;
    lock(parent);
    lock(n);
    lock(heavy);
    Node *next = t.rotate_single_nl(parent, n, heavy, h_other, h_outer, inner, h_inner, heavy_right,
                                    revisit);
    unlock(heavy);
    unlock(n);
    unlock(parent);
    t.fix_height_and_rebalance(next, revisit);
  }
};

} // namespace memlayout::trees

namespace {

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
  check_stable_keys_never_missed(tree, 2048, 150'000, 4);
}

// Fix 1 of occ_avl.cpp. An insert of 35 reaches 30's empty right slot and
// waits for 30's lock; meanwhile 33 takes the slot (and is caught shrinking),
// so the insert finds the slot taken and looks at 30 again; then a rotation
// moves 30 down (its shrink count grows), so the search must restart from
// the root. The insert must still insert 35.
template <class L> void insert_that_loses_the_slot_then_restarts_inserts() {
  using Probe = OccAvlProbe<L>;
  OccAvl<L> tree(AllocPolicy::kMalloc);
  fill(tree, {20, 10, 30});
  auto *n20 = Probe::find(tree, 20);
  auto *n30 = Probe::find(tree, 30);

  Probe::lock(n30);
  bool inserted = false;
  std::thread writer([&] { inserted = tree.insert(35, value_of(35)); });
  // Time for the insert to reach 30's lock. Were it slower, it would find
  // 33 below and pass whatever the code: the test cannot fail wrongly.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto *n33 = Probe::link(tree, n30, true, 33, 1);
  n33->version.store(occ_avl::kValueIncr | occ_avl::kShrinking);
  Probe::lock(n33);
  Probe::set_height(n30, 2);
  Probe::set_height(n20, 3);
  Probe::unlock(n30);
  // Time for it to find the slot taken and wait for 33 to stop shrinking.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  n30->version.fetch_add(occ_avl::kShrinkIncr);
  n33->version.store(occ_avl::kValueIncr + occ_avl::kShrinkIncr);
  Probe::unlock(n33);
  writer.join();

  CHECK(inserted);
  Value v = 0;
  CHECK(tree.lookup(35, &v));
  CHECK(v == value_of(35));
  CHECK(contents(tree) == expected_of({10, 20, 30, 33, 35}));
  CHECK(tree.check_structure() == "");
}

// Fix 2 of occ_avl.cpp. 50 is left-heavy (30 of height 3 against 60 of
// height 1) and a rotation brings 30 up; it read 40's height as 1, but
// another thread has since inserted 45 below 40, stored 40's height 2, found
// 30 consistent and stopped. The rotation must not store 50's height from
// its stale snapshot and leave it there.
template <class L> void rotation_with_a_stale_height_repairs_it() {
  using Probe = OccAvlProbe<L>;
  OccAvl<L> tree(AllocPolicy::kMalloc);
  auto *n50 = Probe::root_of(tree, 50, 4);
  auto *n30 = Probe::link(tree, n50, false, 30, 3);
  Probe::link(tree, n50, true, 60, 1);
  auto *n20 = Probe::link(tree, n30, false, 20, 2);
  Probe::link(tree, n20, false, 10, 1);
  auto *n40 = Probe::link(tree, n30, true, 40, 2);
  Probe::link(tree, n40, true, 45, 1);

  Probe::rotate_single(tree, n50, false, /*h_other=*/1, /*h_outer=*/2, /*stale h_inner=*/1);
  CHECK(tree.check_structure() == "");
  CHECK(contents(tree) == expected_of({10, 20, 30, 40, 45, 50, 60}));
}

} // namespace

TEMPLATE_TEST_CASE("occ-avl: an insert that loses its leaf slot and then its node restarts",
                   "[occ-avl]", OccAvlBaselineLayout, OccAvlFixedLayout) {
  insert_that_loses_the_slot_then_restarts_inserts<TestType>();
}

TEMPLATE_TEST_CASE("occ-avl: a rotation from stale heights leaves none behind", "[occ-avl]",
                   OccAvlBaselineLayout, OccAvlFixedLayout) {
  rotation_with_a_stale_height_repairs_it<TestType>();
}

TEST_CASE("occ-avl: record sizes of the two layouts", "[occ-avl]") {
  CHECK(record_kinds(make_occ_avl, Layout::kBaseline) == std::vector<RecordKind>{{"node", 64}});
  CHECK(record_kinds(make_occ_avl, Layout::kFixed) == std::vector<RecordKind>{{"node", 56}});
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

// Four threads on eight keys: revivals, routing nodes and unlinks race on
// the same few nodes. Per-key accounting as in the generic suite.
TEMPLATE_TEST_CASE("occ-avl: four threads on eight keys", "[occ-avl]", OccAvlBaselineLayout,
                   OccAvlFixedLayout) {
  OccAvl<TestType> tree(AllocPolicy::kMalloc);
  check_per_key_accounting(tree, 8, 4, 100'000);
}
