// citrus: the unbalanced internal BST of Arbel and Attiya ("Concurrent
// Updates with RCU: Search Tree as an Example", PODC 2014).
//
// Searches run inside an RCU read-side section and take no locks. Updates
// search the same way, then lock the nodes they change and validate them
// (not marked, still linked as seen; a null child slot also by its tag, a
// counter bumped whenever the slot becomes null again, so a slot that
// filled and emptied meanwhile is not mistaken for the one seen). Removing a
// node with two children replaces it by a fresh copy of its successor, waits
// for every reader already inside a read-side section (RCU synchronize:
// those may still be on their way to the old successor), and only then
// unlinks the old successor.
//
// The RCU is citrus.cpp's own, after the authors' user-space one: a
// per-thread counter, odd inside a read-side section; synchronize waits for
// each odd counter to move on.
#pragma once

#include "bst.h"
#include "spin_lock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::trees {

// The published layout (ASCYLIB/the authors' node: key, value, children,
// lock, marked, tags), padded to a 64-byte line. A pthread mutex (40 B)
// would not fit these fields in 64 bytes; the lock is a pthread spin lock.
// A search reads key (0) and a child (16/24).
struct CitrusBaselineLayout : PthreadSpinLock {
  struct Node {
    Key key;                      // 0
    Value value;                  // 8
    std::atomic<Node *> child[2]; // 16: left, right
    Lock lock;                    // 32
    std::atomic<bool> marked;     // 36
    std::atomic<uint32_t> tag[2]; // 40
    uint8_t padding[64 - 48];     // to the cache-line size
  };
};
static_assert(sizeof(CitrusBaselineLayout::Node) == 64);
static_assert(offsetof(CitrusBaselineLayout::Node, child) == 16);

// The study's fix: search fields first (key, children), a 4-byte spin lock,
// no padding: 48 bytes (one node in four then straddles two lines).
struct CitrusFixedLayout : WordSpinLock {
  struct Node {
    Key key;                      // 0
    std::atomic<Node *> child[2]; // 8: left, right
    Value value;                  // 24: read by lookups that hit
    Lock lock;                    // 32
    std::atomic<bool> marked;     // 36
    std::atomic<uint32_t> tag[2]; // 40
  };
};
static_assert(sizeof(CitrusFixedLayout::Node) == 48);
static_assert(offsetof(CitrusFixedLayout::Node, child) == 8);

template <class L> class Citrus final : public Bst<Citrus, L> {
public:
  using Node = typename L::Node;

  explicit Citrus(AllocPolicy policy);
  ~Citrus() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks.
  static Node *child(const Node *n, bool right) {
    return n->child[right].load(std::memory_order_acquire);
  }
  const Node *key_root() const { return child(root_, false); }
  static bool entry(const Node *n, Key *key, Value *value) {
    *key = n->key;
    *value = n->value;
    return true;
  }

private:
  // Where a search for a key ended: curr holds the key (or is null), and is
  // prev's child in direction dir; tag is prev's tag for dir, read before
  // the child.
  struct Position {
    Node *prev;
    Node *curr;
    int dir;
    uint32_t tag;
  };

  Node *new_node(Key key, Value value);

  Position traverse(Key key) const; // inside a read-side section
  static bool validate(const Node *prev, uint32_t tag, const Node *curr, int dir);
  // Both removals: prev and curr locked and validated. Unlock what they lock.
  void remove_with_at_most_one_child(Node *prev, Node *curr, int dir);
  bool remove_with_two_children(Node *prev, Node *curr, int dir);

  Node *root_; // sentinel kMaxKey + 1: the tree is its left subtree
};

extern template class Citrus<CitrusBaselineLayout>;
extern template class Citrus<CitrusFixedLayout>;

// Waits until every thread that was inside a citrus read-side section when
// this was called has left it. Must not be called from inside one. Exposed
// for the tests.
void citrus_synchronize_readers();

} // namespace memlayout::trees
