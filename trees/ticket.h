// ticket: BST-TK of David, Guerraoui and Trigonakis ("Asynchronized
// Concurrency: The Secret to Scaling Concurrent Search Data Structures",
// ASPLOS 2015), ASCYLIB's bst-tk. An external BST (keys in leaves, routing
// keys in internal nodes) whose searches take no locks and write nothing.
// Each node carries a pair of versioned try-locks, one per child pointer: an
// update records the versions while it searches and locks with "only if the
// version is still the one I saw", so a successful lock also validates what
// the search read, and a failed one restarts the operation. A removed node
// stays locked forever, which fails every update that saw it.
#pragma once

#include "bst.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::trees {

// BST-TK's lock word: one 32-bit half per child pointer. ASCYLIB packs a
// 16-bit ticket lock {version, ticket} into each half and only ever try-locks
// it ("lock if ticket == version == what I saw"); with no waiting, ticket is
// version + held, so a half here is version << 1 | held, which gives the same
// operations with 31-bit versions that cannot wrap within a search.
class TicketLockPair {
public:
  static constexpr uint32_t kHeld = 1; // in a half
  static constexpr uint64_t kBothHeld = uint64_t{kHeld} | uint64_t{kHeld} << 32;

  uint64_t observe() const { return word_.load(std::memory_order_acquire); }

  // Locks half `dir` if it is free and unchanged since `seen` was observed.
  bool try_lock_half(int dir, uint64_t seen) {
    uint32_t expected_half = half(seen, dir);
    if (expected_half & kHeld)
      return false;
    uint64_t cur = word_.load(std::memory_order_relaxed);
    while (half(cur, dir) == expected_half) {
      // The other half may change under us (its own inserts): retry for that.
      if (word_.compare_exchange_weak(cur, with_half(cur, dir, expected_half | kHeld),
                                      std::memory_order_acquire, std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // Locks both halves for good (the node is being removed) if neither
  // changed since `seen`.
  bool try_lock_both_forever(uint64_t seen) {
    if ((half(seen, 0) & kHeld) || (half(seen, 1) & kHeld))
      return false;
    uint64_t expected = seen;
    return word_.compare_exchange_strong(expected, seen | kBothHeld, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  // Releases a held half with a new version: searches that saw the old one fail.
  void unlock_half(int dir) {
    replace_half(dir, static_cast<uint32_t>((half_now(dir) | kHeld) + 1));
  }
  // Releases a held half with its old version: nothing changed under it.
  void revert_half(int dir) { replace_half(dir, half_now(dir) & ~kHeld); }

  // Quiescent checks.
  bool any_held() const { return (observe() & kBothHeld) != 0; }

  // The word as plain data, for a node no update ever locks (a leaf: updates
  // lock routing nodes only), which may keep something else in it.
  void store_data(uint64_t v) { word_.store(v, std::memory_order_relaxed); }
  uint64_t data() const { return word_.load(std::memory_order_relaxed); }

private:
  static uint32_t half(uint64_t word, int dir) { return static_cast<uint32_t>(word >> (32 * dir)); }
  static uint64_t with_half(uint64_t word, int dir, uint32_t h) {
    uint64_t mask = uint64_t{0xffffffff} << (32 * dir);
    return (word & ~mask) | (uint64_t{h} << (32 * dir));
  }
  uint32_t half_now(int dir) const { return half(word_.load(std::memory_order_relaxed), dir); }
  // Only the holder writes a held half; the loop is for the other half's
  // owner writing at the same time.
  void replace_half(int dir, uint32_t h) {
    uint64_t cur = word_.load(std::memory_order_relaxed);
    while (!word_.compare_exchange_weak(cur, with_half(cur, dir, h), std::memory_order_release,
                                        std::memory_order_relaxed)) {
    }
  }

  std::atomic<uint64_t> word_{0};
};

// ASCYLIB's node: key, value, children, lock, padded to a 64-byte line.
// Searches read the leaf flag, key and a child, all in the first 32 bytes:
// ASCYLIB keeps the flag in a union with the value (a routing node's value
// word is 0, a leaf's value never is). Our values may be 0, so the flag is
// the key word's top bit instead (user keys and sentinels stay below 2^62):
// the same bytes, read by the same loads. (It once sat after the lock, at
// 40, where one search step in four crossed into the next line that
// ASCYLIB's does not touch: 0.76x its lookups on 64 K keys.)
struct TicketBaselineLayout {
  struct Node {
    Key key;                      // 0: with the leaf flag in bit 63
    Value value;                  // 8
    std::atomic<Node *> child[2]; // 16: left, right
    TicketLockPair lock;          // 32
    uint8_t padding[64 - 40];     // to the cache-line size
  };
  static constexpr uint64_t kLeafBit = uint64_t{1} << 63;
  static bool is_leaf(const Node *n) { return n->key < 0; }
  static Key key_of(const Node *n) {
    return static_cast<Key>(static_cast<uint64_t>(n->key) & ~kLeafBit);
  }
  // After the key is stored.
  static void mark_leaf(Node *n, bool leaf) {
    uint64_t k = static_cast<uint64_t>(n->key) & ~kLeafBit;
    n->key = static_cast<Key>(leaf ? k | kLeafBit : k);
  }
  static Value value_of(const Node *n) { return n->value; }
  static void set_value(Node *n, Value v) { n->value = v; }
  static constexpr bool kLeavesHaveLocks = true;
};
static_assert(sizeof(TicketBaselineLayout::Node) == 64);
static_assert(offsetof(TicketBaselineLayout::Node, child) == 16);

// The study's fix: no padding, search fields first (key, children), and no
// leaf flag (a leaf is a node without children, which the search reads
// anyway). A routing node needs a lock and no value, a leaf a value and no
// lock (updates lock routing nodes only), so one word holds either: 32
// bytes, two to a line in a pool. (At 40 bytes, with the value a word of its
// own, half of the nodes crossed a line in the pool's 48-byte class, search
// fields included for one in four: `memlayout report` flagged it.)
struct TicketFixedLayout {
  struct Node {
    Key key;                      // 0
    std::atomic<Node *> child[2]; // 8: left, right (both null in a leaf)
    TicketLockPair lock;          // 24: a routing node's lock, a leaf's value
  };
  static bool is_leaf(const Node *n) {
    return n->child[0].load(std::memory_order_relaxed) == nullptr;
  }
  static Key key_of(const Node *n) { return n->key; }
  static void mark_leaf(Node *, bool) {}
  static Value value_of(const Node *n) { return static_cast<Value>(n->lock.data()); }
  // Before the node is published; a routing node's 0 is its lock, free.
  static void set_value(Node *n, Value v) { n->lock.store_data(static_cast<uint64_t>(v)); }
  static constexpr bool kLeavesHaveLocks = false;
};
static_assert(sizeof(TicketFixedLayout::Node) == 32);

template <class L> class Ticket final : public Bst<Ticket, L> {
public:
  using Node = typename L::Node;

  explicit Ticket(AllocPolicy policy);
  ~Ticket() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks: leaves hold the keys (and the sentinels).
  static Node *child(const Node *n, bool right) {
    return n->child[right].load(std::memory_order_acquire);
  }
  const Node *key_root() const { return child(root_, false); }
  static bool entry(const Node *n, Key *key, Value *value) {
    *key = L::key_of(n);
    *value = L::value_of(n);
    return L::is_leaf(n) && *key >= kMinKey && *key <= kMaxKey;
  }

private:
  // Leaves and routing nodes are one record kind, "node", as in bst-tk.
  Node *new_node(Key key, Value value, Node *left, Node *right);

  Node *root_; // routing key kMaxKey + 1: every user key goes left
};

extern template class Ticket<TicketBaselineLayout>;
extern template class Ticket<TicketFixedLayout>;

} // namespace memlayout::trees
