// occ-avl's own cases (trees/occ_avl.h): record layouts, strict AVL shape
// after ascending inserts, routing nodes (two-child removals) being revived
// and unlinked, lookups that never miss a key while rotations move it, and
// a few keys fought over by every thread.
#include "occ_avl.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

using namespace memlayout::trees;
using namespace memlayout::trees::test;

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
  check_stable_keys_never_missed(tree, kRange, 150'000, value_of);
}

} // namespace

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
  check_per_key_accounting(tree, 8, 4, 100'000, value_of);
}
