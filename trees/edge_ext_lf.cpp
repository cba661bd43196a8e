// edge-ext-lf (edge_ext_lf.h): Natarajan and Mittal's algorithm, with the
// paper's names (seek record, injection, cleanup) and epoch-based reclamation
// of what a cleanup unlinks.
#include "edge_ext_lf.h"

#include "structure_errors.h"
#include "tree_factories.h"

#include <algorithm>
#include <new>

namespace memlayout::trees {

namespace {
constexpr auto kAcquire = std::memory_order_acquire;
constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kAcqRel = std::memory_order_acq_rel;
} // namespace

template <class L>
EdgeExtLf<L>::EdgeExtLf(AllocPolicy policy) : Bst<EdgeExtLf, L>("edge-ext-lf", policy) {
  auto init = [](Node *n, Key key, const Node *left, const Node *right) {
    n->key = key;
    n->value = 0;
    n->left.store(edge_to(left), kRelaxed);
    n->right.store(edge_to(right), kRelaxed);
  };
  Node *leaf_inf0 = &sentinels_[2], *leaf_inf1 = &sentinels_[3], *leaf_inf2 = &sentinels_[4];
  init(leaf_inf0, kInf0, nullptr, nullptr);
  init(leaf_inf1, kInf1, nullptr, nullptr);
  init(leaf_inf2, kInf2, nullptr, nullptr);
  init(first_, kInf1, leaf_inf0, leaf_inf1);
  init(root_, kInf2, first_, leaf_inf2);
}

template <class L> EdgeExtLf<L>::~EdgeExtLf() {
  this->walk_nodes(root_, [&](Node *n) {
    if (!is_sentinel(n))
      this->delete_node(n);
  });
  reclaim_all();
}

template <class L> typename EdgeExtLf<L>::Node *EdgeExtLf<L>::new_node() {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  Node *n = new (p) Node;
  n->left.store(0, kRelaxed);
  n->right.store(0, kRelaxed);
  return n;
}

template <class L> typename EdgeExtLf<L>::SeekRecord EdgeExtLf<L>::seek(Key key) const {
  // R -> S is never marked and S's left child routes every user key, so the
  // walk starts with ancestor R and successor, parent S.
  SeekRecord s{root_, first_, first_, nullptr};
  uintptr_t parent_field = first_->left.load(kAcquire); // the edge parent -> leaf
  s.leaf = address(parent_field);
  uintptr_t current_field = edge_of(s.leaf, goes_right(key, s.leaf)).load(kAcquire);
  Node *current = address(current_field);
  while (current) {
    // Only an untagged edge can be the one a cleanup swings.
    if (!(parent_field & kTag)) {
      s.ancestor = s.parent;
      s.successor = s.leaf;
    }
    s.parent = s.leaf;
    s.leaf = current;
    parent_field = current_field;
    current_field = edge_of(current, goes_right(key, current)).load(kAcquire);
    current = address(current_field);
  }
  return s;
}

template <class L> bool EdgeExtLf<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  Node *leaf;
  if constexpr (L::kLeanLookup) {
    leaf = address(first_->left.load(kAcquire));
    for (Node *next; (next = address(edge_of(leaf, goes_right(key, leaf)).load(kAcquire)));)
      leaf = next;
  } else {
    leaf = seek(key).leaf;
  }
  if (leaf->key != key)
    return false;
  *value = leaf->value;
  return true;
}

template <class L> bool EdgeExtLf<L>::insert(Key key, Value value) {
  EpochGuard guard;
  Node *routing = nullptr;
  Node *new_leaf = nullptr;
  for (;;) {
    SeekRecord s = seek(key);
    Node *leaf = s.leaf;
    if (leaf->key == key) {
      if (routing) { // never published
        this->delete_node(routing);
        this->delete_node(new_leaf);
      }
      return false;
    }
    if (!routing) {
      routing = new_node();
      new_leaf = new_node();
      new_leaf->key = key;
      new_leaf->value = value;
      routing->value = 0;
    }
    bool new_goes_left = key < leaf->key;
    routing->key = std::max(key, leaf->key);
    routing->left.store(edge_to(new_goes_left ? new_leaf : leaf), kRelaxed);
    routing->right.store(edge_to(new_goes_left ? leaf : new_leaf), kRelaxed);

    std::atomic<uintptr_t> &edge = edge_of(s.parent, goes_right(key, s.parent));
    uintptr_t seen = edge_to(leaf);
    if (edge.compare_exchange_strong(seen, edge_to(routing), kAcqRel, kAcquire))
      return true;
    // The leaf is still there but being removed: help, then retry.
    if (address(seen) == leaf && (seen & kMarks))
      cleanup(key, s);
  }
}

template <class L> bool EdgeExtLf<L>::remove(Key key) {
  EpochGuard guard;
  bool injecting = true;
  Node *leaf = nullptr;
  for (;;) {
    SeekRecord s = seek(key);
    if (injecting) {
      leaf = s.leaf;
      if (leaf->key != key)
        return false;
      std::atomic<uintptr_t> &edge = edge_of(s.parent, goes_right(key, s.parent));
      uintptr_t seen = edge_to(leaf);
      if (edge.compare_exchange_strong(seen, seen | kFlag, kAcqRel, kAcquire)) {
        // Injected: from here on the key is this remove's to delete.
        injecting = false;
        if (cleanup(key, s))
          return true;
      } else if (address(seen) == leaf && (seen & kMarks)) {
        cleanup(key, s);
      }
    } else {
      // Our leaf is gone once a seek no longer ends at it (someone helped).
      if (s.leaf != leaf || cleanup(key, s))
        return true;
    }
  }
}

template <class L> bool EdgeExtLf<L>::cleanup(Key key, const SeekRecord &s) {
  Node *parent = s.parent;
  bool key_right = goes_right(key, parent);
  std::atomic<uintptr_t> *removed_edge = &edge_of(parent, key_right);
  std::atomic<uintptr_t> *sibling_edge = &edge_of(parent, !key_right);
  // The key's side is the removed leaf when flagged; otherwise it was tagged
  // as the sibling of a flagged leaf on the other side.
  if (!(removed_edge->load(kAcquire) & kFlag))
    sibling_edge = removed_edge;
  // Freeze the sibling edge (the paper's bit-test-and-set), keeping its flag:
  // a flagged sibling moves up still flagged, for its own remove to finish.
  uintptr_t sibling = sibling_edge->fetch_or(kTag, kAcqRel) & ~kTag;

  std::atomic<uintptr_t> &ancestor_edge = edge_of(s.ancestor, goes_right(key, s.ancestor));
  uintptr_t seen = edge_to(s.successor);
  if (!ancestor_edge.compare_exchange_strong(seen, sibling, kAcqRel, kAcquire))
    return false;
  retire_unlinked_chain(key, s, address(sibling));
  return true;
}

// After a successful cleanup CAS: successor..parent are unlinked, each with
// the leaf hanging off its frozen edge that is not on the key's path (at
// `parent`, the child that was not kept). Every edge involved is marked, so it
// still reads as it did when the CAS succeeded, and only this CAS's winner
// gets here.
template <class L>
void EdgeExtLf<L>::retire_unlinked_chain(Key key, const SeekRecord &s, const Node *kept) {
  Node *n = s.successor;
  for (;;) {
    if (n == s.parent) {
      Node *l = address(n->left.load(kRelaxed));
      Node *removed = l != kept ? l : address(n->right.load(kRelaxed));
      this->retire_node(removed);
      this->retire_node(n);
      return;
    }
    bool right = goes_right(key, n);
    Node *next = address(edge_of(n, right).load(kRelaxed));
    this->retire_node(address(edge_of(n, !right).load(kRelaxed)));
    this->retire_node(n);
    n = next;
  }
}

template <class L> std::string EdgeExtLf<L>::check_structure() const {
  auto leaf_with = [](uintptr_t edge, Key key) {
    const Node *n = address(edge);
    return (edge & kMarks) == 0 && n && n->key == key && !n->left.load(kAcquire) &&
           !n->right.load(kAcquire);
  };
  if (root_->key != kInf2 || root_->left.load(kAcquire) != edge_to(first_) ||
      !leaf_with(root_->right.load(kAcquire), kInf2) || first_->key != kInf1 ||
      !leaf_with(first_->right.load(kAcquire), kInf1))
    return "sentinel nodes R and S are not as created";

  // Every key under a node lies in [low, high); a routing node with key k
  // sends [low, k) left and [k, high) right and has two children.
  StructureErrors errors;
  auto check_edge = [&](uintptr_t edge) {
    if (edge & kMarks)
      errors.add("edge to key " + (address(edge) ? std::to_string(address(edge)->key) : "null") +
                 " still " + ((edge & kFlag) ? "flagged" : "tagged") + " after quiescence");
  };
  check_edge(first_->left.load(kAcquire));
  size_t inf0_leaves = 0;
  this->walk_in_bounds(kMinKey, kInf0 + 1, errors, [&](const Node *n, Key key, Key low, Key high) {
    if (key < low || key >= high)
      errors.add("key " + std::to_string(key) + " outside its subtree's range [" +
                 std::to_string(low) + ", " + std::to_string(high) + ")");
    uintptr_t l = n->left.load(kAcquire), r = n->right.load(kAcquire);
    if (!l && !r) {
      inf0_leaves += key == kInf0;
      return;
    }
    check_edge(l);
    check_edge(r);
    if (!address(l) || !address(r))
      errors.add("routing node " + std::to_string(key) + " lacks a child");
    if (key <= low)
      errors.add("routing key " + std::to_string(key) + " leaves its left subtree empty");
  });
  if (errors.none() && inf0_leaves != 1)
    errors.add("the kInf0 sentinel leaf appears " + std::to_string(inf0_leaves) + " times");
  return errors.report();
}

template class EdgeExtLf<EdgeExtLfBaselineLayout>;
template class EdgeExtLf<EdgeExtLfFixedLayout>;

std::unique_ptr<ConcurrentMap> make_edge_ext_lf(const TreeConfig &config) {
  return make_in_layout<EdgeExtLf, EdgeExtLfBaselineLayout, EdgeExtLfFixedLayout>(config);
}

} // namespace memlayout::trees
