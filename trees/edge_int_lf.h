// edge-int-lf: the lock-free internal BST of Ramachandran and Mittal ("A Fast
// Lock-Free Internal Binary Search Tree", ICDCN 2015).
//
// Written from the paper's description and the authors' published C code
// (github.com/arunmoezhi/lockFreeIBST), read to settle details the paper
// leaves open; the code here is our own. Like edge-ext-lf it marks edges, not
// nodes, with four bits stolen from each child pointer:
//   null     the child is absent (the address bits then keep the node the edge
//            last pointed to, or the target node on a successor's left edge)
//   inject   on the edge into a node being deleted (the delete's injection)
//   delete   on both edges out of a node being deleted: they are frozen
//   promote  on both edges out of the successor of a node with two children
// A delete of a node with at most one child swings its parent's edge past it
// (simple). A delete of a node with two children (complex) finds the smallest
// key of its right subtree, flags that successor's edges, copies the
// successor's key into the node (marking the key), unlinks the successor, and
// finally replaces the node by a fresh unmarked copy. A thread that meets any
// flag helps that delete along; the help carries a "state record" (152 bytes
// in the published code), which the published code allocates per help.
//
// Values. The published tree is a set; the study's version added a value that
// a complex delete's copy loses. Here a promotion also moves the successor's
// value, in this order: mark the key (CAS), write the value, record
// "value promoted", unlink the successor, record "ready to replace". A lookup
// that reaches an unmarked key re-reads the key after the value (a value
// promoted in between comes with a marked key, and the lookup searches
// again); one that reaches a promoted key before its value is recorded reads
// the value from the successor, which is still linked until then.
//
// Layouts (record kinds "node" and "state"):
//   baseline  the published node with a value (40 bytes: markAndKey, left,
//             right, readyToReplace, value; jemalloc's 48-byte class, so one in
//             four nodes straddles a line), and lookups run the updates' seek,
//             which keeps the last two edges and a copy of the previous
//             traversal's seek record (the study's "heavy traversals").
//   fixed     32 bytes: the promotion state lives in the key word's top two
//             bits instead of its own word; lookups only follow child pointers.
#pragma once

#include "bst.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::trees {

// How far a complex delete has moved its successor into the target node.
enum class EdgeIntLfPromotion : unsigned {
  kNone = 0,          // the key is the node's own
  kKeyPromoted = 1,   // marked: holds the successor's key, the value may be the old one
  kValuePromoted = 2, // the value is the successor's too
  kReady = 3,         // the successor is unlinked: the node may be replaced
};

struct EdgeIntLfBaselineLayout {
  struct Node {
    std::atomic<uint64_t> mark_and_key;     // 0: kMark | key
    std::atomic<uintptr_t> child[2];        // 8: left, right
    std::atomic<uint64_t> ready_to_replace; // 24: kReadyBit | kValueBit
    std::atomic<Value> value;               // 32
  };
  static constexpr uint64_t kMark = uint64_t{1} << 63;
  static constexpr uint64_t kKeyMask = kMark - 1;
  static constexpr uint64_t kReadyBit = 1; // the published readyToReplace = true
  static constexpr uint64_t kValueBit = 2;
  static constexpr uint64_t kSentinelKey = uint64_t{kMaxKey} + 1;
  static constexpr bool kLeanLookup = false;

  static std::atomic<uint64_t> &key_word(Node *n) { return n->mark_and_key; }
  static Key key_of(uint64_t word) { return static_cast<Key>(word & kKeyMask); }
  static bool is_marked(uint64_t word) { return (word & kMark) != 0; }
  static uint64_t marked_word(Key promoted) { return kMark | static_cast<uint64_t>(promoted); }
  static EdgeIntLfPromotion promotion(Node *n, uint64_t word) {
    if (!is_marked(word))
      return EdgeIntLfPromotion::kNone;
    uint64_t r = n->ready_to_replace.load(std::memory_order_acquire);
    return (r & kReadyBit)   ? EdgeIntLfPromotion::kReady
           : (r & kValueBit) ? EdgeIntLfPromotion::kValuePromoted
                             : EdgeIntLfPromotion::kKeyPromoted;
  }
  static void advance(Node *n, EdgeIntLfPromotion to) {
    n->ready_to_replace.fetch_or(to == EdgeIntLfPromotion::kReady ? kReadyBit : kValueBit,
                                 std::memory_order_acq_rel);
  }
  static void init_extra(Node *n) { n->ready_to_replace.store(0, std::memory_order_relaxed); }
};
static_assert(sizeof(EdgeIntLfBaselineLayout::Node) == 40);

struct EdgeIntLfFixedLayout {
  struct Node {
    std::atomic<uint64_t> key_word;  // 0: promotion state << 62 | key
    std::atomic<uintptr_t> child[2]; // 8: left, right
    std::atomic<Value> value;        // 24
  };
  static constexpr unsigned kStateShift = 62; // user keys need bits 0-61 (kMaxKey)
  static constexpr uint64_t kKeyMask = (uint64_t{1} << kStateShift) - 1;
  static_assert(static_cast<uint64_t>(kMaxKey) == kKeyMask);
  // Never compared: searches start below the sentinels.
  static constexpr uint64_t kSentinelKey = 0;
  static constexpr bool kLeanLookup = true;

  static std::atomic<uint64_t> &key_word(Node *n) { return n->key_word; }
  static Key key_of(uint64_t word) { return static_cast<Key>(word & kKeyMask); }
  static bool is_marked(uint64_t word) { return (word >> kStateShift) != 0; }
  static uint64_t marked_word(Key promoted) {
    return uint64_t{1} << kStateShift | static_cast<uint64_t>(promoted);
  }
  static EdgeIntLfPromotion promotion(Node *, uint64_t word) {
    return static_cast<EdgeIntLfPromotion>(word >> kStateShift);
  }
  static void advance(Node *n, EdgeIntLfPromotion to) {
    uint64_t want = static_cast<uint64_t>(to);
    uint64_t w = n->key_word.load(std::memory_order_acquire);
    while ((w >> kStateShift) < want && !n->key_word.compare_exchange_weak(
                                            w, (w & kKeyMask) | want << kStateShift,
                                            std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
  }
  static void init_extra(Node *) {}
};
static_assert(sizeof(EdgeIntLfFixedLayout::Node) == 32);

// Test access: tests/trees/edge_int_lf_test.cpp stops deletes between phases.
template <class L> struct EdgeIntLfProbe;

template <class L> class EdgeIntLf final : public Bst<EdgeIntLf, L> {
public:
  using Node = typename L::Node;

  // Bits of a child pointer (nodes are 16-byte aligned).
  static constexpr uintptr_t kPromote = 1;
  static constexpr uintptr_t kDelete = 2;
  static constexpr uintptr_t kInject = 4;
  static constexpr uintptr_t kNull = 8;
  static constexpr uintptr_t kBits = 15;
  static constexpr int kLeft = 0;
  static constexpr int kRight = 1;

  explicit EdgeIntLf(AllocPolicy policy);
  ~EdgeIntLf() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks.
  static Node *child(const Node *n, bool right) {
    uintptr_t e = n->child[right].load(std::memory_order_acquire);
    return (e & kNull) ? nullptr : address(e);
  }
  const Node *key_root() const { return child(t_, false); }
  static bool entry(const Node *n, Key *key, Value *value) {
    *key = key_of(const_cast<Node *>(n));
    *value = n->value.load(std::memory_order_acquire);
    return true;
  }

private:
  friend struct EdgeIntLfProbe<L>;

  struct Edge {
    Node *parent;
    Node *child;
    int which;
  };
  // Where a traversal ended: the edge into the last node (`last`), the edge
  // above it, and the edge a new node would hang from (`injection`).
  struct SeekRecord {
    Edge last;
    Edge previous;
    Edge injection;
  };
  enum class Mode : int { kInjection, kDiscovery, kCleanup };
  enum class Type : int { kSimple, kComplex };
  // A delete's progress, shared by nobody: each helper has its own.
  struct StateRecord {
    int depth; // of helping recursion
    Edge target;
    Edge previous_target;
    Key target_key;
    Key current_key;
    Mode mode;
    Type type;
    SeekRecord successor; // the edge into the successor, and the one above
  };
  static_assert(sizeof(StateRecord) == 152, "the published state record's size");

  static Node *address(uintptr_t edge) { return reinterpret_cast<Node *>(edge & ~kBits); }
  static uintptr_t edge_to(const Node *n) { return reinterpret_cast<uintptr_t>(n); }
  static Key key_of(Node *n) { return L::key_of(L::key_word(n).load(std::memory_order_acquire)); }
  static bool cas_child(Node *n, int which, uintptr_t expected, uintptr_t desired) {
    return n->child[which].compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                                                   std::memory_order_acquire);
  }

  // Traversals.
  void seek(Key key, SeekRecord *s) const;
  Node *find(Key key) const; // fixed layout's lookup traversal
  bool read_value(Node *n, Key key, Value *value) const;
  bool find_smallest(Node *node, SeekRecord *s) const;

  // Delete phases (the paper's names). run_delete is the delete's loop: seek
  // the key, then run whichever phase the state record is in.
  bool run_delete(StateRecord *state);
  void inject(StateRecord *state);
  bool mark_child_edge(StateRecord *state, int which);
  void initialize_type_and_update_mode(StateRecord *state);
  void update_mode(StateRecord *state);
  void find_and_mark_successor(StateRecord *state);
  void remove_successor(StateRecord *state);
  void promote(Node *node, Node *successor);
  bool cleanup(StateRecord *state);
  void help_target_node(const Edge &helpee, int depth);
  void help_successor_node(const Edge &helpee, int depth);

  Node *new_node(uint64_t key_word, Value value, uintptr_t left, uintptr_t right);
  StateRecord *new_state();
  void delete_state(StateRecord *s) { this->records_.deallocate(state_kind_, s); }

  RecordAllocator::Kind state_kind_;
  // Sentinels: R -right-> S -right-> T; the user tree hangs off T's left edge.
  Node *r_;
  Node *s_;
  Node *t_;
};

extern template class EdgeIntLf<EdgeIntLfBaselineLayout>;
extern template class EdgeIntLf<EdgeIntLfFixedLayout>;

} // namespace memlayout::trees
