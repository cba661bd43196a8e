// ext-lf (ext_lf.h): the algorithm of Ellen et al. with epoch reclamation.
//
// When each record may be retired (a thread is safe from a record retired
// after it entered its epoch):
//
// - Info records: when the CAS that replaces a CLEAN(info) word succeeds (the
//   next IFLAG or DFLAG on that node, or the MARK of it), by the thread whose
//   CAS it was, as setbench's record manager does. Until then a search may
//   read the word and later CAS it as an expected value. A DInfo that marked
//   its parent is also in that parent's word, but the parent was unlinked
//   before the grandparent's CLEAN(info) can be replaced.
// - The leaf an insert replaced, and the parent and leaf a delete unlinked:
//   by the thread whose CAS clears the operation's flag (IFLAG on p, DFLAG on
//   gp). A helper that may still CAS with one of them as the expected child
//   read that flag before it was cleared.
//
// One CAS needs more than that: a helper marking p expects p's update word as
// the delete saw it, pupdate, whose info record may have been replaced (and
// retired) before the helper started. The helper therefore reads p's word
// and then checks that gp still carries the delete's DFLAG: the delete's
// owner, which read pupdate inside its own epoch, is then still running, so
// the record was not yet freed and the word read is genuine; it was in p
// after the helper entered, so it stays unfreed for the helper's CAS.
// Child pointers are swung by comparing addresses (which child is `old`),
// not keys, so no helper reads a node it may not be protected from.
#include "ext_lf.h"

#include "structure_errors.h"
#include "tree_factories.h"

#include <algorithm>
#include <new>
#include <string>

namespace memlayout::trees {
namespace {

constexpr Key kInf1 = kMaxKey + 1; // sentinel leaves: every user key routes left of both
constexpr Key kInf2 = kMaxKey + 2;

using namespace ext_lf;

inline uintptr_t state_of(uintptr_t update) { return update & kStateMask; }
inline uintptr_t flagged(const void *info, uintptr_t state) {
  return reinterpret_cast<uintptr_t>(info) | state;
}
template <class Info> inline Info *info_of(uintptr_t update) {
  return reinterpret_cast<Info *>(update & ~kStateMask);
}

// Replaces `old`, a child of parent, by `replacement`, if it is still there.
template <class Node> void cas_child(Node *parent, Node *old, Node *replacement) {
  std::atomic<Node *> &child =
      parent->left.load(std::memory_order_acquire) == old ? parent->left : parent->right;
  child.compare_exchange_strong(old, replacement, std::memory_order_acq_rel);
}

} // namespace

template <class L>
ExtLf<L>::ExtLf(AllocPolicy policy)
    : Bst<ExtLf, L>("ext-lf", policy), info_kind_(this->records_.add_kind("info", sizeof(Info))) {
  Node *left = new_node(kInf1, 0, nullptr, nullptr);
  Node *right = new_node(kInf2, 0, nullptr, nullptr);
  root_ = new_node(kInf2, 0, left, right);
}

template <class L> ExtLf<L>::~ExtLf() {
  this->walk_nodes(root_, [&](Node *n) {
    // A linked node's info record is in no other linked node, and not retired.
    if (!L::is_leaf(n))
      if (Info *info = info_of<Info>(n->update.load(std::memory_order_relaxed)))
        this->records_.deallocate(info_kind_, info);
    this->delete_node(n);
  });
  reclaim_all();
}

template <class L>
typename L::Node *ExtLf<L>::new_node(Key key, Value value, Node *left, Node *right) {
  Node *n = new (this->records_.allocate(this->node_kind_, sizeof(Node))) Node{};
  n->key = key;
  n->value = value;
  n->update.store(kClean, std::memory_order_relaxed);
  n->left.store(left, std::memory_order_relaxed);
  n->right.store(right, std::memory_order_relaxed);
  L::set_leaf(n, left == nullptr);
  return n;
}

template <class L> typename L::Info *ExtLf<L>::new_info() {
  return new (this->records_.allocate(info_kind_, sizeof(Info))) Info{};
}

template <class L> void ExtLf<L>::retire_replaced_info(uintptr_t replaced) {
  if (Info *info = info_of<Info>(replaced))
    retire(this->records_, info_kind_, info);
}

// ---- Search and helping ----------------------------------------------------------

// The paper's search: down to a leaf, reading each parent's update word
// before the child pointer it follows.
template <class L> void ExtLf<L>::search(Key key, SearchResult &s) const {
  Node *gp = nullptr, *p = nullptr, *l = root_;
  uintptr_t gpupdate = 0, pupdate = 0;
  while (!L::is_leaf(l)) {
    gp = p;
    gpupdate = pupdate;
    p = l;
    pupdate = p->update.load(std::memory_order_acquire);
    l = (key < p->key ? p->left : p->right).load(std::memory_order_acquire);
  }
  s = SearchResult{gp, p, l, gpupdate, pupdate};
}

template <class L> void ExtLf<L>::help(uintptr_t update) {
  switch (state_of(update)) {
  case kIFlag:
    help_insert(info_of<Info>(update));
    break;
  case kMark:
    help_marked(info_of<Info>(update));
    break;
  case kDFlag:
    help_delete(info_of<Info>(update));
    break;
  default:
    break;
  }
}

template <class L> void ExtLf<L>::help_insert(Info *op) {
  cas_child(op->p, op->l, op->new_internal);
  uintptr_t flag = flagged(op, kIFlag);
  if (op->p->update.compare_exchange_strong(flag, flagged(op, kClean), std::memory_order_acq_rel))
    this->retire_node(op->l);
}

// Marks p for the delete, or backs the delete out when p changed since the
// delete read it. True when the delete took effect.
template <class L> bool ExtLf<L>::help_delete(Info *op) {
  uintptr_t dflag = flagged(op, kDFlag);
  uintptr_t mark = flagged(op, kMark);
  uintptr_t seen = op->p->update.load(std::memory_order_acquire);
  if (seen == op->pupdate) {
    if (op->gp->update.load(std::memory_order_acquire) != dflag)
      return op->p->update.load(std::memory_order_acquire) == mark; // decided by others
    if (op->p->update.compare_exchange_strong(seen, mark, std::memory_order_acq_rel)) {
      retire_replaced_info(op->pupdate);
      help_marked(op);
      return true;
    }
  }
  if (seen == mark) {
    help_marked(op);
    return true;
  }
  help(seen); // whatever changed p, so that it completes
  op->gp->update.compare_exchange_strong(dflag, flagged(op, kClean), std::memory_order_acq_rel);
  return false;
}

// p is marked: swing gp's child from p to l's sibling, then clear gp's DFLAG.
template <class L> void ExtLf<L>::help_marked(Info *op) {
  Node *p = op->p;
  Node *right = p->right.load(std::memory_order_acquire);
  Node *other = right == op->l ? p->left.load(std::memory_order_acquire) : right;
  cas_child(op->gp, p, other);
  uintptr_t flag = flagged(op, kDFlag);
  if (op->gp->update.compare_exchange_strong(flag, flagged(op, kClean),
                                             std::memory_order_acq_rel)) {
    this->retire_node(p);
    this->retire_node(op->l);
  }
}

// ---- Operations ------------------------------------------------------------------

template <class L> bool ExtLf<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  const Node *l;
  if constexpr (L::kLeanLookup) {
    l = root_;
    while (!L::is_leaf(l))
      l = (key < l->key ? l->left : l->right).load(std::memory_order_acquire);
  } else {
    SearchResult s;
    search(key, s);
    l = s.l;
  }
  if (l->key != key)
    return false;
  *value = l->value;
  return true;
}

template <class L> bool ExtLf<L>::insert(Key key, Value value) {
  EpochGuard guard;
  // Allocated at the first attempt in ASCYLIB's order (leaf, sibling,
  // internal node, info) and reused by later ones until published.
  Node *leaf = nullptr, *sibling = nullptr, *internal = nullptr;
  Info *op = nullptr;
  for (;;) {
    SearchResult s;
    search(key, s);
    if (s.l->key == key) {
      if (leaf) {
        for (Node *n : {leaf, sibling, internal})
          this->delete_node(n);
        this->records_.deallocate(info_kind_, op);
      }
      return false;
    }
    if (state_of(s.pupdate) != kClean) {
      help(s.pupdate);
      continue;
    }
    if (!leaf) {
      leaf = new_node(key, value, nullptr, nullptr);
      sibling = new_node(s.l->key, s.l->value, nullptr, nullptr);
      internal = new_node(std::max(key, s.l->key), 0, leaf, sibling);
      op = new_info();
    }
    sibling->key = s.l->key; // a copy of l: l itself leaves the tree
    sibling->value = s.l->value;
    internal->key = std::max(key, s.l->key);
    internal->left.store(key < s.l->key ? leaf : sibling, std::memory_order_relaxed);
    internal->right.store(key < s.l->key ? sibling : leaf, std::memory_order_relaxed);
    op->p = s.p;
    op->l = s.l;
    op->new_internal = internal;
    uintptr_t expected = s.pupdate;
    if (s.p->update.compare_exchange_strong(expected, flagged(op, kIFlag),
                                            std::memory_order_acq_rel)) {
      retire_replaced_info(s.pupdate);
      help_insert(op);
      return true;
    }
    help(expected);
  }
}

template <class L> bool ExtLf<L>::remove(Key key) {
  EpochGuard guard;
  Info *op = nullptr; // unpublished, reused across attempts
  for (;;) {
    SearchResult s;
    search(key, s);
    if (s.l->key != key) {
      if (op)
        this->records_.deallocate(info_kind_, op);
      return false;
    }
    if (state_of(s.gpupdate) != kClean) {
      help(s.gpupdate);
      continue;
    }
    if (state_of(s.pupdate) != kClean) {
      help(s.pupdate);
      continue;
    }
    if (!op)
      op = new_info();
    op->gp = s.gp;
    op->p = s.p;
    op->l = s.l;
    op->pupdate = s.pupdate;
    uintptr_t expected = s.gpupdate;
    if (s.gp->update.compare_exchange_strong(expected, flagged(op, kDFlag),
                                             std::memory_order_acq_rel)) {
      retire_replaced_info(s.gpupdate);
      if (help_delete(op))
        return true;
      op = nullptr; // published: gp holds it until its next update retires it
    } else {
      help(expected);
    }
  }
}

// ---- Quiescent walks -------------------------------------------------------------

template <class L> std::string ExtLf<L>::check_structure() const {
  if (root_->key != kInf2 || L::is_leaf(root_))
    return "root is not the routing node " + std::to_string(kInf2);
  const Node *right_sentinel = root_->right.load();
  if (!L::is_leaf(right_sentinel) || right_sentinel->key != kInf2)
    return "root's right child is not the sentinel leaf " + std::to_string(kInf2);
  if (state_of(root_->update.load()) != kClean)
    return "root is flagged or marked";
  // Keys in a subtree lie in [low, high).
  StructureErrors errors;
  size_t inf1_leaves = 0;
  this->walk_in_bounds(kMinKey, kInf2, errors, [&](const Node *n, Key key, Key low, Key high) {
    std::string at = "node " + std::to_string(key) + ": ";
    const Node *left = n->left.load(), *right = n->right.load();
    if (L::is_leaf(n) != (left == nullptr) || (left == nullptr) != (right == nullptr))
      errors.add(at + "leaf flag and children disagree");
    if (key < low || key >= high)
      errors.add(at + "outside its subtree's range [" + std::to_string(low) + ", " +
                 std::to_string(high) + ")");
    if (L::is_leaf(n)) {
      if (key == kInf1)
        ++inf1_leaves;
      else if (key > kMaxKey)
        errors.add(at + "a leaf key outside the user range");
    } else if (uintptr_t update = n->update.load(); state_of(update) != kClean) {
      errors.add(at + "still flagged or marked (state " + std::to_string(state_of(update)) + ")");
    }
  });
  if (inf1_leaves != 1 && errors.none())
    errors.add("the sentinel leaf " + std::to_string(kInf1) + " appears " +
               std::to_string(inf1_leaves) + " times");
  return errors.report();
}

template class ExtLf<ExtLfBaselineLayout>;
template class ExtLf<ExtLfFixedLayout>;

std::unique_ptr<ConcurrentMap> make_ext_lf(const TreeConfig &config) {
  return make_in_layout<ExtLf, ExtLfBaselineLayout, ExtLfFixedLayout>(config);
}

} // namespace memlayout::trees
