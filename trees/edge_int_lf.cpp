// edge-int-lf (edge_int_lf.h): Ramachandran and Mittal's algorithm with the
// paper's phase names (seek, inject, find and mark successor, remove
// successor, cleanup, help), plus value promotion and epoch-based reclamation.
//
// Reclamation: the CAS that unlinks a node retires it: a simple delete's
// cleanup retires the target, a complex delete's cleanup retires the target
// it replaces by a copy, and remove_successor retires the successor. Every
// unlinked node's edges are frozen (delete or promote flags), so whatever a
// traversal reaches from a node it reached during its epoch was reachable
// during that epoch. The one exception is the address kept in a null edge:
// it is only dereferenced on a successor's left edge, whose target cannot be
// replaced before the successor is unlinked; find_smallest never follows a
// null right edge (the published code does, after a successor right below
// its target is gone).
#include "edge_int_lf.h"

#include "search_step.h"
#include "structure_errors.h"
#include "tree_factories.h"

#include <new>
#include <stdexcept>

namespace memlayout::trees {

namespace {
constexpr auto kAcquire = std::memory_order_acquire;
constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kRelease = std::memory_order_release;
constexpr auto kAcqRel = std::memory_order_acq_rel;
using Promotion = EdgeIntLfPromotion;
} // namespace

template <class L>
EdgeIntLf<L>::EdgeIntLf(AllocPolicy policy) : Bst<EdgeIntLf, L>("edge-int-lf", policy) {
  state_kind_ = this->records_.add_kind("state", sizeof(StateRecord));
  t_ = new_node(L::kSentinelKey, 0, kNull, kNull);
  s_ = new_node(L::kSentinelKey, 0, kNull, edge_to(t_));
  r_ = new_node(L::kSentinelKey, 0, kNull, edge_to(s_));
}

template <class L> EdgeIntLf<L>::~EdgeIntLf() { this->free_nodes(r_); }

template <class L>
typename EdgeIntLf<L>::Node *EdgeIntLf<L>::new_node(uint64_t key_word, Value value, uintptr_t left,
                                                    uintptr_t right) {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  if (reinterpret_cast<uintptr_t>(p) & kBits) {
    this->delete_node(p);
    throw std::runtime_error("edge-int-lf: the allocator returned a node that is not 16-byte "
                             "aligned; child pointers need their 4 low bits");
  }
  Node *n = new (p) Node;
  L::key_word(n).store(key_word, kRelaxed);
  n->child[kLeft].store(left, kRelaxed);
  n->child[kRight].store(right, kRelaxed);
  L::init_extra(n);
  n->value.store(value, kRelaxed);
  return n;
}

template <class L> typename EdgeIntLf<L>::StateRecord *EdgeIntLf<L>::new_state() {
  return new (this->records_.allocate(state_kind_, sizeof(StateRecord))) StateRecord{};
}

// ---------------------------------------------------------------------------
// Traversals

// The published seek. A traversal that misses the key checks the "anchor",
// the last node whose right edge it followed: if a complex delete changed
// the anchor's key, the key may have moved above the path, so it restarts;
// if the anchor is being deleted but kept its key, two traversals in a row
// with the same anchor settle it (the earlier one's result stands).
template <class L> void EdgeIntLf<L>::seek(Key key, SeekRecord *s) const {
  SeekRecord earlier{};
  Node *earlier_anchor = s_;
  Key earlier_anchor_key = key_of(s_);
  for (;;) {
    Edge previous{r_, s_, kRight};
    Edge last{s_, t_, kRight};
    Node *anchor = s_;
    Key anchor_key = key_of(s_);
    Node *curr = t_; // T sends every key left
    Key curr_key = 0;
    int which = kLeft;
    uintptr_t e = t_->child[kLeft].load(kAcquire);
    for (;;) {
      if (e & kNull) {
        *s = {last, previous, {curr, address(e), which}};
        break;
      }
      if (which == kRight) {
        anchor = curr;
        anchor_key = curr_key;
      }
      Node *next = address(e);
      previous = last;
      last = {curr, next, which};
      curr = next;
      curr_key = key_of(curr);
      which = key < curr_key ? kLeft : kRight;
      e = load_child(curr->child[kLeft], curr->child[kRight], which == kRight);
      if (key == curr_key) {
        *s = {last, previous, {curr, address(e), which}};
        return;
      }
    }
    if (key_of(anchor) == anchor_key) {
      if (!(anchor->child[kRight].load(kAcquire) & (kDelete | kPromote)))
        return;
      if (anchor == earlier_anchor && anchor_key == earlier_anchor_key) {
        *s = earlier;
        return;
      }
    }
    earlier = *s;
    earlier_anchor = anchor;
    earlier_anchor_key = anchor_key;
  }
}

// seek without the edges and record copies: the node the traversal ended at
// (holding the key, or where it would hang), or on a repeated anchor the
// earlier traversal's. The fixed layout's lookups use it (the study's lean
// lookups) and, like the published lookup after its seek, read that node's
// key again before answering. This used to answer "absent" from the keys read
// on the way down; the soak of issue 12 found such lookups missing a present
// key (6 of 600 runs of 8 threads on 256 keys, 80/10/10, fixed layout; none
// of 400 with the seek-based lookup). Which key changes under the
// traversal in between was not pinned down; with the re-read, 0 of 600.
template <class L> typename EdgeIntLf<L>::Node *EdgeIntLf<L>::find(Key key) const {
  Node *earlier_anchor = s_;
  Key earlier_anchor_key = key_of(s_);
  Node *earlier_last = nullptr;
  for (;;) {
    Node *anchor = s_;
    Key anchor_key = key_of(s_);
    Node *curr = t_;
    Key curr_key = 0;
    int which = kLeft;
    uintptr_t e = t_->child[kLeft].load(kAcquire);
    while (!(e & kNull)) {
      if (which == kRight) {
        anchor = curr;
        anchor_key = curr_key;
      }
      curr = address(e);
      curr_key = key_of(curr);
      if (key == curr_key)
        return curr;
      which = key < curr_key ? kLeft : kRight;
      e = load_child(curr->child[kLeft], curr->child[kRight], which == kRight);
    }
    if (key_of(anchor) == anchor_key) {
      if (!(anchor->child[kRight].load(kAcquire) & (kDelete | kPromote)))
        return curr;
      if (anchor == earlier_anchor && anchor_key == earlier_anchor_key)
        return earlier_last;
    }
    earlier_last = curr;
    earlier_anchor = anchor;
    earlier_anchor_key = anchor_key;
  }
}

// The value of `key` in `n`, a node a traversal found holding it; false when
// n no longer holds it and the lookup must search again.
template <class L> bool EdgeIntLf<L>::read_value(Node *n, Key key, Value *value) const {
  std::atomic<uint64_t> &word = L::key_word(n);
  uint64_t w = word.load(kAcquire);
  if (L::key_of(w) != key)
    return false;
  if (!L::is_marked(w)) {
    // The key is the node's own, and so is the value unless a promotion
    // overwrote it, which marks the key first.
    Value v = n->value.load(kAcquire);
    if (word.load(kAcquire) != w)
      return false;
    *value = v;
    return true;
  }
  // A promoted key: until the value is promoted too, the successor that
  // brought it is still linked, leftmost in the right subtree.
  for (;;) {
    if (L::promotion(n, w) >= Promotion::kValuePromoted) {
      *value = n->value.load(kAcquire);
      return true;
    }
    Node *leftmost = nullptr;
    for (uintptr_t e = n->child[kRight].load(kAcquire); !(e & kNull);
         e = leftmost->child[kLeft].load(kAcquire))
      leftmost = address(e);
    if (leftmost && L::key_word(leftmost).load(kAcquire) == static_cast<uint64_t>(key)) {
      *value = leftmost->value.load(kAcquire);
      return true;
    }
    w = word.load(kAcquire); // the successor is gone: its remover promoted the value
  }
}

// The leftmost node of `node`'s right subtree, as an edge into it (`last`)
// and the edge above (`previous`). False when the right edge is null.
template <class L> bool EdgeIntLf<L>::find_smallest(Node *node, SeekRecord *s) const {
  uintptr_t r = node->child[kRight].load(kAcquire);
  if (r & kNull)
    return false;
  Edge last{node, address(r), kRight};
  Edge previous = last;
  for (;;) {
    uintptr_t l = last.child->child[kLeft].load(kAcquire);
    if (l & kNull)
      break;
    previous = last;
    last = {last.child, address(l), kLeft};
  }
  s->last = last;
  s->previous = previous;
  return true;
}

// ---------------------------------------------------------------------------
// Operations

template <class L> bool EdgeIntLf<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  for (;;) {
    Node *n;
    if constexpr (L::kLeanLookup) {
      n = find(key);
      n = key_of(n) == key ? n : nullptr;
    } else {
      SeekRecord s;
      seek(key, &s);
      n = key_of(s.last.child) == key ? s.last.child : nullptr;
    }
    if (!n)
      return false;
    if (read_value(n, key, value))
      return true;
  }
}

template <class L> bool EdgeIntLf<L>::insert(Key key, Value value) {
  EpochGuard guard;
  Node *fresh = nullptr;
  for (;;) {
    SeekRecord s;
    seek(key, &s);
    Node *node = s.last.child;
    if (key_of(node) == key) {
      if (fresh) // never published
        this->delete_node(fresh);
      return false;
    }
    if (!fresh)
      fresh = new_node(static_cast<uint64_t>(key), value, kNull, kNull);
    int which = s.injection.which;
    if (cas_child(node, which, edge_to(s.injection.child) | kNull, edge_to(fresh)))
      return true;
    // Lost to another insert (retry), or the node is being deleted or
    // promoted: help first.
    uintptr_t now = node->child[which].load(kAcquire);
    if (now & kDelete)
      help_target_node(s.last, 1);
    else if (now & kPromote)
      help_successor_node(s.last, 1);
  }
}

template <class L> bool EdgeIntLf<L>::remove(Key key) {
  EpochGuard guard;
  StateRecord mine{};
  mine.depth = 0;
  mine.target_key = key;
  mine.current_key = key;
  mine.mode = Mode::kInjection;
  return run_delete(&mine);
}

template <class L> bool EdgeIntLf<L>::run_delete(StateRecord *state) {
  for (;;) {
    SeekRecord s;
    seek(state->current_key, &s);
    if (key_of(s.last.child) != state->current_key)
      return state->mode != Mode::kInjection; // absent, or our node was removed by a helper
    if (state->mode == Mode::kInjection) {
      state->target = s.last;
      state->previous_target = s.previous;
      inject(state);
    }
    if (state->mode != Mode::kInjection) {
      // Injected: once a seek ends elsewhere, a helper finished the delete.
      if (state->target.child != s.last.child)
        return true;
      state->target = s.last;
    }
    if (state->mode == Mode::kDiscovery)
      find_and_mark_successor(state);
    if (state->mode == Mode::kDiscovery)
      remove_successor(state);
    if (state->mode == Mode::kCleanup) {
      if (cleanup(state))
        return true;
      // A helper replaced the node; it may hold a promoted key now.
      state->current_key = key_of(s.last.child);
    }
  }
}

// ---------------------------------------------------------------------------
// Delete phases

// Flags the edge into the target (the delete's injection), then freezes the
// target's own edges.
template <class L> void EdgeIntLf<L>::inject(StateRecord *state) {
  const Edge &target = state->target;
  uintptr_t plain = edge_to(target.child);
  if (!cas_child(target.parent, target.which, plain, plain | kInject)) {
    uintptr_t now = target.parent->child[target.which].load(kAcquire);
    if (now & kInject)
      help_target_node(target, 1);
    else if (now & kDelete)
      help_target_node(state->previous_target, 1);
    else if (now & kPromote)
      help_successor_node(state->previous_target, 1);
    return;
  }
  if (!mark_child_edge(state, kLeft))
    return;
  mark_child_edge(state, kRight);
  initialize_type_and_update_mode(state);
}

// Sets the delete flag (injection mode: on the target) or the promote flag
// (discovery mode: on the successor) on one child edge, helping whatever
// operation holds the edge first. False when the node turned out to belong
// to another operation (the caller's edge was not ours to mark).
template <class L> bool EdgeIntLf<L>::mark_child_edge(StateRecord *state, int which) {
  bool deleting = state->mode == Mode::kInjection;
  Edge edge = deleting ? state->target : state->successor.last;
  uintptr_t flag = deleting ? kDelete : kPromote;
  Node *node = edge.child;
  for (;;) {
    uintptr_t e = node->child[which].load(kAcquire);
    if (e & kInject) {
      help_target_node({node, address(e), which}, state->depth + 1);
      continue;
    }
    if (e & kDelete) {
      if (deleting)
        return true;
      help_target_node(edge, state->depth + 1);
      return false;
    }
    if (e & kPromote) {
      if (!deleting)
        return true;
      help_successor_node(edge, state->depth + 1);
      return false;
    }
    if (cas_child(node, which, e, e | flag))
      return true;
  }
}

template <class L> void EdgeIntLf<L>::initialize_type_and_update_mode(StateRecord *state) {
  Node *node = state->target.child;
  bool a_null_child =
      (node->child[kLeft].load(kAcquire) & kNull) || (node->child[kRight].load(kAcquire) & kNull);
  // A marked node with a null child lost its successor (its right child).
  bool marked = L::is_marked(L::key_word(node).load(kAcquire));
  state->type = a_null_child && !marked ? Type::kSimple : Type::kComplex;
  update_mode(state);
}

template <class L> void EdgeIntLf<L>::update_mode(StateRecord *state) {
  Node *node = state->target.child;
  if (state->type == Type::kSimple) {
    state->mode = Mode::kCleanup;
    return;
  }
  uint64_t w = L::key_word(node).load(kAcquire);
  state->mode = L::promotion(node, w) == Promotion::kReady ? Mode::kCleanup : Mode::kDiscovery;
}

// Chooses the successor: the leftmost node of the target's right subtree,
// claimed by a promote flag on its (null) left edge that keeps the target's
// address.
template <class L> void EdgeIntLf<L>::find_and_mark_successor(StateRecord *state) {
  Node *node = state->target.child;
  SeekRecord *s = &state->successor;
  for (;;) {
    bool marked = L::is_marked(L::key_word(node).load(kAcquire));
    // With its key marked, the target chose its successor before; a null
    // right edge means that successor is already unlinked.
    if (!find_smallest(node, s) || marked)
      break;
    Node *succ = s->last.child;
    uintptr_t l = succ->child[kLeft].load(kAcquire);
    if (!(l & kNull))
      continue; // gained a left child
    if (L::is_marked(L::key_word(node).load(kAcquire))) {
      if (l & kPromote)
        break;
      continue;
    }
    if (cas_child(succ, kLeft, (l & ~kBits) | kNull, edge_to(node) | kNull | kPromote))
      break;
    l = succ->child[kLeft].load(kAcquire);
    if (l & kPromote)
      break;
    if (!(l & kNull))
      continue;
    if (l & kDelete)
      help_target_node(s->last, state->depth + 1); // the candidate is being deleted
  }
  update_mode(state);
}

// Moves the successor's key and value into the target (see the header).
template <class L> void EdgeIntLf<L>::promote(Node *node, Node *successor) {
  std::atomic<uint64_t> &word = L::key_word(node);
  uint64_t w = word.load(kAcquire);
  if (!L::is_marked(w))
    word.compare_exchange_strong(w, L::marked_word(key_of(successor)), kAcqRel, kAcquire);
  node->value.store(successor->value.load(kAcquire), kRelease);
  L::advance(node, Promotion::kValuePromoted);
}

// Promotes the successor into the target and unlinks it, then records the
// target ready to be replaced.
template <class L> void EdgeIntLf<L>::remove_successor(StateRecord *state) {
  Node *node = state->target.child;
  SeekRecord *s = &state->successor;
  std::atomic<uint64_t> &word = L::key_word(node);
  for (;;) {
    bool found = find_smallest(node, s);
    uintptr_t l = found ? s->last.child->child[kLeft].load(kAcquire) : 0;
    if (found && address(l) == node && (l & kPromote))
      break;
    // The successor is gone; its remover promoted the value first, and once
    // that is visible the target is ready.
    if (L::promotion(node, word.load(kAcquire)) >= Promotion::kValuePromoted) {
      L::advance(node, Promotion::kReady);
      update_mode(state);
      return;
    }
  }

  Edge succ = s->last;
  if (!(succ.child->child[kRight].load(kAcquire) & kPromote))
    mark_child_edge(state, kRight);
  promote(node, succ.child);
  for (;;) {
    // A successor right below the target hangs from its delete-flagged right edge.
    bool below_target = succ.parent == node;
    int which = below_target ? kRight : kLeft;
    uintptr_t keep = below_target ? kDelete : 0;
    uintptr_t inject = succ.parent->child[which].load(kAcquire) & kInject;
    uintptr_t r = succ.child->child[kRight].load(kAcquire);
    uintptr_t desired = (r & kNull) ? (edge_to(succ.child) | kNull | keep) : ((r & ~kBits) | keep);
    if (cas_child(succ.parent, which, edge_to(succ.child) | keep | inject, desired)) {
      this->retire_node(succ.child);
      break;
    }
    if (below_target)
      break; // a frozen edge only changes when someone unlinked the successor
    uintptr_t now = succ.parent->child[which].load(kAcquire);
    if ((now & kDelete) && s->previous.parent)
      help_target_node(s->previous, state->depth + 1); // its parent is being deleted
    if (!find_smallest(node, s) || s->last.child != succ.child)
      break; // unlinked by someone else
    succ = s->last;
  }
  L::advance(node, Promotion::kReady);
  update_mode(state);
}

// Swings the edge into the target: past it (simple), or to a fresh unmarked
// copy holding the promoted key and value (complex).
template <class L> bool EdgeIntLf<L>::cleanup(StateRecord *state) {
  Node *parent = state->target.parent;
  Node *node = state->target.child;
  int which = state->target.which;
  uintptr_t expected = edge_to(node) | kInject;
  if (state->type == Type::kComplex) {
    uintptr_t l = node->child[kLeft].load(kAcquire);
    uintptr_t r = node->child[kRight].load(kAcquire);
    Node *copy = new_node(static_cast<uint64_t>(key_of(node)), node->value.load(kAcquire),
                          (l & kNull) ? kNull : (l & ~kBits), (r & kNull) ? kNull : (r & ~kBits));
    if (cas_child(parent, which, expected, edge_to(copy))) {
      this->retire_node(node);
      return true;
    }
    this->delete_node(copy); // never published
    return false;
  }
  int only = (node->child[kLeft].load(kAcquire) & kNull) ? kRight : kLeft;
  uintptr_t c = node->child[only].load(kAcquire);
  if (cas_child(parent, which, expected, (c & kNull) ? (edge_to(node) | kNull) : (c & ~kBits))) {
    this->retire_node(node);
    return true;
  }
  return false;
}

// Completes the delete injected on `helpee` (its edge carries the inject flag).
template <class L> void EdgeIntLf<L>::help_target_node(const Edge &helpee, int depth) {
  StateRecord *state = new_state();
  state->target = helpee;
  state->depth = depth;
  state->mode = Mode::kInjection;
  if (mark_child_edge(state, kLeft)) {
    mark_child_edge(state, kRight);
    initialize_type_and_update_mode(state);
    if (state->mode == Mode::kDiscovery)
      find_and_mark_successor(state);
    if (state->mode == Mode::kDiscovery)
      remove_successor(state);
    if (state->mode == Mode::kCleanup)
      cleanup(state);
  }
  delete_state(state);
}

// Completes the promotion of the successor `helpee` leads to; its left edge
// holds the target's address.
template <class L> void EdgeIntLf<L>::help_successor_node(const Edge &helpee, int depth) {
  StateRecord *state = new_state();
  state->target = {nullptr, address(helpee.child->child[kLeft].load(kAcquire)), kLeft};
  state->depth = depth;
  state->mode = Mode::kDiscovery;
  state->type = Type::kComplex;
  state->successor.last = helpee;
  state->successor.previous = {nullptr, helpee.parent, kLeft};
  remove_successor(state);
  delete_state(state);
}

// ---------------------------------------------------------------------------
// Quiescent

template <class L> std::string EdgeIntLf<L>::check_structure() const {
  auto plain_edge_to = [](uintptr_t e, const Node *n) { return e == edge_to(n); };
  auto sentinel = [](Node *n) {
    uint64_t w = L::key_word(n).load(kAcquire);
    return w == L::kSentinelKey && L::promotion(n, w) == Promotion::kNone;
  };
  if (!plain_edge_to(r_->child[kRight].load(kAcquire), s_) ||
      !plain_edge_to(s_->child[kRight].load(kAcquire), t_) ||
      !(r_->child[kLeft].load(kAcquire) & kNull) || !(s_->child[kLeft].load(kAcquire) & kNull) ||
      (t_->child[kRight].load(kAcquire) & kBits) != kNull || !sentinel(r_) || !sentinel(s_) ||
      !sentinel(t_))
    return "sentinel nodes R, S and T are not as created";
  if (t_->child[kLeft].load(kAcquire) & (kBits & ~kNull))
    return "the edge into the user tree is flagged";

  // Every key under an edge lies in (low, high).
  StructureErrors errors;
  this->walk_in_bounds(
      kMinKey - 1, kMaxKey + 1, errors, [&](const Node *n, Key k, Key low, Key high) {
        std::string at = "node " + std::to_string(k) + ": ";
        Node *m = const_cast<Node *>(n); // the layouts' accessors take a mutable node
        if (L::promotion(m, L::key_word(m).load(kAcquire)) != Promotion::kNone)
          errors.add(at + "still holds a promoted key");
        if constexpr (requires { n->ready_to_replace; })
          if (n->ready_to_replace.load(kAcquire) != 0)
            errors.add(at + "still ready to replace");
        if (k <= low || k >= high)
          errors.add(at + "outside its subtree's range (" + std::to_string(low) + ", " +
                     std::to_string(high) + ")");
        for (int which : {kLeft, kRight}) {
          uintptr_t e = n->child[which].load(kAcquire);
          if (e & (kInject | kDelete | kPromote))
            errors.add(at + "edge " + (which == kLeft ? "left" : "right") + " still flagged (" +
                       std::to_string(e & kBits) + ")");
        }
      });
  return errors.report();
}

template class EdgeIntLf<EdgeIntLfBaselineLayout>;
template class EdgeIntLf<EdgeIntLfFixedLayout>;

std::unique_ptr<ConcurrentMap> make_edge_int_lf(const TreeConfig &config) {
  return make_in_layout<EdgeIntLf, EdgeIntLfBaselineLayout, EdgeIntLfFixedLayout>(config);
}

} // namespace memlayout::trees
