// occ-avl (occ_avl.h): Bronson et al.'s algorithm, iterative, restarting from
// the root where the paper backs up one level.
//
// Version word of a node:
//   bit 0       unlinked: the node left the tree for good
//   bit 1       shrinking: a rotation is moving the node down right now
//   bits 2-31   value changes, bit 2 = present (odd count)
//   bits 32-63  completed shrinks
// A search that saw version v of a node may trust a child pointer read
// afterwards as long as the node's structural bits (all but the value
// changes) still equal v's.
//
// Memory order: child pointers and versions follow the seqlock pattern
// (release stores, acquire loads). Heights and parent pointers are
// sequentially consistent: a thread that stores a child's height then reads
// the child's parent to repair it, while a rotation or unlink stores the
// parent pointer and then reads the child's height; they must not both miss
// the other's store (fix 2).
//
// Two defects found by running more threads than cores (issue 12), fixed
// here; both leave the paper's algorithm as published:
//
// 1. A lost insert. An insert that finds the leaf slot empty but, once it
//    holds the node's lock, sees another insert took the slot, looks at the
//    node again (the paper's "RETRY in the outer loop"). The earlier code
//    kept that attempt's "not done" outcome while looking again, so when the
//    node's version had changed meanwhile (a rotation moved it down) the
//    search left the loop to restart from the root and returned that stale
//    outcome instead: the insert returned false for a key that was not in
//    the tree. One run in 15 of 3 threads prefilling 20 000 keys on two
//    cores. update() now sets the outcome only when it returns it.
//
// 2. Heights computed from stale snapshots. Repairs are handed off: whoever
//    writes a node's height or children must make sure the node and its
//    parent are repaired, by doing it or by leaving the damage where the next
//    writer will see it. A rotation breaks that chain: it reads the heights
//    of subtrees it moves (the heavy child's inner child and n's other child
//    are not locked) before it writes the new heights, and decided from those
//    snapshots whether the nodes it moved still needed work. A thread that
//    raised the inner child's height meanwhile had read the child's old
//    parent and, finding that one consistent, stopped; the rotation then
//    stored a height computed from the old value and declared it done. The
//    tree was left with a wrong height (and balance judged from it) after
//    quiescence: about one run in 100 of 4-8 threads on small key ranges.
//    Now every thread that writes a height reads the children's heights
//    again afterwards (after_rotation_nl judges the moved nodes from fresh
//    reads, look_again_if_damaged does it after a height fix) and queues the
//    node when they changed. With sequentially consistent heights and parent
//    pointers, of a thread that writes a child's height and then reads its
//    parent, and one that moves the child or writes the parent's height and
//    then reads the child's height, one sees the other's write.
//
// Before, 69 of 1 000 runs of `memlayout-bench --tree occ-avl --threads 3
// --duration 0 --key-range 20000 --check` failed (67 lost inserts, 2 wrong
// heights), and 11 of 900 runs of 4-8 threads on 32-1024 keys; after, none
// of 6 300 such runs. scripts/soak_trees.sh and docs/testing.md have more.
#include "occ_avl.h"

#include "search_step.h"
#include "structure_errors.h"
#include "tree_factories.h"

#include <algorithm>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

namespace memlayout::trees {
namespace {

constexpr Key kHolderKey = kMinKey - 1;

using namespace occ_avl;
constexpr uint64_t kStructureMask = ~kValueMask;

bool is_unlinked(uint64_t v) { return (v & kUnlinked) != 0; }
bool is_shrinking(uint64_t v) { return (v & kShrinking) != 0; }
bool is_present(uint64_t v) { return (v & kValueIncr) != 0; }
bool structure_changed(uint64_t now, uint64_t seen) { return ((now ^ seen) & kStructureMask) != 0; }
// Flips presence by counting one more value change (wrapping within its bits).
uint64_t toggle_presence(uint64_t v) { return (v & ~kValueMask) | ((v + kValueIncr) & kValueMask); }

// What node_condition finds when the node's height is not simply stale.
constexpr int kUnlinkRequired = -1;
constexpr int kRebalanceRequired = -2;
constexpr int kNothingRequired = -3;

// Spins on a shrinking node before waiting on its lock (the rotation holds it).
constexpr int kSpinsBeforeLock = 100;

template <class N> std::atomic<N *> &child_ref(N *n, bool right) {
  return right ? n->right : n->left;
}
template <class N> N *child_of(const N *n, bool right) {
  return (right ? n->right : n->left).load(std::memory_order_acquire);
}
template <class N> int height_of(const N *n) {
  return n ? n->height.load(std::memory_order_seq_cst) : 0;
}
template <class N> void set_height(N *n, int h) {
  n->height.store(static_cast<decltype(n->height.load())>(h), std::memory_order_seq_cst);
}

// Reads the value of a node whose key matched: present and value from one
// unchanged value count.
template <class N> bool read_value(const N *n, Value *out) {
  for (;;) {
    uint64_t before = n->version.load(std::memory_order_acquire);
    if (!is_present(before))
      return false;
    Value v = n->value.load(std::memory_order_acquire);
    uint64_t after = n->version.load(std::memory_order_relaxed);
    if (((before ^ after) & kValueMask) == 0) {
      *out = v;
      return true;
    }
  }
}

template <class L> void wait_until_not_shrinking(typename L::Node *n, uint64_t seen) {
  for (int i = 0; i < kSpinsBeforeLock; ++i) {
    if (n->version.load(std::memory_order_acquire) != seen)
      return;
    cpu_relax();
  }
  NodeLockGuard<L> wait(n);
}

// node_condition of the paper: what the node needs, judged from unlocked reads.
template <class N> int node_condition(const N *node) {
  N *nl = child_of(node, false);
  N *nr = child_of(node, true);
  if ((!nl || !nr) && !is_present(node->version.load(std::memory_order_acquire)))
    return kUnlinkRequired;
  int hn = height_of(node);
  int hl = height_of(nl);
  int hr = height_of(nr);
  int h_repl = 1 + std::max(hl, hr);
  int bal = hl - hr;
  if (bal < -1 || bal > 1)
    return kRebalanceRequired;
  return hn != h_repl ? h_repl : kNothingRequired;
}

bool unbalanced(int bal) { return bal < -1 || bal > 1; }

} // namespace

template <class L> OccAvl<L>::OccAvl(AllocPolicy policy) : Bst<OccAvl, L>("occ-avl", policy) {
  holder_ = new_node(kHolderKey, 0, false, nullptr);
}

template <class L> OccAvl<L>::~OccAvl() { this->free_nodes(holder_); }

template <class L> typename L::Node *OccAvl<L>::child(const Node *n, bool right) {
  return child_of(n, right);
}

template <class L> bool OccAvl<L>::entry(const Node *n, Key *key, Value *value) {
  *key = n->key;
  *value = n->value.load(std::memory_order_relaxed);
  return is_present(n->version.load(std::memory_order_acquire));
}

template <class L>
typename L::Node *OccAvl<L>::new_node(Key key, Value value, bool present, Node *parent) {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  Node *n = new (p) Node{};
  n->key = key;
  n->value.store(value, std::memory_order_relaxed);
  n->version.store(present ? kValueIncr : 0, std::memory_order_relaxed);
  n->parent.store(parent, std::memory_order_relaxed);
  set_height(n, 1);
  L::init_lock(n->lock);
  return n;
}

template <class L> bool OccAvl<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  for (;;) {
    Node *node = holder_;
    uint64_t node_v = node->version.load(std::memory_order_acquire);
    for (;;) {
      bool right = key > node->key;
      Node *child = load_child(node->left, node->right, right);
      if (structure_changed(node->version.load(std::memory_order_acquire), node_v))
        break; // node moved or left: restart from the root
      if (!child)
        return false;
      if (child->key == key)
        return read_value(child, value);
      uint64_t child_v = child->version.load(std::memory_order_acquire);
      if (is_shrinking(child_v)) {
        wait_until_not_shrinking<L>(child, child_v);
        continue;
      }
      if (is_unlinked(child_v) || child != child_of(node, right))
        continue;
      if (structure_changed(node->version.load(std::memory_order_acquire), node_v))
        break;
      node = child;
      node_v = child_v;
    }
  }
}

template <class L> bool OccAvl<L>::insert(Key key, Value value) { return update(key, true, value); }

template <class L> bool OccAvl<L>::remove(Key key) { return update(key, false, 0); }

// The search of lookup, ending in an insertion or a removal.
template <class L> bool OccAvl<L>::update(Key key, bool is_insert, Value value) {
  EpochGuard guard;
  for (;;) {
    Node *node = holder_;
    uint64_t node_v = node->version.load(std::memory_order_acquire);
    Outcome outcome = Outcome::kRetry;
    for (;;) {
      bool right = key > node->key;
      Node *child = load_child(node->left, node->right, right);
      if (structure_changed(node->version.load(std::memory_order_acquire), node_v))
        break;
      if (!child) {
        if (!is_insert)
          return false;
        Outcome leaf = insert_leaf(node, node_v, right, key, value);
        if (leaf == Outcome::kNotDone)
          continue; // another insert took the empty slot first: look again (fix 1)
        outcome = leaf;
        break;
      }
      if (child->key == key) {
        outcome = is_insert ? insert_found(child, value) : remove_found(node, child);
        break;
      }
      uint64_t child_v = child->version.load(std::memory_order_acquire);
      if (is_shrinking(child_v)) {
        wait_until_not_shrinking<L>(child, child_v);
        continue;
      }
      if (is_unlinked(child_v) || child != child_of(node, right))
        continue;
      if (structure_changed(node->version.load(std::memory_order_acquire), node_v))
        break;
      node = child;
      node_v = child_v;
    }
    if (outcome != Outcome::kRetry)
      return outcome == Outcome::kDone;
  }
}

// kNotDone: the slot is taken now.
template <class L>
typename OccAvl<L>::Outcome OccAvl<L>::insert_leaf(Node *node, uint64_t node_v, bool right, Key key,
                                                   Value value) {
  Node *damaged;
  std::vector<Node *> revisit;
  {
    NodeLockGuard<L> hold(node);
    if (structure_changed(node->version.load(std::memory_order_relaxed), node_v))
      return Outcome::kRetry;
    if (child_of(node, right))
      return Outcome::kNotDone;
    Node *leaf = new_node(key, value, true, node);
    child_ref(node, right).store(leaf, std::memory_order_seq_cst);
    damaged = fix_height_nl(node, revisit);
  }
  fix_height_and_rebalance(damaged, revisit);
  return Outcome::kDone;
}

// The key has a node: revive it if it is a routing node. Seeing it present
// is a linearizable "already there" without a lock (present nodes are linked).
template <class L> typename OccAvl<L>::Outcome OccAvl<L>::insert_found(Node *node, Value value) {
  if (is_present(node->version.load(std::memory_order_acquire)))
    return Outcome::kNotDone;
  NodeLockGuard<L> hold(node);
  uint64_t v = node->version.load(std::memory_order_relaxed);
  if (is_unlinked(v))
    return Outcome::kRetry;
  if (is_present(v))
    return Outcome::kNotDone;
  node->value.store(value, std::memory_order_release);
  node->version.store(toggle_presence(v), std::memory_order_release);
  return Outcome::kDone;
}

// A node with fewer than two children is unlinked (under its parent's lock
// and its own); one with two becomes a routing node.
template <class L> typename OccAvl<L>::Outcome OccAvl<L>::remove_found(Node *parent, Node *node) {
  if (!is_present(node->version.load(std::memory_order_acquire)))
    return Outcome::kNotDone;
  if (!child_of(node, false) || !child_of(node, true)) {
    Node *damaged;
    std::vector<Node *> revisit;
    {
      NodeLockGuard<L> hold_parent(parent);
      if (is_unlinked(parent->version.load(std::memory_order_relaxed)) ||
          node->parent.load(std::memory_order_relaxed) != parent)
        return Outcome::kRetry;
      NodeLockGuard<L> hold_node(node);
      if (!is_present(node->version.load(std::memory_order_relaxed)))
        return Outcome::kNotDone;
      if (!attempt_unlink_nl(parent, node))
        return Outcome::kRetry; // it has two children now
      damaged = fix_height_nl(parent, revisit);
    }
    fix_height_and_rebalance(damaged, revisit);
    return Outcome::kDone;
  }
  NodeLockGuard<L> hold(node);
  uint64_t v = node->version.load(std::memory_order_relaxed);
  if (is_unlinked(v))
    return Outcome::kRetry;
  if (!is_present(v))
    return Outcome::kNotDone;
  if (!child_of(node, false) || !child_of(node, true))
    return Outcome::kRetry; // lost a child meanwhile: needs the parent's lock
  node->version.store(toggle_presence(v), std::memory_order_release);
  return Outcome::kDone;
}

// Parent and node locked. Splices the node out if it is still the parent's
// child and has at most one child; a present node leaves absent.
template <class L> bool OccAvl<L>::attempt_unlink_nl(Node *parent, Node *node) {
  Node *pl = child_of(parent, false);
  Node *pr = child_of(parent, true);
  if (pl != node && pr != node)
    return false;
  Node *l = child_of(node, false);
  Node *r = child_of(node, true);
  if (l && r)
    return false;
  Node *splice = l ? l : r;
  child_ref(parent, pr == node).store(splice, std::memory_order_seq_cst);
  if (splice)
    splice->parent.store(parent, std::memory_order_seq_cst);
  uint64_t v = node->version.load(std::memory_order_relaxed);
  if (is_present(v))
    v = toggle_presence(v);
  node->version.store(v | kUnlinked, std::memory_order_release);
  this->retire_node(node);
  return true;
}

// Walks up from a damaged node until nothing needs fixing, taking the node's
// lock to fix a height and its parent's too to rotate or unlink. A rotation
// that hands back a node still needing work queues its parent, whose height
// may be stale now, for a look once that chain ends (the paper drops it,
// which leaves wrong heights behind after quiescence).
template <class L>
void OccAvl<L>::fix_height_and_rebalance(Node *node, std::vector<Node *> &revisit) {
  for (;;) {
    while (node && node->parent.load(std::memory_order_seq_cst)) { // the holder has none
      int condition = node_condition(node);
      if (condition == kNothingRequired ||
          is_unlinked(node->version.load(std::memory_order_acquire)))
        break;
      if (condition != kUnlinkRequired && condition != kRebalanceRequired) {
        NodeLockGuard<L> hold(node);
        if (is_unlinked(node->version.load(std::memory_order_relaxed)))
          break; // its unlinker repairs its parent
        node = fix_height_nl(node, revisit);
        continue;
      }
      Node *n_parent = node->parent.load(std::memory_order_seq_cst);
      NodeLockGuard<L> hold_parent(n_parent);
      // An unlinked node keeps its stale parent pointer: check the parent's
      // child pointers too. (Else retry: the node moved under another parent.)
      if (!is_unlinked(n_parent->version.load(std::memory_order_relaxed)) &&
          node->parent.load(std::memory_order_relaxed) == n_parent &&
          (child_of(n_parent, false) == node || child_of(n_parent, true) == node)) {
        NodeLockGuard<L> hold_node(node);
        node = rebalance_nl(n_parent, node, revisit);
      }
    }
    if (revisit.empty())
      return;
    node = revisit.back();
    revisit.pop_back();
  }
}

// Node locked. Returns the next node to look at (null when done).
template <class L>
typename L::Node *OccAvl<L>::fix_height_nl(Node *node, std::vector<Node *> &revisit) {
  int c = node_condition(node);
  switch (c) {
  case kRebalanceRequired:
  case kUnlinkRequired:
    return node; // needs the parent's lock too
  case kNothingRequired:
    return nullptr;
  default:
    set_height(node, c);
    look_again_if_damaged(node, revisit);
    return node->parent.load(std::memory_order_seq_cst);
  }
}

// After writing n's height from its children's heights (n locked): reads
// them again, and if they changed meanwhile, n is looked at again once the
// current repair chain ends (fix 2).
template <class L> void OccAvl<L>::look_again_if_damaged(Node *n, std::vector<Node *> &revisit) {
  if (node_condition(n) != kNothingRequired)
    revisit.push_back(n);
}

// The end of a rotation: the nodes whose heights it wrote (deepest first)
// are judged again from fresh reads (fix 2), the first that needs work is
// handed back and the others, with the parent, queued.
template <class L>
typename L::Node *OccAvl<L>::after_rotation_nl(Node *n_parent, std::initializer_list<Node *> moved,
                                               std::vector<Node *> &revisit) {
  Node *next = nullptr;
  for (Node *x : moved) {
    if (is_unlinked(x->version.load(std::memory_order_relaxed)) ||
        node_condition(x) == kNothingRequired)
      continue;
    if (next)
      revisit.push_back(x);
    else
      next = x;
  }
  if (!next)
    return fix_height_nl(n_parent, revisit);
  revisit.push_back(n_parent);
  return next;
}

// Parent and node locked.
template <class L>
typename L::Node *OccAvl<L>::rebalance_nl(Node *n_parent, Node *n, std::vector<Node *> &revisit) {
  Node *nl = child_of(n, false);
  Node *nr = child_of(n, true);
  if ((!nl || !nr) && !is_present(n->version.load(std::memory_order_relaxed))) {
    if (attempt_unlink_nl(n_parent, n))
      return fix_height_nl(n_parent, revisit);
    return n;
  }
  int hn = height_of(n);
  int hl0 = height_of(nl);
  int hr0 = height_of(nr);
  int h_repl = 1 + std::max(hl0, hr0);
  int bal = hl0 - hr0;
  if (bal > 1)
    return rebalance_heavy_nl(n_parent, n, nl, hr0, false, revisit);
  if (bal < -1)
    return rebalance_heavy_nl(n_parent, n, nr, hl0, true, revisit);
  if (h_repl != hn) {
    set_height(n, h_repl);
    look_again_if_damaged(n, revisit);
    return fix_height_nl(n_parent, revisit);
  }
  return nullptr;
}

// The paper's rebalanceToRight (heavy_right false) and rebalanceToLeft: n is
// too tall on the heavy side; rotate once, twice, or first the heavy child
// the other way. Parent and n locked.
template <class L>
typename L::Node *OccAvl<L>::rebalance_heavy_nl(Node *n_parent, Node *n, Node *n_heavy, int h_other,
                                                bool heavy_right, std::vector<Node *> &revisit) {
  const bool d = heavy_right;
  NodeLockGuard<L> hold_heavy(n_heavy);
  int hh = height_of(n_heavy);
  if (hh - h_other <= 1)
    return n; // changed since n's heights were read: look again
  Node *n_inner = child_of(n_heavy, !d);
  int h_outer0 = height_of(child_of(n_heavy, d));
  int h_inner0 = height_of(n_inner);
  if (h_outer0 >= h_inner0)
    return rotate_single_nl(n_parent, n, n_heavy, h_other, h_outer0, n_inner, h_inner0, d, revisit);
  {
    NodeLockGuard<L> hold_inner(n_inner);
    int h_inner = height_of(n_inner);
    if (h_outer0 >= h_inner)
      return rotate_single_nl(n_parent, n, n_heavy, h_other, h_outer0, n_inner, h_inner, d,
                              revisit);
    int h_inner_near = height_of(child_of(n_inner, d));
    int b = h_outer0 - h_inner_near;
    if (b >= -1 && b <= 1)
      return rotate_double_nl(n_parent, n, n_heavy, h_other, h_outer0, n_inner, h_inner_near, d,
                              revisit);
  }
  // The double rotation would leave the heavy child unbalanced: rotate it
  // toward the heavy side first.
  return rebalance_heavy_nl(n, n_heavy, n_inner, h_outer0, !d, revisit);
}

// rotateRight of the paper for d = left: the heavy child rises, n sinks and
// takes the heavy child's inner subtree. n, its parent and the heavy child
// are locked. Returns the node that still needs attention.
template <class L>
typename L::Node *OccAvl<L>::rotate_single_nl(Node *n_parent, Node *n, Node *n_heavy, int h_other,
                                              int h_outer, Node *n_inner, int h_inner, bool d,
                                              std::vector<Node *> &revisit) {
  uint64_t node_v = n->version.load(std::memory_order_relaxed);
  Node *npl = child_of(n_parent, false);
  n->version.store(node_v | kShrinking, std::memory_order_relaxed);

  child_ref(n, d).store(n_inner, std::memory_order_seq_cst);
  if (n_inner)
    n_inner->parent.store(n, std::memory_order_seq_cst);
  child_ref(n_heavy, !d).store(n, std::memory_order_seq_cst);
  n->parent.store(n_heavy, std::memory_order_seq_cst);
  child_ref(n_parent, npl != n).store(n_heavy, std::memory_order_seq_cst);
  n_heavy->parent.store(n_parent, std::memory_order_seq_cst);

  int hn_repl = 1 + std::max(h_inner, h_other);
  set_height(n, hn_repl);
  set_height(n_heavy, 1 + std::max(h_outer, hn_repl));
  n->version.store(node_v + kShrinkIncr, std::memory_order_release);

  return after_rotation_nl(n_parent, {n, n_heavy}, revisit);
}

// rotateRightOverLeft of the paper for d = left: the heavy child's inner
// child rises two levels; n and the heavy child both sink. All four locked
// (parent, n, heavy child, inner child).
template <class L>
typename L::Node *OccAvl<L>::rotate_double_nl(Node *n_parent, Node *n, Node *n_heavy, int h_other,
                                              int h_outer, Node *n_inner, int h_inner_near, bool d,
                                              std::vector<Node *> &revisit) {
  uint64_t node_v = n->version.load(std::memory_order_relaxed);
  uint64_t heavy_v = n_heavy->version.load(std::memory_order_relaxed);
  Node *npl = child_of(n_parent, false);
  Node *inner_near = child_of(n_inner, d); // goes to the heavy child
  Node *inner_far = child_of(n_inner, !d); // goes to n
  int h_inner_far = height_of(inner_far);

  n->version.store(node_v | kShrinking, std::memory_order_relaxed);
  n_heavy->version.store(heavy_v | kShrinking, std::memory_order_relaxed);

  // n and the heavy child take their new subtrees before the inner node
  // drops them, so a search at the inner node always finds its keys below.
  child_ref(n, d).store(inner_far, std::memory_order_seq_cst);
  if (inner_far)
    inner_far->parent.store(n, std::memory_order_seq_cst);
  child_ref(n_heavy, !d).store(inner_near, std::memory_order_seq_cst);
  if (inner_near)
    inner_near->parent.store(n_heavy, std::memory_order_seq_cst);
  child_ref(n_inner, d).store(n_heavy, std::memory_order_seq_cst);
  n_heavy->parent.store(n_inner, std::memory_order_seq_cst);
  child_ref(n_inner, !d).store(n, std::memory_order_seq_cst);
  n->parent.store(n_inner, std::memory_order_seq_cst);
  child_ref(n_parent, npl != n).store(n_inner, std::memory_order_seq_cst);
  n_inner->parent.store(n_parent, std::memory_order_seq_cst);

  int hn_repl = 1 + std::max(h_inner_far, h_other);
  set_height(n, hn_repl);
  int hh_repl = 1 + std::max(h_outer, h_inner_near);
  set_height(n_heavy, hh_repl);
  set_height(n_inner, 1 + std::max(hh_repl, hn_repl));
  n->version.store(node_v + kShrinkIncr, std::memory_order_release);
  n_heavy->version.store(heavy_v + kShrinkIncr, std::memory_order_release);

  // A routing heavy child left with one child is unlinked at once: its new
  // parent (the inner node) and it are both locked. The paper refuses this
  // rotation instead and, when the heavy child then needs no rotation of its
  // own, leaves n off balance by two for good.
  if ((h_outer == 0 || !inner_near) &&
      !is_present(n_heavy->version.load(std::memory_order_relaxed)) &&
      attempt_unlink_nl(n_inner, n_heavy)) {
    hh_repl = std::max(h_outer, h_inner_near); // the surviving child moved up
    set_height(n_inner, 1 + std::max(hh_repl, hn_repl));
  }

  return after_rotation_nl(n_parent, {n, n_heavy, n_inner}, revisit);
}

template <class L> size_t OccAvl<L>::routing_node_count() const {
  size_t count = 0;
  this->walk_nodes(key_root(), [&](const Node *n) {
    count += !is_present(n->version.load(std::memory_order_relaxed));
  });
  return count;
}

// Search order, parent pointers, no version left unlinked or shrinking, and
// the strict AVL invariants (exact heights, balance within one, no routing
// node with fewer than two children), which hold once no update runs.
template <class L> std::string OccAvl<L>::check_structure() const {
  StructureErrors errors;
  if (child_of(holder_, false))
    errors.fail(holder_, "the root holder has a left child");

  struct Entry {
    const Node *n;
    Key lo, hi; // exclusive bounds
    size_t parent;
    bool right;
    int h_left = 0, h_right = 0;
  };
  constexpr size_t kNone = ~size_t{0};
  std::vector<Entry> order; // pre-order: children after their parent
  std::unordered_set<const Node *> seen;
  if (const Node *root = child_of(holder_, true))
    order.push_back(Entry{root, kHolderKey, kMaxKey + 1, kNone, true});
  for (size_t i = 0; i < order.size(); ++i) {
    Entry e = order[i];
    const Node *n = e.n;
    if (!seen.insert(n).second) {
      errors.fail(n, "reached twice (cycle or shared subtree)");
      return errors.report();
    }
    if (n->key <= e.lo || n->key >= e.hi)
      errors.fail(n, "out of search order");
    const Node *expected_parent = e.parent == kNone ? holder_ : order[e.parent].n;
    if (n->parent.load(std::memory_order_relaxed) != expected_parent)
      errors.fail(n, "parent pointer does not point to its parent");
    uint64_t v = n->version.load(std::memory_order_relaxed);
    if (is_unlinked(v))
      errors.fail(n, "unlinked node still reachable");
    if (is_shrinking(v))
      errors.fail(n, "version left shrinking");
    if (const Node *l = child_of(n, false))
      order.push_back(Entry{l, e.lo, n->key, i, false});
    if (const Node *r = child_of(n, true))
      order.push_back(Entry{r, n->key, e.hi, i, true});
  }
  for (size_t i = order.size(); i-- > 0;) {
    const Entry &e = order[i];
    int h = 1 + std::max(e.h_left, e.h_right);
    if (height_of(e.n) != h)
      errors.fail(e.n, "stored height differs from the subtree's height");
    if (unbalanced(e.h_left - e.h_right))
      errors.fail(e.n, "AVL balance off by more than one");
    bool two_children = child_of(e.n, false) && child_of(e.n, true);
    if (!is_present(e.n->version.load(std::memory_order_relaxed)) && !two_children)
      errors.fail(e.n, "routing node with fewer than two children");
    if (e.parent != kNone)
      (e.right ? order[e.parent].h_right : order[e.parent].h_left) = h;
  }
  return errors.report();
}

template class OccAvl<OccAvlBaselineLayout>;
template class OccAvl<OccAvlFixedLayout>;

std::unique_ptr<ConcurrentMap> make_occ_avl(const TreeConfig &config) {
  return make_in_layout<OccAvl, OccAvlBaselineLayout, OccAvlFixedLayout>(config);
}

} // namespace memlayout::trees
