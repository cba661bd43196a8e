// int-lf (int_lf.h): the algorithm of Howley and Jones, with three changes
// for safe memory reclamation under epochs, which the paper (written for a
// garbage collector) and ASCYLIB (which never frees nodes) do not need:
//
// 1. Nulls are fresh odd words, not the paper's "removed node's address | 1":
//    once that node is freed and its address reused, an old null could
//    reappear in the same field and a late child CAS would succeed.
// 2. An unlinked node is retired by the thread whose CAS clears the
//    CHILDCAS flag of the descriptor that unlinked it. Every helper that may
//    still CAS with the node as the expected value read that flag before it
//    was cleared, so it entered its epoch before the retire.
// 3. A helper meeting a successor flagged RELOCATE touches the relocation's
//    destination only if its own search passed through it. The destination
//    is the last node where a search reaching the successor turned right
//    (the successor is the leftmost node of its right subtree), so that is
//    one comparison. A search from the root that did not pass through it
//    proves it was unlinked, hence marked: if the relocation is still
//    undecided it can never flag it, and FAILED is the outcome; if it
//    succeeded, the destination was updated and unflagged before it was
//    marked. Either way the helper need not touch it, and must not, since
//    it may already be freed.
//
// The value moves with the key: relocation replaces both with one 16-byte
// CAS that expects the removed key, and a node's key only ever grows (it is
// replaced by its successor's), so a late CAS cannot succeed.
//
// Quiescent cleanliness: a remove returns only once its node is physically
// unlinked (unlink_marked), so after the operations end no node is flagged or
// marked, which check_structure verifies.
#include "int_lf.h"

#include "structure_errors.h"
#include "tree_factories.h"

#include <new>
#include <stdexcept>
#include <string>

namespace memlayout::trees {
namespace int_lf {
namespace {

constexpr Key kRootKey = kMinKey - 1;

inline uintptr_t state_of(uintptr_t op) { return op & kOpStateMask; }
inline uintptr_t with_state(uintptr_t op, uintptr_t state) { return (op & ~kOpStateMask) | state; }
inline uintptr_t flagged(const void *descriptor, uintptr_t state) {
  return reinterpret_cast<uintptr_t>(descriptor) | state;
}
template <class T> inline T *descriptor_of(uintptr_t op) {
  return reinterpret_cast<T *>(op & ~kOpStateMask);
}
inline bool is_null(uintptr_t child) { return (child & kNull) != 0; }

// Fresh nulls: odd words from per-thread blocks of a global sequence.
std::atomic<uint64_t> g_next_null_block{1}; // block 0 would hand out kNull
constexpr uint64_t kNullBlock = 1 << 12;
thread_local uint64_t t_next_null = 0;
thread_local uint64_t t_null_end = 0;

uintptr_t fresh_null() {
  if (t_next_null == t_null_end) [[unlikely]] {
    t_next_null = g_next_null_block.fetch_add(1, std::memory_order_relaxed) * kNullBlock;
    t_null_end = t_next_null + kNullBlock;
  }
  return static_cast<uintptr_t>(t_next_null++ << 1) | kNull;
}

// Key and value are written only by the 16-byte CAS once a node is published.
inline Key load_key(const KeyValue &kv) { return __atomic_load_n(&kv.key, __ATOMIC_ACQUIRE); }
inline Value load_value(const KeyValue &kv) { return __atomic_load_n(&kv.value, __ATOMIC_ACQUIRE); }

// One 16-byte CAS (cmpxchg16b; every x86-64 CPU since 2008 has it).
using Pair = unsigned __int128 __attribute__((may_alias));
inline Pair pack(const KeyValue &kv) {
  return static_cast<Pair>(static_cast<uint64_t>(kv.value)) << 64 | static_cast<uint64_t>(kv.key);
}
__attribute__((target("cx16"))) bool cas_key_value(KeyValue &kv, const KeyValue &expected,
                                                   const KeyValue &desired) {
  return __sync_bool_compare_and_swap(reinterpret_cast<Pair *>(&kv), pack(expected), pack(desired));
}

} // namespace

// ---- DescriptorLog -------------------------------------------------------------

struct DescriptorLog::Chunk {
  static constexpr size_t kEntries = (4096 - sizeof(size_t)) / sizeof(uintptr_t);
  size_t used;
  uintptr_t entries[kEntries]; // address | kind
};
constexpr uintptr_t kKindBits = 7;

namespace {
std::atomic<uint64_t> g_next_log_id{1};
// The chunk this thread appended to last, and the log it belongs to.
thread_local uint64_t t_log_id = 0;
thread_local void *t_chunk = nullptr;
} // namespace

DescriptorLog::DescriptorLog(const RecordAllocator &records)
    : records_(records), id_(g_next_log_id.fetch_add(1, std::memory_order_relaxed)) {}

DescriptorLog::~DescriptorLog() {
  for (Chunk *c : chunks_) {
    for (size_t i = 0; i < c->used; ++i)
      records_.deallocate(static_cast<RecordAllocator::Kind>(c->entries[i] & kKindBits),
                          reinterpret_cast<void *>(c->entries[i] & ~kKindBits));
    delete c;
  }
}

void DescriptorLog::add(RecordAllocator::Kind kind, void *descriptor) {
  auto address = reinterpret_cast<uintptr_t>(descriptor);
  if ((address & kKindBits) != 0 || kind > kKindBits) [[unlikely]]
    throw std::logic_error("int-lf: descriptor not 8-byte aligned, or kind beyond 7");
  Chunk *c = static_cast<Chunk *>(t_chunk);
  if (t_log_id != id_ || c->used == Chunk::kEntries) [[unlikely]]
    c = chunk_for_this_thread();
  c->entries[c->used++] = address | kind;
}

DescriptorLog::Chunk *DescriptorLog::chunk_for_this_thread() {
  std::lock_guard lock(mutex_);
  Chunk *&open = open_chunk_[std::this_thread::get_id()];
  if (!open || open->used == Chunk::kEntries) {
    open = new Chunk{0, {}};
    chunks_.push_back(open);
  }
  t_log_id = id_;
  t_chunk = open;
  return open;
}

size_t DescriptorLog::size() const {
  size_t n = 0;
  for (const Chunk *c : chunks_)
    n += c->used;
  return n;
}

} // namespace int_lf

using namespace int_lf;

// ---- Records ---------------------------------------------------------------------

template <class L>
IntLf<L>::IntLf(AllocPolicy policy)
    : Bst<IntLf, L>("int-lf", policy),
      descriptor_kind_(this->records_.add_kind("descriptor", sizeof(ChildCasOp))),
      relocate_kind_(this->records_.add_kind("relocate_descriptor", sizeof(RelocateOp))),
      descriptors_(this->records_) {
  root_ = new_node(kRootKey, 0);
}

template <class L> IntLf<L>::~IntLf() {
  this->free_nodes(root_); // and the unlinked ones; the descriptor logs free the descriptors
}

// A word that is no node's address (check_structure reports it) leads nowhere.
template <class L> typename L::Node *IntLf<L>::child(const Node *n, bool right) {
  uintptr_t word = (right ? n->right : n->left).load(std::memory_order_acquire);
  return is_null(word) || word % alignof(Node) != 0 ? nullptr : reinterpret_cast<Node *>(word);
}

template <class L> bool IntLf<L>::entry(const Node *n, Key *key, Value *value) {
  *key = load_key(n->kv);
  *value = load_value(n->kv);
  return state_of(n->op.load(std::memory_order_acquire)) != kOpMark;
}

template <class L> typename L::Node *IntLf<L>::new_node(Key key, Value value) {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  // The 16-byte CAS needs kv on a 16-byte boundary: malloc and the pools
  // align every block of 16 bytes or more that way.
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    this->delete_node(p);
    throw std::runtime_error("int-lf: the allocator returned a node not aligned to 16 bytes");
  }
  Node *n = new (p) Node{};
  n->kv = KeyValue{key, value};
  n->op.store(kOpNone, std::memory_order_relaxed);
  n->left.store(kNull, std::memory_order_relaxed);
  n->right.store(kNull, std::memory_order_relaxed);
  return n;
}

template <class L> typename L::ChildCasOp *IntLf<L>::new_descriptor() {
  return new (this->records_.allocate(descriptor_kind_, sizeof(ChildCasOp))) ChildCasOp{};
}

template <class L> typename L::RelocateOp *IntLf<L>::new_relocate_descriptor() {
  return new (this->records_.allocate(relocate_kind_, sizeof(RelocateOp))) RelocateOp{};
}

// ---- Search ----------------------------------------------------------------------

// The paper's find: from aux_root (the root, or a node whose successor a
// remove looks for), down to key or to the null where it would go. A flagged
// node on the way is helped and the search restarts. A miss is valid only if
// the last node where the search turned right still has the op word it had
// then: a relocation into that node could have moved the key up past the
// search.
template <class L> typename IntLf<L>::Found IntLf<L>::find(Key key, Position &pos, Node *aux_root) {
retry:
  Found result = Found::kNotFoundRight;
  Node *pred = nullptr;
  uintptr_t pred_op = 0;
  Node *curr = aux_root;
  uintptr_t curr_op = curr->op.load(std::memory_order_acquire);
  if (state_of(curr_op) != kOpNone) {
    if (aux_root != root_)
      return Found::kAbort;
    help_child_cas(descriptor_of<ChildCasOp>(curr_op), curr); // the root is only ever CHILDCAS
    goto retry;
  }
  Value value = 0;
  uintptr_t next = curr->right.load(std::memory_order_acquire);
  Node *last_right = curr;
  uintptr_t last_right_op = curr_op;
  while (!is_null(next)) {
    pred = curr;
    pred_op = curr_op;
    curr = reinterpret_cast<Node *>(next);
    curr_op = curr->op.load(std::memory_order_acquire);
    if (state_of(curr_op) != kOpNone) {
      // Below aux_root the search has not seen the nodes above it, so it
      // cannot tell whether a relocation's destination is still linked.
      if (aux_root != root_ && state_of(curr_op) == kOpRelocate) {
        Node *dest = descriptor_of<RelocateOp>(curr_op)->dest;
        if (dest != last_right && dest != curr)
          return Found::kAbort;
      }
      help(pred, pred_op, curr, curr_op, last_right);
      goto retry;
    }
    Key curr_key = load_key(curr->kv);
    if (key < curr_key) {
      result = Found::kNotFoundLeft;
      next = curr->left.load(std::memory_order_acquire);
    } else if (key > curr_key) {
      result = Found::kNotFoundRight;
      next = curr->right.load(std::memory_order_acquire);
      last_right = curr;
      last_right_op = curr_op;
    } else {
      value = load_value(curr->kv);
      result = Found::kFound;
      break;
    }
  }
  if (result != Found::kFound && last_right->op.load(std::memory_order_acquire) != last_right_op)
    goto retry;
  if (curr->op.load(std::memory_order_acquire) != curr_op)
    goto retry;
  pos = Position{pred, pred_op, curr, curr_op, value};
  return result;
}

// ---- Helping ---------------------------------------------------------------------

// last_right: the last node where the caller's search from the root turned
// right before reaching curr (see the header comment, change 3).
template <class L>
void IntLf<L>::help(Node *pred, uintptr_t pred_op, Node *curr, uintptr_t curr_op,
                    Node *last_right) {
  switch (state_of(curr_op)) {
  case kOpChildCas:
    help_child_cas(descriptor_of<ChildCasOp>(curr_op), curr);
    break;
  case kOpRelocate: {
    auto *op = descriptor_of<RelocateOp>(curr_op);
    help_relocate(op, pred, pred_op, curr, op->dest == curr || op->dest == last_right, nullptr);
    break;
  }
  case kOpMark:
    help_marked(pred, pred_op, curr);
    break;
  default:
    break;
  }
}

template <class L> void IntLf<L>::help_child_cas(ChildCasOp *op, Node *dest) {
  std::atomic<uintptr_t> &child = op->is_left ? dest->left : dest->right;
  uintptr_t expected = op->expected;
  child.compare_exchange_strong(expected, op->update, std::memory_order_acq_rel);
  uintptr_t flag = flagged(op, kOpChildCas);
  if (dest->op.compare_exchange_strong(flag, flagged(op, kOpNone), std::memory_order_acq_rel) &&
      !is_null(op->expected))
    this->retire_node(reinterpret_cast<Node *>(op->expected)); // change 2
}

// Returns whether the relocation succeeded; *unlink_installed (when given)
// whether this call installed the unlink of curr, the relocated successor.
template <class L>
bool IntLf<L>::help_relocate(RelocateOp *op, Node *pred, uintptr_t pred_op, Node *curr,
                             bool dest_reached, bool *unlink_installed) {
  int seen_state = op->state.load(std::memory_order_acquire);
  if (seen_state == kOngoing) {
    bool dest_flagged = false;
    if (dest_reached) {
      uintptr_t seen_op = op->dest_op;
      op->dest->op.compare_exchange_strong(seen_op, flagged(op, kOpRelocate),
                                           std::memory_order_acq_rel);
      dest_flagged = seen_op == op->dest_op || seen_op == flagged(op, kOpRelocate);
    }
    if (dest_flagged) {
      op->state.compare_exchange_strong(seen_state, kSuccessful, std::memory_order_acq_rel);
      seen_state = kSuccessful;
    } else if (op->state.compare_exchange_strong(seen_state, kFailed, std::memory_order_acq_rel)) {
      seen_state = kFailed;
    } // else seen_state holds the outcome another thread decided
  }
  if (seen_state == kSuccessful && dest_reached) {
    cas_key_value(op->dest->kv, op->remove, op->replace);
    uintptr_t flag = flagged(op, kOpRelocate);
    op->dest->op.compare_exchange_strong(flag, flagged(op, kOpNone), std::memory_order_acq_rel);
  }
  bool succeeded = seen_state == kSuccessful;
  if (op->dest == curr)
    return succeeded;
  uintptr_t flag = flagged(op, kOpRelocate);
  curr->op.compare_exchange_strong(flag, flagged(op, succeeded ? kOpMark : kOpNone),
                                   std::memory_order_acq_rel);
  if (succeeded) {
    if (op->dest == pred)
      pred_op = flagged(op, kOpNone);
    bool installed = help_marked(pred, pred_op, curr);
    if (unlink_installed)
      *unlink_installed = installed;
  }
  return succeeded;
}

// Unlinks curr, marked and so with at most one child, from pred: a CHILDCAS
// on pred replacing curr by its child (or a fresh null). False when pred
// changed since pred_op was read.
template <class L> bool IntLf<L>::help_marked(Node *pred, uintptr_t pred_op, Node *curr) {
  uintptr_t left = curr->left.load(std::memory_order_acquire);
  uintptr_t replacement = left;
  if (is_null(left)) {
    uintptr_t right = curr->right.load(std::memory_order_acquire);
    replacement = is_null(right) ? fresh_null() : right;
  }
  ChildCasOp *op = new_descriptor();
  op->is_left = pred->left.load(std::memory_order_acquire) == reinterpret_cast<uintptr_t>(curr);
  op->expected = reinterpret_cast<uintptr_t>(curr);
  op->update = replacement;
  uintptr_t expected = pred_op;
  if (!pred->op.compare_exchange_strong(expected, flagged(op, kOpChildCas),
                                        std::memory_order_acq_rel)) {
    this->records_.deallocate(descriptor_kind_, op); // never published
    return false;
  }
  descriptors_.add(descriptor_kind_, op);
  help_child_cas(op, pred);
  return true;
}

// Makes sure the marked node holding `key` is unlinked before its remove
// returns, when the remove's own unlink could not be installed. The walk goes
// where key + 1/2 would: every node that is or was an ancestor of that node
// sends it the right way (keys only grow, and a relocated key equals the
// successor's), so while the node is linked the walk meets it, helps its
// unlink and starts again; a walk that meets nothing flagged proves it gone.
template <class L> void IntLf<L>::unlink_marked(Key key) {
  for (;;) {
    Node *curr = root_;
    uintptr_t curr_op = curr->op.load(std::memory_order_acquire);
    if (state_of(curr_op) != kOpNone) {
      help_child_cas(descriptor_of<ChildCasOp>(curr_op), curr);
      continue;
    }
    Node *last_right = curr;
    uintptr_t next = curr->right.load(std::memory_order_acquire);
    bool clean = true;
    while (!is_null(next)) {
      Node *pred = curr;
      uintptr_t pred_op = curr_op;
      curr = reinterpret_cast<Node *>(next);
      curr_op = curr->op.load(std::memory_order_acquire);
      if (state_of(curr_op) != kOpNone) {
        help(pred, pred_op, curr, curr_op, last_right);
        clean = false;
        break;
      }
      if (load_key(curr->kv) <= key) {
        last_right = curr;
        next = curr->right.load(std::memory_order_acquire);
      } else {
        next = curr->left.load(std::memory_order_acquire);
      }
    }
    if (clean)
      return;
  }
}

// ---- Operations ------------------------------------------------------------------

template <class L> bool IntLf<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  Position pos;
  if (find(key, pos, root_) != Found::kFound)
    return false;
  *value = pos.value;
  return true;
}

template <class L> bool IntLf<L>::insert(Key key, Value value) {
  EpochGuard guard;
  Node *node = nullptr;
  ChildCasOp *op = nullptr;
  for (;;) {
    Position pos;
    Found found = find(key, pos, root_);
    if (found == Found::kFound) {
      if (node) { // allocated for an attempt that lost, never published
        this->delete_node(node);
        this->records_.deallocate(descriptor_kind_, op);
      }
      return false;
    }
    if (!node) {
      // Node, then descriptor: ASCYLIB's allocation order (the study's NDND...).
      node = new_node(key, value);
      op = new_descriptor();
    }
    bool is_left = found == Found::kNotFoundLeft;
    Node *parent = pos.curr;
    op->is_left = is_left;
    op->expected = (is_left ? parent->left : parent->right).load(std::memory_order_acquire);
    op->update = reinterpret_cast<uintptr_t>(node);
    uintptr_t expected = pos.curr_op;
    if (parent->op.compare_exchange_strong(expected, flagged(op, kOpChildCas),
                                           std::memory_order_acq_rel)) {
      descriptors_.add(descriptor_kind_, op);
      help_child_cas(op, parent);
      return true;
    }
  }
}

template <class L> bool IntLf<L>::remove(Key key) {
  EpochGuard guard;
  for (;;) {
    Position pos;
    if (find(key, pos, root_) != Found::kFound)
      return false;
    Node *curr = pos.curr;
    if (is_null(curr->left.load(std::memory_order_acquire)) ||
        is_null(curr->right.load(std::memory_order_acquire))) {
      uintptr_t expected = pos.curr_op;
      if (curr->op.compare_exchange_strong(expected, with_state(pos.curr_op, kOpMark),
                                           std::memory_order_acq_rel)) {
        if (!help_marked(pos.pred, pos.pred_op, curr))
          unlink_marked(key);
        return true;
      }
      continue;
    }
    // Two children: relocate the successor, the leftmost node of the right subtree.
    Position succ;
    if (find(key, succ, curr) == Found::kAbort ||
        curr->op.load(std::memory_order_acquire) != pos.curr_op)
      continue;
    Node *replace = succ.curr;
    RelocateOp *op = new_relocate_descriptor();
    op->state.store(kOngoing, std::memory_order_relaxed);
    op->dest = curr;
    op->dest_op = pos.curr_op;
    op->remove = KeyValue{key, pos.value};
    op->replace = KeyValue{load_key(replace->kv), load_value(replace->kv)};
    uintptr_t expected = succ.curr_op;
    if (!replace->op.compare_exchange_strong(expected, flagged(op, kOpRelocate),
                                             std::memory_order_acq_rel)) {
      this->records_.deallocate(relocate_kind_, op); // never published
      continue;
    }
    descriptors_.add(relocate_kind_, op);
    bool unlink_installed = false;
    if (help_relocate(op, succ.pred, succ.pred_op, replace, true, &unlink_installed)) {
      if (!unlink_installed)
        unlink_marked(op->replace.key);
      return true;
    }
  }
}

// ---- Quiescent walks -------------------------------------------------------------

template <class L> std::string IntLf<L>::check_structure() const {
  StructureErrors errors;
  if (load_key(root_->kv) != kRootKey)
    errors.add("root key changed to " + std::to_string(load_key(root_->kv)));
  if (state_of(root_->op.load()) != kOpNone)
    errors.add("root is flagged");
  if (!is_null(root_->left.load()))
    errors.add("root has a left child");
  // Keys lie in the open interval of their subtree.
  this->walk_in_bounds(
      kRootKey, kMaxKey + 1, errors, [&](const Node *n, Key key, Key low, Key high) {
        std::string at = "node " + std::to_string(key) + ": ";
        if (key <= low || key >= high)
          errors.add(at + "outside its subtree's range (" + std::to_string(low) + ", " +
                     std::to_string(high) + ")");
        uintptr_t op = n->op.load();
        if (state_of(op) == kOpMark)
          errors.add(at + "marked but still linked");
        else if (state_of(op) != kOpNone)
          errors.add(at + "still flagged (state " + std::to_string(state_of(op)) + ")");
        for (uintptr_t child : {n->left.load(), n->right.load()})
          if (!is_null(child) && child % alignof(Node) != 0)
            errors.add(at + "child word is neither a node nor a null");
      });
  return errors.report();
}

template class IntLf<IntLfBaselineLayout>;
template class IntLf<IntLfFixedLayout>;

std::unique_ptr<ConcurrentMap> make_int_lf(const TreeConfig &config) {
  return make_in_layout<IntLf, IntLfBaselineLayout, IntLfFixedLayout>(config);
}

} // namespace memlayout::trees
