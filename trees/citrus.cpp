// citrus (citrus.h) and its user-space RCU.
//
// RCU. Each thread owns a ReaderSlot on a global list (slots are reused by
// later threads, never freed). Entering a read-side section makes the slot's
// counter odd with an atomic exchange (a full fence on x86). synchronize
// reads each counter with a read-modify-write, which sees the latest value:
// if that is even, the reader's next exchange comes after it and acquires
// it, so the reader's loads see every pointer the updater stored before
// synchronizing. Leaving makes the counter even with a release store.
// synchronize waits, slot by slot, for each odd counter to change. The
// authors' RCU pays the same fence (an atomic increment per lock and
// unlock).
//
// Lock order: updates lock top-down (prev, then curr, then the successor's
// parent and the successor below it; a fresh copy before it is published),
// and no thread waits for a lock or synchronizes inside a read-side section,
// so neither locks nor grace periods can wait in a cycle.
#include "citrus.h"

#include "search_step.h"
#include "structure_errors.h"
#include "tree_factories.h"

#include <algorithm>
#include <new>
#include <string>

namespace memlayout::trees {
namespace {

constexpr Key kRootKey = kMaxKey + 1;

struct alignas(64) ReaderSlot {
  std::atomic<uint64_t> phase{0}; // odd while its thread is in a read-side section
  std::atomic<bool> in_use{true};
  ReaderSlot *next = nullptr; // immutable once published
};

std::atomic<ReaderSlot *> g_readers{nullptr};
thread_local ReaderSlot *t_reader = nullptr;

// Frees the thread's slot for a later thread. Touched only at registration,
// so the fast path reads the trivially destructible t_reader.
struct ReaderExit {
  ReaderSlot *slot = nullptr;
  ~ReaderExit() {
    if (slot)
      slot->in_use.store(false, std::memory_order_release);
    t_reader = nullptr;
  }
};
thread_local ReaderExit t_reader_exit;

ReaderSlot *register_reader() {
  ReaderSlot *slot = nullptr;
  for (ReaderSlot *r = g_readers.load(std::memory_order_acquire); r && !slot; r = r->next) {
    bool free_slot = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(free_slot, true, std::memory_order_acquire))
      slot = r;
  }
  if (!slot) {
    slot = new ReaderSlot;
    ReaderSlot *head = g_readers.load(std::memory_order_relaxed);
    do
      slot->next = head;
    while (!g_readers.compare_exchange_weak(head, slot, std::memory_order_release,
                                            std::memory_order_relaxed));
  }
  t_reader_exit.slot = slot;
  t_reader = slot;
  return slot;
}

class ReadSection {
public:
  ReadSection() : slot_(t_reader ? t_reader : register_reader()) {
    uint64_t p = slot_->phase.load(std::memory_order_relaxed);
    slot_->phase.exchange(p + 1, std::memory_order_seq_cst);
  }
  ~ReadSection() {
    slot_->phase.store(slot_->phase.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  ReadSection(const ReadSection &) = delete;
  ReadSection &operator=(const ReadSection &) = delete;

private:
  ReaderSlot *slot_;
};

template <class N> void bump_tag(N *n, int dir) {
  n->tag[dir].store(n->tag[dir].load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

} // namespace

void citrus_synchronize_readers() {
  for (ReaderSlot *r = g_readers.load(std::memory_order_acquire); r; r = r->next) {
    uint64_t p = r->phase.fetch_add(0, std::memory_order_acq_rel);
    if (!(p & 1))
      continue;
    for (unsigned attempt = 0; r->phase.load(std::memory_order_acquire) == p; ++attempt)
      back_off(attempt);
  }
}

template <class L> Citrus<L>::Citrus(AllocPolicy policy) : Bst<Citrus, L>("citrus", policy) {
  root_ = new_node(kRootKey, 0);
}

template <class L> Citrus<L>::~Citrus() { this->free_nodes(root_); }

template <class L> typename L::Node *Citrus<L>::new_node(Key key, Value value) {
  void *p = this->records_.allocate(this->node_kind_, sizeof(Node));
  Node *n = new (p) Node{};
  n->key = key;
  n->value = value;
  L::init_lock(n->lock);
  return n;
}

template <class L> bool Citrus<L>::lookup(Key key, Value *value) {
  EpochGuard guard;
  ReadSection read;
  Node *curr = root_->child[0].load(std::memory_order_acquire);
  while (curr && curr->key != key)
    curr = load_child(curr->child[0], curr->child[1], key > curr->key);
  if (!curr)
    return false;
  *value = curr->value;
  return true;
}

template <class L> typename Citrus<L>::Position Citrus<L>::traverse(Key key) const {
  Node *prev = root_;
  int dir = 0;
  uint32_t tag = prev->tag[0].load(std::memory_order_acquire);
  Node *curr = prev->child[0].load(std::memory_order_acquire);
  while (curr && curr->key != key) {
    prev = curr;
    dir = key > curr->key;
    tag = prev->tag[dir].load(std::memory_order_acquire);
    curr = prev->child[dir].load(std::memory_order_acquire);
  }
  return Position{prev, curr, dir, tag};
}

// Locked prev (and curr): prev still links to curr and neither is removed;
// for an empty slot, also no insertion and removal passed through it.
template <class L>
bool Citrus<L>::validate(const Node *prev, uint32_t tag, const Node *curr, int dir) {
  if (prev->marked.load(std::memory_order_relaxed) ||
      prev->child[dir].load(std::memory_order_relaxed) != curr)
    return false;
  if (!curr)
    return prev->tag[dir].load(std::memory_order_relaxed) == tag;
  return !curr->marked.load(std::memory_order_relaxed);
}

template <class L> bool Citrus<L>::insert(Key key, Value value) {
  EpochGuard guard;
  for (;;) {
    Position pos;
    {
      ReadSection read;
      pos = traverse(key);
    }
    if (pos.curr)
      return false;
    NodeLockGuard<L> hold(pos.prev);
    if (validate(pos.prev, pos.tag, nullptr, pos.dir)) {
      Node *n = new_node(key, value);
      pos.prev->child[pos.dir].store(n, std::memory_order_release);
      return true;
    }
  }
}

template <class L> bool Citrus<L>::remove(Key key) {
  EpochGuard guard;
  for (;;) {
    Position pos;
    {
      ReadSection read;
      pos = traverse(key);
    }
    if (!pos.curr)
      return false;
    L::lock(pos.prev->lock);
    L::lock(pos.curr->lock);
    if (!validate(pos.prev, 0, pos.curr, pos.dir)) {
      L::unlock(pos.curr->lock);
      L::unlock(pos.prev->lock);
      continue;
    }
    if (!pos.curr->child[0].load(std::memory_order_relaxed) ||
        !pos.curr->child[1].load(std::memory_order_relaxed)) {
      remove_with_at_most_one_child(pos.prev, pos.curr, pos.dir);
      return true;
    }
    if (remove_with_two_children(pos.prev, pos.curr, pos.dir))
      return true;
  }
}

// curr's only child (or nothing) takes its place.
template <class L> void Citrus<L>::remove_with_at_most_one_child(Node *prev, Node *curr, int dir) {
  Node *only = curr->child[0].load(std::memory_order_relaxed);
  if (!only)
    only = curr->child[1].load(std::memory_order_relaxed);
  curr->marked.store(true, std::memory_order_relaxed);
  prev->child[dir].store(only, std::memory_order_release);
  if (!only)
    bump_tag(prev, dir);
  L::unlock(curr->lock);
  L::unlock(prev->lock);
  this->retire_node(curr);
}

// A copy of curr's successor (the leftmost node of its right subtree) takes
// curr's place; after a grace period the old successor leaves its own.
// False when the successor changed before it was locked: retry.
template <class L> bool Citrus<L>::remove_with_two_children(Node *prev, Node *curr, int dir) {
  Node *prev_succ = curr;
  Node *succ = curr->child[1].load(std::memory_order_acquire);
  for (Node *next = succ->child[0].load(std::memory_order_acquire); next;
       next = succ->child[0].load(std::memory_order_acquire)) {
    prev_succ = succ;
    succ = next;
  }
  int succ_dir = prev_succ == curr ? 1 : 0;
  if (prev_succ != curr)
    L::lock(prev_succ->lock);
  L::lock(succ->lock);
  bool valid = validate(prev_succ, 0, succ, succ_dir) &&
               validate(succ, succ->tag[0].load(std::memory_order_relaxed), nullptr, 0);
  if (valid) {
    curr->marked.store(true, std::memory_order_relaxed);
    Node *copy = new_node(succ->key, succ->value);
    copy->child[0].store(curr->child[0].load(std::memory_order_relaxed), std::memory_order_relaxed);
    copy->child[1].store(curr->child[1].load(std::memory_order_relaxed), std::memory_order_relaxed);
    L::lock(copy->lock); // updates that find it wait for the successor's unlink
    prev->child[dir].store(copy, std::memory_order_release);

    citrus_synchronize_readers();

    succ->marked.store(true, std::memory_order_relaxed);
    Node *succ_right = succ->child[1].load(std::memory_order_relaxed);
    Node *succ_slot_owner = prev_succ == curr ? copy : prev_succ;
    succ_slot_owner->child[succ_dir].store(succ_right, std::memory_order_release);
    if (!succ_right)
      bump_tag(succ_slot_owner, succ_dir);
    L::unlock(copy->lock);
  }
  L::unlock(succ->lock);
  if (prev_succ != curr)
    L::unlock(prev_succ->lock);
  L::unlock(curr->lock);
  L::unlock(prev->lock);
  if (valid) {
    this->retire_node(curr);
    this->retire_node(succ);
  }
  return valid;
}

// Search order, no cycle, no marked node left reachable.
template <class L> std::string Citrus<L>::check_structure() const {
  StructureErrors errors;
  if (root_->child[1].load(std::memory_order_relaxed))
    errors.fail(root_, "the root sentinel has a right child");
  if (root_->marked.load(std::memory_order_relaxed))
    errors.fail(root_, "the root sentinel is marked");
  this->walk_in_bounds(kMinKey - 1, kRootKey, errors, [&](const Node *n, Key key, Key lo, Key hi) {
    if (key <= lo || key >= hi)
      errors.fail(n, "out of search order");
    if (n->marked.load(std::memory_order_relaxed))
      errors.fail(n, "marked node still in the tree");
  });
  return errors.report();
}

template class Citrus<CitrusBaselineLayout>;
template class Citrus<CitrusFixedLayout>;

std::unique_ptr<ConcurrentMap> make_citrus(const TreeConfig &config) {
  return make_in_layout<Citrus, CitrusBaselineLayout, CitrusFixedLayout>(config);
}

} // namespace memlayout::trees
