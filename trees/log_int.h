// log-int: the unbalanced internal BST of Drachsler, Vechev and Yahav
// ("Practical Concurrent Binary Search Trees via Logical Ordering",
// PPoPP 2014).
//
// Every node is also on a sorted doubly linked list (pred/succ) holding the
// same keys: the list is the tree's logical contents, the tree only a fast
// way into it. A lookup walks the tree without locks or restarts, lands near
// the key and finishes on the list (the pred/succ walk corrects a search that
// a concurrent removal led astray); a key is present iff its node is on the
// list and not marked. Updates serialize on the list with a per-node
// succLock (held on the predecessor of the affected interval), then change
// the tree under per-node treeLocks: a node with two children is replaced by
// its successor, moved (not copied) into its place.
#pragma once

#include "bst.h"
#include "spin_lock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::trees {

// The published layout (ASCYLIB's bst-drachsler as ported to setbench, its
// BASELINE build, which the study measured): links first, the locks, then
// key, value and mark, padded to 96 bytes; the port's alignas(64) rounds that
// to 128. (ASCYLIB's own C build allocates sizeof(node_t), 96: GCC's aligned
// typedef does not round the size, so its nodes sit 96 bytes apart, 112 in
// malloc's chunks.) The published locks are pthread spin locks (4 B each):
// pthread mutexes (40 B) could not fit these fields in 96 or 128 bytes.
// 128-byte records sit two lines apart, on every other cache set (the
// study's "similar issue" to int-lf's); the study also padded the node to
// 192 bytes, an odd number of lines that reaches every set, at the cost of
// 64 more bytes per key. A search reads key (48) and a child (0/8); a lookup
// that misses reads pred/succ (32/24), one that hits the mark (64, the
// second line).
struct LogIntBaselineLayout : PthreadSpinLock {
  struct Node {
    std::atomic<Node *> left;  // 0
    std::atomic<Node *> right; // 8
    std::atomic<Node *> parent;
    std::atomic<Node *> succ; // 24
    std::atomic<Node *> pred; // 32
    Lock tree_lock;           // 40
    Lock succ_lock;           // 44
    Key key;                  // 48
    Value value;              // 56
    std::atomic<bool> mark;   // 64
    uint8_t padding[128 - 65];
  };
};
static_assert(sizeof(LogIntBaselineLayout::Node) == 128);
static_assert(offsetof(LogIntBaselineLayout::Node, key) == 48);
static_assert(offsetof(LogIntBaselineLayout::Node, mark) == 64);

// The study's fix (setbench's FIELDS_ORDER without padding): key, children,
// list links and mark first, the spin locks last, in one line: 64 bytes.
// With 4-byte locks the node is 72 bytes and in a pool's 80-byte class one
// node in four has its search fields across a line, every other one its
// list links and mark (the lookup's second read) on a second line; with
// one-byte locks every node is a line of its own.
struct LogIntFixedLayout : ByteSpinLock {
  struct Node {
    Key key;                   // 0
    std::atomic<Node *> left;  // 8
    std::atomic<Node *> right; // 16
    std::atomic<Node *> succ;  // 24
    std::atomic<Node *> pred;  // 32
    Value value;               // 40
    std::atomic<Node *> parent;
    std::atomic<bool> mark; // 56
    Lock tree_lock;         // 57
    Lock succ_lock;         // 58
  };
};
static_assert(sizeof(LogIntFixedLayout::Node) == 64);
static_assert(offsetof(LogIntFixedLayout::Node, mark) == 56);

// Tests' access to the internals (stalling an operation half way).
template <class L> struct LogIntProbe;

template <class L> class LogInt final : public Bst<LogInt, L> {
public:
  using Node = typename L::Node;

  explicit LogInt(AllocPolicy policy);
  ~LogInt() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks. Quiescent, the tree's in-order is the list's
  // unmarked nodes (check_structure checks it).
  static Node *child(const Node *n, bool right) {
    return (right ? n->right : n->left).load(std::memory_order_acquire);
  }
  const Node *key_root() const { return child(root_, false); }
  static bool entry(const Node *n, Key *key, Value *value) {
    *key = n->key;
    *value = n->value;
    return !n->mark.load(std::memory_order_acquire);
  }

private:
  friend struct LogIntProbe<L>;

  Node *new_node(Key key, Value value);

  Node *search(Key key) const;
  static Node *list_position(Node *n, Key key);
  static Node *succ_of(const Node *n);
  static void unlink_from_list(Node *p, Node *s);
  Node *choose_parent(Node *pred, Node *succ, Node *first_candidate);
  Node *lock_parent(Node *node);
  bool acquire_tree_locks(Node *node);
  void remove_from_tree(Node *node, bool has_two_children);

  // Sentinels: min_ (kMinKey - 1) heads the list; root_ (kMaxKey + 1) is the
  // tree's root, min_'s right child, and the list's tail. User keys live in
  // root_'s left subtree.
  Node *min_;
  Node *root_;
};

extern template class LogInt<LogIntBaselineLayout>;
extern template class LogInt<LogIntFixedLayout>;

} // namespace memlayout::trees
