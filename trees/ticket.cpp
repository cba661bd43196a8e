// BST-TK (ticket.h). The tree starts as a routing root with two sentinel
// leaves, kMinKey - 1 on the left and kMaxKey + 1 on the right; user keys all
// route left, so every user leaf has a parent and a grandparent, which a
// remove needs.
#include "ticket.h"

#include "search_step.h"
#include "spin_lock.h"
#include "structure_errors.h"
#include "tree_factories.h"

#include <new>
#include <string>

namespace memlayout::trees {
namespace {

constexpr Key kLeftSentinel = kMinKey - 1;
constexpr Key kRootKey = kMaxKey + 1;

// Keys < routing key go left.
inline int direction(Key key, Key routing) { return key >= routing ? 1 : 0; }

} // namespace

template <class L> Ticket<L>::Ticket(AllocPolicy policy) : Bst<Ticket, L>("ticket", policy) {
  Node *min_leaf = new_node(kLeftSentinel, 0, nullptr, nullptr);
  Node *max_leaf = new_node(kRootKey, 0, nullptr, nullptr);
  root_ = new_node(kRootKey, 0, min_leaf, max_leaf);
}

template <class L> Ticket<L>::~Ticket() { this->free_nodes(root_); }

template <class L>
typename L::Node *Ticket<L>::new_node(Key key, Value value, Node *left, Node *right) {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  Node *n = new (p) Node{};
  n->key = key;
  L::set_value(n, value);
  n->child[0].store(left, std::memory_order_relaxed);
  n->child[1].store(right, std::memory_order_relaxed);
  L::mark_leaf(n, left == nullptr);
  return n;
}

template <class L> bool Ticket<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  Node *n = root_;
  while (!L::is_leaf(n)) // a routing node's key word carries no leaf flag
    n = load_child(n->child[0], n->child[1], key >= n->key);
  if (L::key_of(n) != key)
    return false;
  *value = L::value_of(n);
  return true;
}

template <class L> bool Ticket<L>::insert(Key key, Value value) {
  EpochGuard guard;
  Node *leaf = nullptr;    // allocated on the first attempt that needs them,
  Node *routing = nullptr; // kept across retries
  // A failed try-lock means another update got there first: retry at once,
  // as bst-tk does, with back_off (spin_lock.h) giving the CPU away now and
  // then in case the winner was preempted while holding the lock.
  for (unsigned attempt = 0;; back_off(attempt++)) {
    Node *pred;
    uint64_t pred_seen;
    int dir;
    Node *curr = root_;
    do {
      pred = curr;
      pred_seen = pred->lock.observe(); // before the child it guards
      dir = direction(key, L::key_of(pred));
      curr = pred->child[dir].load(std::memory_order_acquire);
    } while (!L::is_leaf(curr));

    if (L::key_of(curr) == key) {
      if (leaf) {
        this->delete_node(leaf);
        this->delete_node(routing);
      }
      return false;
    }
    if (!leaf) {
      leaf = new_node(key, value, nullptr, nullptr);
      routing = new_node(0, 0, leaf, leaf);
    }
    if (!pred->lock.try_lock_half(dir, pred_seen))
      continue;
    // The routing node takes the larger key: smaller keys go left of it.
    if (key < L::key_of(curr)) {
      routing->key = L::key_of(curr);
      routing->child[0].store(leaf, std::memory_order_relaxed);
      routing->child[1].store(curr, std::memory_order_relaxed);
    } else {
      routing->key = key;
      routing->child[0].store(curr, std::memory_order_relaxed);
      routing->child[1].store(leaf, std::memory_order_relaxed);
    }
    pred->child[dir].store(routing, std::memory_order_release);
    pred->lock.unlock_half(dir);
    return true;
  }
}

template <class L> bool Ticket<L>::remove(Key key) {
  EpochGuard guard;
  for (unsigned attempt = 0;; back_off(attempt++)) {
    Node *gpred = nullptr, *pred = nullptr;
    uint64_t gpred_seen = 0, pred_seen = 0;
    int gdir = 0, dir = 0;
    Node *curr = root_;
    do {
      gpred = pred;
      gpred_seen = pred_seen;
      gdir = dir;
      pred = curr;
      pred_seen = pred->lock.observe();
      dir = direction(key, L::key_of(pred));
      curr = pred->child[dir].load(std::memory_order_acquire);
    } while (!L::is_leaf(curr));

    if (L::key_of(curr) != key)
      return false;
    // gpred's pointer to pred, then pred for good: both must be as seen.
    if (!gpred->lock.try_lock_half(gdir, gpred_seen))
      continue;
    if (!pred->lock.try_lock_both_forever(pred_seen)) {
      gpred->lock.revert_half(gdir);
      continue;
    }
    Node *sibling = pred->child[1 - dir].load(std::memory_order_relaxed);
    gpred->child[gdir].store(sibling, std::memory_order_release);
    gpred->lock.unlock_half(gdir);
    this->retire_node(curr);
    this->retire_node(pred);
    return true;
  }
}

template <class L> std::string Ticket<L>::check_structure() const {
  if (L::key_of(root_) != kRootKey || L::is_leaf(root_))
    return "root is not the routing sentinel";
  const Node *max_leaf = root_->child[1].load(std::memory_order_relaxed);
  if (!max_leaf || !L::is_leaf(max_leaf) || L::key_of(max_leaf) != kRootKey)
    return "root's right child is not the kMaxKey + 1 sentinel leaf";

  // Keys in a subtree lie in [lo, hi).
  StructureErrors errors;
  bool min_leaf_seen = false;
  this->walk_in_bounds(kLeftSentinel, kRootKey, errors,
                       [&](const Node *n, Key key, Key lo, Key hi) {
                         std::string at = "node " + std::to_string(key) + ": ";
                         if (key < lo || key >= hi)
                           errors.add(at + "search order violated");
                         if ((L::kLeavesHaveLocks || !L::is_leaf(n)) && n->lock.any_held())
                           errors.add(at + "a lock is held (or a removed node is reachable)");
                         bool has_left = child(n, false), has_right = child(n, true);
                         if (L::is_leaf(n)) {
                           if (has_left || has_right)
                             errors.add(at + "a leaf has children");
                           min_leaf_seen |= key == kLeftSentinel;
                         } else if (!has_left || !has_right) {
                           errors.add(at + "a routing node lacks a child");
                         }
                       });
  if (!min_leaf_seen && errors.none())
    errors.add("the kMinKey - 1 sentinel leaf is missing");
  return errors.report();
}

template class Ticket<TicketBaselineLayout>;
template class Ticket<TicketFixedLayout>;

std::unique_ptr<ConcurrentMap> make_ticket(const TreeConfig &config) {
  return make_in_layout<Ticket, TicketBaselineLayout, TicketFixedLayout>(config);
}

} // namespace memlayout::trees
