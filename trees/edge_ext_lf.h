// edge-ext-lf: the lock-free external BST of Natarajan and Mittal ("Fast
// Concurrent Lock-Free Binary Search Trees", PPoPP 2014).
//
// Keys live in leaves; a routing node sends keys below its own to the left and
// the rest to the right. Instead of marking nodes, a remove marks edges, with
// two bits stolen from the child pointers:
//   flag  on the edge to the leaf being removed (the remove's linearizable
//         "injection"),
//   tag   on the edge to that leaf's sibling,
// after which both edges of the leaf's parent never change again. The remove
// then swings the last unmarked edge above the parent to the sibling with one
// CAS, unlinking the whole chain of frozen routing nodes in between (several
// removes may have tagged a chain before one of them swings it). Any update
// that meets a flagged or tagged edge helps that swing ("cleanup") and retries.
// An insert is one CAS: the leaf's edge now points to a new routing node whose
// children are the old leaf and the new one.
//
// Layouts (one record kind, "node", for routing nodes and leaves alike):
//   baseline  ASCYLIB's bst-aravind node: key, value, right, left, padded to a
//             64-byte line; lookups run the update's seek, which writes a seek
//             record per level.
//   fixed     32 bytes: key, left, right, value, so a search reads key and child
//             in the first 24 bytes and no node straddles a line; lookups only
//             follow child pointers.
// An insert allocates the routing node and then the leaf, back to back, as the
// published code does: that order is what puts 3 in 4 leaves on their parent's
// cache line with 32-byte nodes (the study's "collocation luck", §3.2.4).
#pragma once

#include "bst.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::trees {

struct EdgeExtLfBaselineLayout {
  struct Node {
    Key key;                      // 0
    Value value;                  // 8
    std::atomic<uintptr_t> right; // 16: Node * | tag | flag
    std::atomic<uintptr_t> left;  // 24
    uint8_t padding[64 - 32];     // ASCYLIB's ALIGNED(64)
  };
  static constexpr bool kLeanLookup = false;
};
static_assert(sizeof(EdgeExtLfBaselineLayout::Node) == 64);

struct EdgeExtLfFixedLayout {
  struct Node {
    Key key;                      // 0
    std::atomic<uintptr_t> left;  // 8
    std::atomic<uintptr_t> right; // 16
    Value value;                  // 24: read only by a lookup that hits
  };
  static constexpr bool kLeanLookup = true;
};
static_assert(sizeof(EdgeExtLfFixedLayout::Node) == 32);
static_assert(offsetof(EdgeExtLfFixedLayout::Node, right) + sizeof(uintptr_t) <= 24);

// Test access: tests/trees/edge_ext_lf_test.cpp stops a remove half way.
template <class L> struct EdgeExtLfProbe;

template <class L> class EdgeExtLf final : public Bst<EdgeExtLf, L> {
public:
  using Node = typename L::Node;

  // Bits of a child pointer (nodes are at least 16-byte aligned).
  static constexpr uintptr_t kFlag = 1; // the edge's leaf is being removed
  static constexpr uintptr_t kTag = 2;  // the edge's parent is being removed
  static constexpr uintptr_t kMarks = kFlag | kTag;

  // Sentinel keys, above every user key: a user key always goes left of them.
  static constexpr Key kInf0 = kMaxKey + 1;
  static constexpr Key kInf1 = kMaxKey + 2;
  static constexpr Key kInf2 = kMaxKey + 3;

  explicit EdgeExtLf(AllocPolicy policy);
  ~EdgeExtLf() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks: leaves hold the keys (and a sentinel).
  static Node *child(const Node *n, bool right) {
    return address((right ? n->right : n->left).load(std::memory_order_acquire));
  }
  const Node *key_root() const { return child(first_, false); }
  static bool entry(const Node *n, Key *key, Value *value) {
    *key = n->key;
    *value = n->value;
    return !child(n, false) && n->key <= kMaxKey;
  }

private:
  friend struct EdgeExtLfProbe<L>;

  // Where a seek for a key ended: `leaf` and its `parent`, and the last
  // unmarked edge above them, ancestor -> successor. Every edge from
  // `successor` down to `parent` is tagged, so a cleanup's one CAS on the
  // ancestor's edge unlinks successor..parent together.
  struct SeekRecord {
    Node *ancestor;
    Node *successor;
    Node *parent;
    Node *leaf;
  };

  static Node *address(uintptr_t edge) { return reinterpret_cast<Node *>(edge & ~kMarks); }
  static uintptr_t edge_to(const Node *n) { return reinterpret_cast<uintptr_t>(n); }
  static std::atomic<uintptr_t> &edge_of(Node *n, bool right) { return right ? n->right : n->left; }
  static bool goes_right(Key key, const Node *n) { return !(key < n->key); }

  SeekRecord seek(Key key) const;
  bool cleanup(Key key, const SeekRecord &s);
  void retire_unlinked_chain(Key key, const SeekRecord &s, const Node *kept);

  // Routing nodes and leaves are one kind, allocated here in the published
  // order: the routing node first.
  Node *new_node();

  // The sentinels live here, not in the node pool, as ASCYLIB allocates them
  // apart from its per-insert nodes: five 32-byte sentinels in the pool would
  // shift every later routing/leaf pair by one slot, off its line (the
  // study's "shifted" variant, 75% of leaves on the next line instead).
  Node sentinels_[5];
  Node *const root_ = &sentinels_[0];  // R: key kInf2, left S, right leaf kInf2
  Node *const first_ = &sentinels_[1]; // S: key kInf1, left the user tree (or leaf kInf0),
                                       //    right leaf kInf1
  bool is_sentinel(const Node *n) const {
    for (const Node &s : sentinels_)
      if (n == &s)
        return true;
    return false;
  }
};

extern template class EdgeExtLf<EdgeExtLfBaselineLayout>;
extern template class EdgeExtLf<EdgeExtLfFixedLayout>;

} // namespace memlayout::trees
