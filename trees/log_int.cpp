// log-int (log_int.h): the algorithm of the paper, unbalanced variant.
//
// Locks: an update takes the succLock of the predecessor p of its key (and,
// to remove s, s's own succLock): while p.succLock is held nothing is
// inserted between p and p.succ and neither is removed. Tree changes then
// take treeLocks; a thread holding treeLocks only ever blocks on the parent
// of a node it holds (lock_parent) and only try-locks below it, so waits go
// upward and cannot form a cycle.
//
// Shared fields are sequentially consistent atomics (the paper's proofs
// assume Java volatiles); on x86 that costs only the stores, which updates
// make a few of under locks anyway. Keys and values never change after a
// node is published.
//
// One defect of the published algorithm (the paper's contains, ASCYLIB's
// bst_contains), found by memlayout-bench --linearizable (issue 12), fixed:
//
// 1. A lookup could miss a key inserted before it began. A removal marks its
//    node and takes it off the list, releases the succLocks, and only then
//    takes it out of the tree. In between, an insert of the same key links a
//    new node after the old one's predecessor; a lookup whose tree search
//    stops at the old, marked node (the first node with the key on the path)
//    returned "absent". Starting the list walk from any node already off the
//    list is wrong the same way: its succ is frozen and skips what was
//    inserted since. The walk now starts from a node it read unmarked, so
//    one the list held during the lookup: from there a succ walk is the lazy
//    list's contains, linearizable by its usual argument (every node it
//    reaches was on the list at some moment of the walk). Marked nodes' pred
//    pointers lead to smaller keys, and the min sentinel is never marked, so
//    the walk left ends. Seen in 2 of 1 364 runs of the stress matrix on 2
//    CPUs (a remover preempted between the two steps).
//
//    A remover also tags its node's succ pointer (its low bit) when it marks
//    the node, before it unlinks it, and the walk tests that tag rather than
//    the mark: the walk reads succ anyway, while the mark of the published
//    layout is on a baseline node's second line, which the published lookup
//    reads only on a hit. A succ read untagged was read while its node was on
//    the list. Nothing writes a marked node's succ again (writers hold its
//    succLock and find it marked), so the tag is permanent, and every reader
//    that may reach a removed node strips it (succ_of).
//
// And one of reclamation, found by ThreadSanitizer (issue 12; ours, the
// paper leaves memory to Java's collector):
//
// 2. A node freed while an update still locked it. A removed node X stays
//    in the tree, its pred frozen, until its remover takes it out; in that
//    window X's predecessor P can be removed and retired, and a thread that
//    enters afterwards, finds X in the tree and follows X.pred (insert's and
//    remove's p, lookup's walk left) reaches P, which was unreachable before
//    that thread announced its epoch: epoch reclamation's two epochs do not
//    cover it. Everything such a walk reaches was retired no earlier than
//    X's remover entered (e_X), and the walker entered while that remover
//    was still inside (so at e_X + 1 at most, and it holds the epoch at
//    e_X + 2 at most): one more epoch (freed at tag + 3) covers the walk.
//    TSan saw it in about 1 of 150 runs of the 4-thread, 64-key generic
//    test on 2 CPUs (a free racing with p->succ under p's lock).
#include "log_int.h"

#include "search_step.h"
#include "structure_errors.h"
#include "tree_factories.h"

#include <new>
#include <string>
#include <unordered_set>
#include <vector>

namespace memlayout::trees {
namespace {

constexpr Key kMinSentinel = kMinKey - 1;
constexpr Key kMaxSentinel = kMaxKey + 1;

// A removed node's succ carries kRemovedTag (fix 1).
constexpr uintptr_t kRemovedTag = 1;

template <class N> N *with_removed_tag(N *n) {
  return reinterpret_cast<N *>(reinterpret_cast<uintptr_t>(n) | kRemovedTag);
}
template <class N> bool has_removed_tag(const N *n) {
  return reinterpret_cast<uintptr_t>(n) & kRemovedTag;
}
template <class N> N *without_tag(N *n) {
  return reinterpret_cast<N *>(reinterpret_cast<uintptr_t>(n) & ~kRemovedTag);
}

template <class L> void lock(typename L::Lock &l) { L::lock(l); }
template <class L> void unlock(typename L::Lock &l) { L::unlock(l); }

// Replaces old_child under parent (both tree-locked) by new_child.
template <class N> void update_child(N *parent, N *old_child, N *new_child) {
  if (parent->left.load() == old_child)
    parent->left.store(new_child);
  else
    parent->right.store(new_child);
  if (new_child)
    new_child->parent.store(parent);
}

} // namespace

template <class L> LogInt<L>::LogInt(AllocPolicy policy) : Bst<LogInt, L>("log-int", policy) {
  min_ = new_node(kMinSentinel, 0);
  root_ = new_node(kMaxSentinel, 0);
  root_->parent.store(min_, std::memory_order_relaxed);
  root_->pred.store(min_, std::memory_order_relaxed);
  min_->right.store(root_, std::memory_order_relaxed);
  min_->succ.store(root_, std::memory_order_release);
}

// Quiescent: the list holds every node, sentinels included.
template <class L> LogInt<L>::~LogInt() {
  for (Node *n = min_; n;) {
    Node *next = without_tag(n->succ.load(std::memory_order_relaxed));
    this->delete_node(n);
    n = next;
  }
  reclaim_all();
}

template <class L> typename L::Node *LogInt<L>::new_node(Key key, Value value) {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  Node *n = new (p) Node{};
  n->key = key;
  n->value = value;
  L::init_lock(n->tree_lock);
  L::init_lock(n->succ_lock);
  return n;
}

// The last node on key's search path: the key's node or a neighbour of the
// key's place, possibly stale; callers finish on the list.
template <class L> typename L::Node *LogInt<L>::search(Key key) const {
  Node *n = root_;
  for (;;) {
    Key k = n->key;
    if (k == key)
      return n;
    Node *child = load_child(n->left, n->right, k < key);
    if (!child)
      return n;
    n = child;
  }
}

// The paper's contains, except that the list walk starts from a node seen
// unmarked (fix 1 at the top of this file): from `n`, the node a search for
// key ended on, the node that decides whether key is present. Key is present
// iff the result holds it unmarked.
template <class L> typename L::Node *LogInt<L>::list_position(Node *n, Key key) {
  if (n->key == key && !n->mark.load())
    return n;
  Node *next;
  for (;;) {
    while (n->key >= key)
      n = n->pred.load();
    next = n->succ.load();
    if (!has_removed_tag(next))
      break;
    n = n->pred.load();
  }
  while (next->key < key)
    next = succ_of(next);
  return next;
}

template <class L> typename L::Node *LogInt<L>::succ_of(const Node *n) {
  return without_tag(n->succ.load());
}

// The list half of removing s (p.succLock and s.succLock held, p = s.pred):
// the mark is the removal's linearization point; the tag follows it before
// s leaves the list (fix 1).
template <class L> void LogInt<L>::unlink_from_list(Node *p, Node *s) {
  s->mark.store(true);
  Node *s_succ = s->succ.load();
  s->succ.store(with_removed_tag(s_succ));
  s_succ->pred.store(p);
  p->succ.store(s_succ);
}

template <class L> bool LogInt<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  Node *n = list_position(search(key), key);
  if (n->key != key || n->mark.load())
    return false;
  *value = n->value;
  return true;
}

template <class L> bool LogInt<L>::insert(Key key, Value value) {
  EpochGuard guard;
  for (;;) {
    Node *node = search(key);
    // A key already present fails without a lock, as the published code's
    // RO_FAIL build does (its lookup's walk: fix 1 applies).
    Node *at = list_position(node, key);
    if (at->key == key && !at->mark.load())
      return false;
    Node *p = node->key >= key ? node->pred.load() : node;
    lock<L>(p->succ_lock);
    Node *s = p->succ.load();
    if (key > p->key && key <= s->key && !p->mark.load()) {
      if (s->key == key) {
        unlock<L>(p->succ_lock);
        return false;
      }
      Node *n = new_node(key, value);
      Node *parent = choose_parent(p, s, node); // returns it tree-locked
      n->succ.store(s, std::memory_order_relaxed);
      n->pred.store(p, std::memory_order_relaxed);
      n->parent.store(parent, std::memory_order_relaxed);
      p->succ.store(n); // the insertion's linearization point
      s->pred.store(n);
      unlock<L>(p->succ_lock);
      (key > parent->key ? parent->right : parent->left).store(n);
      unlock<L>(parent->tree_lock);
      return true;
    }
    unlock<L>(p->succ_lock); // p changed under us: search again
  }
}

// p and s are adjacent on the list (p.succLock held), so in the tree either s
// is the leftmost node of p's right subtree or p the rightmost of s's left
// one: one of p.right and s.left is free for the new node. Tries the search's
// last node first, as the paper does.
template <class L>
typename L::Node *LogInt<L>::choose_parent(Node *p, Node *s, Node *first_candidate) {
  Node *candidate = (first_candidate == p || first_candidate == s) ? first_candidate : p;
  for (unsigned attempt = 0;; ++attempt) {
    lock<L>(candidate->tree_lock);
    if (candidate == p) {
      if (!p->right.load())
        return p;
      unlock<L>(p->tree_lock);
      candidate = s;
    } else {
      if (!s->left.load())
        return s;
      unlock<L>(s->tree_lock);
      candidate = p;
    }
    if (attempt > 0)
      back_off(attempt); // a removal is moving nodes between them
  }
}

template <class L> bool LogInt<L>::remove(Key key) {
  EpochGuard guard;
  for (;;) {
    Node *node = search(key);
    Node *at = list_position(node, key); // an absent key fails without a lock
    if (at->key != key || at->mark.load())
      return false;
    Node *p = node->key >= key ? node->pred.load() : node;
    lock<L>(p->succ_lock);
    Node *s = p->succ.load();
    if (key > p->key && key <= s->key && !p->mark.load()) {
      if (s->key > key) {
        unlock<L>(p->succ_lock);
        return false;
      }
      lock<L>(s->succ_lock);
      bool has_two_children = acquire_tree_locks(s);
      lock_parent(s);
      unlink_from_list(p, s);
      unlock<L>(s->succ_lock);
      unlock<L>(p->succ_lock);
      remove_from_tree(s, has_two_children);
      this->retire_node(s, /*one_more_epoch=*/true); // fix 2
      return true;
    }
    unlock<L>(p->succ_lock);
  }
}

// Locks node's current parent (not marked for removal) and returns it.
template <class L> typename L::Node *LogInt<L>::lock_parent(Node *node) {
  for (unsigned attempt = 0;; ++attempt) {
    Node *p = node->parent.load();
    lock<L>(p->tree_lock);
    if (node->parent.load() == p && !p->mark.load())
      return p;
    unlock<L>(p->tree_lock);
    back_off(attempt);
  }
}

// Locks node's treeLock and, if node has two children, those of its
// successor and the successor's parent, which its removal rewires. Those
// lie below node, so they are only try-locked: on failure everything is
// released and retried. Returns whether node has two children.
template <class L> bool LogInt<L>::acquire_tree_locks(Node *node) {
  for (unsigned attempt = 0;; ++attempt) {
    lock<L>(node->tree_lock);
    if (!node->left.load() || !node->right.load())
      return false;
    Node *s = succ_of(node);
    Node *s_parent = s->parent.load();
    bool locked_parent = false;
    if (s_parent != node) {
      if (!L::try_lock(s_parent->tree_lock)) {
        unlock<L>(node->tree_lock);
        back_off(attempt);
        continue;
      }
      locked_parent = true;
      if (s_parent != s->parent.load() || s_parent->mark.load()) {
        unlock<L>(s_parent->tree_lock);
        unlock<L>(node->tree_lock);
        back_off(attempt);
        continue;
      }
    }
    if (!L::try_lock(s->tree_lock)) {
      if (locked_parent)
        unlock<L>(s_parent->tree_lock);
      unlock<L>(node->tree_lock);
      back_off(attempt);
      continue;
    }
    return true;
  }
}

// node is off the list; every treeLock acquire_tree_locks and lock_parent
// took is held and released here. With two children, node's successor s
// (leftmost in node's right subtree, so without a left child) leaves its
// place to its right child and takes node's.
template <class L> void LogInt<L>::remove_from_tree(Node *node, bool has_two_children) {
  Node *parent = node->parent.load();
  if (!has_two_children) {
    Node *child = node->right.load();
    if (!child)
      child = node->left.load();
    update_child(parent, node, child);
    unlock<L>(parent->tree_lock);
    unlock<L>(node->tree_lock);
    return;
  }
  Node *s = succ_of(node);
  Node *s_parent = s->parent.load();
  update_child(s_parent, s, s->right.load());
  Node *left = node->left.load();
  Node *right = node->right.load(); // s's old place if s was node's right child
  s->left.store(left);
  s->right.store(right);
  left->parent.store(s);
  if (right)
    right->parent.store(s);
  update_child(parent, node, s);
  unlock<L>(parent->tree_lock);
  unlock<L>(node->tree_lock);
  if (s_parent != node)
    unlock<L>(s_parent->tree_lock);
  unlock<L>(s->tree_lock);
}

// Tree: search order, parent pointers, no marked node. List: ascending keys,
// pred the mirror of succ, no marked node, and exactly the tree's nodes in
// the tree's in-order.
template <class L> std::string LogInt<L>::check_structure() const {
  StructureErrors errors;
  if (min_->left.load() || min_->right.load() != root_ || root_->parent.load() != min_)
    errors.fail(min_, "sentinels are not linked as min -> right -> root");
  if (root_->right.load())
    errors.fail(root_, "the root sentinel has a right child");

  // In-order walk of the tree, checking bounds and parents on the way down.
  struct Frame {
    const Node *n;
    Key lo, hi; // exclusive
  };
  std::vector<const Node *> in_order;
  std::vector<Frame> stack;
  std::unordered_set<const Node *> seen;
  const Node *n = root_->left.load();
  Key lo = kMinSentinel, hi = kMaxSentinel;
  const Node *expected_parent = root_;
  while (n || !stack.empty()) {
    while (n) {
      if (!seen.insert(n).second) {
        errors.fail(n, "reached twice (cycle or shared subtree)");
        return errors.report();
      }
      if (n->key <= lo || n->key >= hi)
        errors.fail(n, "out of search order");
      if (n->parent.load() != expected_parent)
        errors.fail(n, "parent pointer does not point to its parent");
      if (n->mark.load())
        errors.fail(n, "marked node still in the tree");
      stack.push_back(Frame{n, lo, hi});
      expected_parent = n;
      hi = n->key;
      n = n->left.load();
    }
    Frame f = stack.back();
    stack.pop_back();
    in_order.push_back(f.n);
    n = f.n->right.load();
    expected_parent = f.n;
    lo = f.n->key;
    hi = f.hi;
  }

  size_t i = 0;
  const Node *prev = min_;
  for (const Node *l = min_->succ.load(); l; prev = l, l = succ_of(l)) {
    if (has_removed_tag(l->succ.load()))
      errors.fail(l, "removal tag on a node still on the list");
    if (l->pred.load() != prev)
      errors.fail(l, "pred does not mirror succ");
    if (l->key <= prev->key)
      errors.fail(l, "list not ascending");
    if (l->mark.load())
      errors.fail(l, "marked node still on the list");
    if (l == root_)
      break;
    if (i >= in_order.size() || in_order[i] != l) {
      errors.fail(l, "list and tree in-order differ");
      break;
    }
    if (++i > seen.size() + 1)
      break; // a cycle on the list: already reported as a mismatch
  }
  if (prev->succ.load() != root_ && errors.none())
    errors.fail(prev, "list does not end at the root sentinel");
  if (i != in_order.size() && errors.none())
    errors.add("list has " + std::to_string(i) + " nodes, tree " + std::to_string(in_order.size()));
  return errors.report();
}

template class LogInt<LogIntBaselineLayout>;
template class LogInt<LogIntFixedLayout>;

std::unique_ptr<ConcurrentMap> make_log_int(const TreeConfig &config) {
  return make_in_layout<LogInt, LogIntBaselineLayout, LogIntFixedLayout>(config);
}

} // namespace memlayout::trees
