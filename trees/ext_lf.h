// ext-lf: Ellen, Fatourou, Ruppert and van Breugel, "Non-blocking binary
// search trees" (PODC 2010), as ASCYLIB's bst-ellen implements it. An
// external BST: keys and values in leaves, routing keys in internal nodes,
// and on each internal node an `update` word: an info record's address with
// the node's state in the low two bits (CLEAN, IFLAG, DFLAG, MARK).
//
// An insert replaces a leaf l by a new internal node over a new leaf and a
// copy of l, after flagging l's parent IFLAG with an IInfo record. A remove
// flags the grandparent DFLAG with a DInfo record, marks the parent (frozen
// for good) and swings the grandparent's child pointer from the parent to the
// leaf's sibling. Whoever finds a flag or a mark completes that operation
// from its info record (or backs a delete out when its parent changed).
//
// Unlinked nodes and info records are reclaimed through the epochs; when each
// becomes safe to retire is explained in ext_lf.cpp.
#pragma once

#include "bst.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::trees {
namespace ext_lf {

// The state in an update word's low bits.
inline constexpr uintptr_t kClean = 0;
inline constexpr uintptr_t kDFlag = 1;
inline constexpr uintptr_t kIFlag = 2;
inline constexpr uintptr_t kMark = 3;
inline constexpr uintptr_t kStateMask = 3;

// IInfo and DInfo share one record type, as in ASCYLIB: an insert uses p, l
// and new_internal; a delete gp, p, l and p's update word as the delete saw it.
template <class Node> struct InfoFields {
  Node *p;
  Node *l;
  union {
    Node *new_internal; // insert
    Node *gp;           // delete
  };
  uintptr_t pupdate; // delete
};

} // namespace ext_lf

// ASCYLIB's layout: key, value, update, children and the leaf flag, padded to
// a line; the info record a union padded to a line. A search reads the leaf
// flag at byte 40, after the value it does not need.
struct ExtLfBaselineLayout {
  struct Node {
    Key key;                       // 0
    Value value;                   // 8
    std::atomic<uintptr_t> update; // 16
    std::atomic<Node *> left;      // 24
    std::atomic<Node *> right;     // 32
    uint8_t leaf;                  // 40
    uint8_t padding[64 - 41];      // to the cache-line size
  };
  struct Info : ext_lf::InfoFields<Node> {
    char padding[64 - sizeof(ext_lf::InfoFields<Node>)];
  };
  static bool is_leaf(const Node *n) { return n->leaf != 0; }
  static void set_leaf(Node *n, bool leaf) { n->leaf = leaf; }
  // ASCYLIB's lookup runs the update's search, keeping gp, p and their update words.
  static constexpr bool kLeanLookup = false;
};
static_assert(sizeof(ExtLfBaselineLayout::Node) == 64);
static_assert(offsetof(ExtLfBaselineLayout::Node, leaf) == 40);
static_assert(sizeof(ExtLfBaselineLayout::Info) == 64);

// The study's fix: no padding, search fields first (key, children, then the
// update word, which only updates' searches read), no leaf flag (a leaf is a
// node without children): 40 bytes. Lookups follow children and nothing else.
struct ExtLfFixedLayout {
  struct Node {
    Key key;                       // 0
    std::atomic<Node *> left;      // 8: null in a leaf
    std::atomic<Node *> right;     // 16
    std::atomic<uintptr_t> update; // 24
    Value value;                   // 32: leaves only
  };
  using Info = ext_lf::InfoFields<Node>;
  static bool is_leaf(const Node *n) { return n->left.load(std::memory_order_acquire) == nullptr; }
  static void set_leaf(Node *, bool) {}
  static constexpr bool kLeanLookup = true;
};
static_assert(sizeof(ExtLfFixedLayout::Node) == 40);
static_assert(sizeof(ExtLfFixedLayout::Info) == 32);

// Tests' access to the internals (stalling an operation half way).
template <class L> struct ExtLfProbe;

template <class L> class ExtLf final : public Bst<ExtLf, L> {
public:
  using Node = typename L::Node;
  using Info = typename L::Info;

  explicit ExtLf(AllocPolicy policy);
  ~ExtLf() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks: leaves hold the keys (and the sentinels).
  static Node *child(const Node *n, bool right) {
    return (right ? n->right : n->left).load(std::memory_order_acquire);
  }
  const Node *key_root() const { return child(root_, false); }
  static bool entry(const Node *n, Key *key, Value *value) {
    *key = n->key;
    *value = n->value;
    return L::is_leaf(n) && n->key <= kMaxKey;
  }

private:
  friend struct ExtLfProbe<L>;

  // Where the update's search for a key ended: the leaf, its parent and
  // grandparent, and the update words the search read on them.
  struct SearchResult {
    Node *gp = nullptr;
    Node *p = nullptr;
    Node *l = nullptr;
    uintptr_t gpupdate = 0;
    uintptr_t pupdate = 0;
  };

  void search(Key key, SearchResult &s) const;
  void help(uintptr_t update);
  void help_insert(Info *op);
  bool help_delete(Info *op);
  void help_marked(Info *op);
  void retire_replaced_info(uintptr_t replaced);

  Node *new_node(Key key, Value value, Node *left, Node *right);
  Info *new_info();

  RecordAllocator::Kind info_kind_;
  Node *root_; // routing key kMaxKey + 2 over the sentinel leaves kMaxKey + 1 and + 2
};

extern template class ExtLf<ExtLfBaselineLayout>;
extern template class ExtLf<ExtLfFixedLayout>;

} // namespace memlayout::trees
