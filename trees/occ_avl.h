// occ-avl: the relaxed-balance AVL tree of Bronson, Casper, Chafi and
// Olukotun ("A Practical Concurrent Binary Search Tree", PPoPP 2010).
//
// Searches take no locks: every node carries a version word, and a search
// moves from a node to its child only after checking that the node's version
// did not change while it read the child pointer. A rotation that moves a
// node down ("shrinks" the key range below it) marks the node's version
// shrinking for its duration and bumps it after; an unlink marks it unlinked.
// Updates lock the nodes they change (a new leaf's parent; parent and node to
// unlink; up to four nodes, parent to grandchild, for a rotation), and walk
// back up fixing heights and rotating where the AVL balance is off, so the
// tree is strictly balanced again once no update is running.
//
// The tree is partially external: removing a key whose node has two children
// only clears the node's presence, leaving a routing node that a later
// rebalance unlinks once it has fewer than two children.
//
// As in the study's occ-avl-2-ret, a failed validation restarts the
// operation from the root instead of backing up the recursion of the paper.
//
// Presence lives in the version word (bit 2 counts value changes: odd =
// present), so a lookup reads a value and its presence consistently by
// checking that word before and after; searches ignore those bits.
#pragma once

#include "bst.h"
#include "spin_lock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace memlayout::trees {
namespace occ_avl {

// A node's version word (occ_avl.cpp explains how searches use it).
inline constexpr uint64_t kUnlinked = 1;  // the node left the tree for good
inline constexpr uint64_t kShrinking = 2; // a rotation is moving it down now
inline constexpr uint64_t kValueIncr = 4; // bits 2-31 count value changes: odd = present
inline constexpr uint64_t kValueMask = 0xfffffffcULL;
inline constexpr uint64_t kShrinkIncr = uint64_t{1} << 32; // bits 32-63 count completed shrinks

} // namespace occ_avl

// ASCYLIB's bst-bronson node (the study's occ-avl): height first, then key,
// value, version, parent and children, then the lock, padded to a 64-byte
// line. ASCYLIB's static_assert pins it at 64 bytes, which rules out a
// pthread mutex (40 B): its build used a small lock, here a pthread spin lock.
// A search reads key (8), version (24) and a child (40/48).
struct OccAvlBaselineLayout : PthreadSpinLock {
  struct Node {
    std::atomic<int32_t> height; // 0
    Key key;                     // 8
    std::atomic<Value> value;    // 16
    std::atomic<uint64_t> version;
    std::atomic<Node *> parent;
    std::atomic<Node *> left; // 40
    std::atomic<Node *> right;
    Lock lock;                // 56
    uint8_t padding[64 - 60]; // to the cache-line size
  };
};
static_assert(sizeof(OccAvlBaselineLayout::Node) == 64);
static_assert(offsetof(OccAvlBaselineLayout::Node, key) == 8);
static_assert(offsetof(OccAvlBaselineLayout::Node, version) == 24);
static_assert(offsetof(OccAvlBaselineLayout::Node, left) == 40);

// The study's fix (setbench's non-baseline ccavl order): search fields first
// (key, version, children), a 4-byte spin lock, no padding: 56 bytes. The
// height is 16 bits wide to fit; a relaxed AVL tree of 2^62 keys stays far
// below 2^15 levels.
struct OccAvlFixedLayout : WordSpinLock {
  struct Node {
    Key key;                       // 0
    std::atomic<uint64_t> version; // 8
    std::atomic<Node *> left;      // 16
    std::atomic<Node *> right;     // 24
    std::atomic<Value> value;      // 32: read by lookups that hit
    std::atomic<Node *> parent;    // 40
    std::atomic<int16_t> height;   // 48
    uint8_t padding[2];
    Lock lock; // 52
  };
};
static_assert(sizeof(OccAvlFixedLayout::Node) == 56);
static_assert(offsetof(OccAvlFixedLayout::Node, right) == 24);

// Tests' access to the internals (stalling an operation half way).
template <class L> struct OccAvlProbe;

template <class L> class OccAvl final : public Bst<OccAvl, L> {
public:
  using Node = typename L::Node;

  explicit OccAvl(AllocPolicy policy);
  ~OccAvl() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks: routing nodes hold no key.
  static Node *child(const Node *n, bool right);
  const Node *key_root() const { return child(holder_, true); }
  static bool entry(const Node *n, Key *key, Value *value);

  // Quiescent only, for tests: of node_count(), the routing nodes (removed
  // keys whose node had two children).
  size_t routing_node_count() const;

private:
  friend struct OccAvlProbe<L>;

  // What an attempt at an update found: done, nothing to do (the key is
  // already there / already gone), or a concurrent change to restart from.
  enum class Outcome { kDone, kNotDone, kRetry };

  Node *new_node(Key key, Value value, bool present, Node *parent);

  bool update(Key key, bool is_insert, Value value);
  Outcome insert_leaf(Node *node, uint64_t node_version, bool right, Key key, Value value);
  Outcome insert_found(Node *node, Value value);
  Outcome remove_found(Node *parent, Node *node);
  bool attempt_unlink_nl(Node *parent, Node *node);

  void fix_height_and_rebalance(Node *node, std::vector<Node *> &revisit);
  Node *fix_height_nl(Node *node, std::vector<Node *> &revisit);
  void look_again_if_damaged(Node *n, std::vector<Node *> &revisit);
  Node *after_rotation_nl(Node *n_parent, std::initializer_list<Node *> moved,
                          std::vector<Node *> &revisit);
  // The rebalancing steps take the nodes to re-check once the current
  // repair chain ends (see fix_height_and_rebalance).
  Node *rebalance_nl(Node *n_parent, Node *n, std::vector<Node *> &revisit);
  Node *rebalance_heavy_nl(Node *n_parent, Node *n, Node *n_heavy, int h_other, bool heavy_right,
                           std::vector<Node *> &revisit);
  Node *rotate_single_nl(Node *n_parent, Node *n, Node *n_heavy, int h_other, int h_outer,
                         Node *n_inner, int h_inner, bool heavy_right,
                         std::vector<Node *> &revisit);
  Node *rotate_double_nl(Node *n_parent, Node *n, Node *n_heavy, int h_other, int h_outer,
                         Node *n_inner, int h_inner_near, bool heavy_right,
                         std::vector<Node *> &revisit);

  // Routing node below every key (kMinKey - 1): the tree hangs off its right.
  // It is never rotated or unlinked, so its version never changes.
  Node *holder_;
};

extern template class OccAvl<OccAvlBaselineLayout>;
extern template class OccAvl<OccAvlFixedLayout>;

} // namespace memlayout::trees
