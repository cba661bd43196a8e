// int-lf: Howley and Jones, "A non-blocking internal binary search tree"
// (SPAA 2012), as ASCYLIB's bst-howley and setbench's howley implement it.
// An internal BST whose nodes each carry an `op` word: the address of an
// operation descriptor with its kind in the low two bits (NONE, MARK,
// CHILDCAS, RELOCATE). An update first CASes its descriptor into the op word
// of the node it changes, which locks that node's children (and key) against
// every other update, then performs the change and clears the flag; anyone
// who meets a flagged node completes the operation from the descriptor
// instead of waiting. Removing a node with two children copies its
// successor's key and value into it (RELOCATE, on both nodes) and unlinks the
// successor.
//
// Descriptors are never freed while the tree runs: the op words then never
// see an address twice, which is what makes their CASes ABA-free (the paper
// and the study do the same). They are freed with the tree.
#pragma once

#include "bst.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace memlayout::trees {
namespace int_lf {

// The state in an op word's low bits.
inline constexpr uintptr_t kOpNone = 0;
inline constexpr uintptr_t kOpMark = 1;
inline constexpr uintptr_t kOpChildCas = 2;
inline constexpr uintptr_t kOpRelocate = 3;
inline constexpr uintptr_t kOpStateMask = 3;

// A child word holds a node's address, or a null: an odd word. A node is born
// with kNull children; every null a remove writes is a fresh odd word, never
// written before, so a late CAS that expects an old null cannot succeed.
inline constexpr uintptr_t kNull = 1;

// A relocation's outcome, decided once by CAS.
inline constexpr int kOngoing = 0;
inline constexpr int kSuccessful = 1;
inline constexpr int kFailed = 2;

// A node's key and value, next to each other on a 16-byte boundary: a
// relocation replaces both with one 16-byte CAS, so a reader validated by the
// op word never sees one without the other.
struct KeyValue {
  Key key;
  Value value;
};

// Every descriptor the tree published, per thread, to be freed with the tree.
// Appending is a store into the thread's current chunk; a thread takes the
// mutex only for a new chunk, or when it switches between trees.
class DescriptorLog {
public:
  explicit DescriptorLog(const RecordAllocator &records);
  DescriptorLog(const DescriptorLog &) = delete;
  DescriptorLog &operator=(const DescriptorLog &) = delete;
  ~DescriptorLog(); // frees every logged descriptor

  // kind < 8: it rides in the low bits of the (8-byte aligned) address.
  void add(RecordAllocator::Kind kind, void *descriptor);
  size_t size() const; // quiescent

private:
  struct Chunk;
  Chunk *chunk_for_this_thread();

  const RecordAllocator &records_;
  uint64_t id_; // never reused, unlike addresses: keys the threads' caches
  std::mutex mutex_;
  std::vector<Chunk *> chunks_;
  std::unordered_map<std::thread::id, Chunk *> open_chunk_;
};

} // namespace int_lf

// ASCYLIB's layout: a node of key, value, op and children padded to a line,
// and one 64-byte descriptor type (a union padded to a line) for both kinds
// of operation. Each insert allocates a 64-byte node and then a 64-byte
// descriptor from the same size class: the study's headline case, nodes on
// every other line and half of the cache sets.
struct IntLfBaselineLayout {
  struct Node {
    int_lf::KeyValue kv;          // 0: key, value
    std::atomic<uintptr_t> op;    // 16
    std::atomic<uintptr_t> left;  // 24
    std::atomic<uintptr_t> right; // 32
    char padding[64 - 40];        // to the cache-line size
  };
  struct ChildCasOp {
    bool is_left;       // 0
    uintptr_t expected; // 8: child word before
    uintptr_t update;   // 16: child word after
    char padding[64 - 24];
  };
  struct RelocateOp {
    std::atomic<int> state;   // 0
    Node *dest;               // 8: the node whose key is removed
    uintptr_t dest_op;        // 16: its op word when the remove saw it
    int_lf::KeyValue remove;  // 24
    int_lf::KeyValue replace; // 40: the successor's key and value
    char padding[64 - 56];
  };
};
static_assert(sizeof(IntLfBaselineLayout::Node) == 64);
static_assert(sizeof(IntLfBaselineLayout::ChildCasOp) == 64);
static_assert(sizeof(IntLfBaselineLayout::RelocateOp) == 64);

// The study's fix: no padding, and the fields a search reads (op, key, the
// child it follows) first, the value after the key because the two move
// together (a search going left reads only the first 24 bytes): a 40-byte
// node, and descriptors of their natural size, so nodes and descriptors come
// from different size classes.
struct IntLfFixedLayout {
  struct Node {
    std::atomic<uintptr_t> op;    // 0
    std::atomic<uintptr_t> left;  // 8
    int_lf::KeyValue kv;          // 16: key, value
    std::atomic<uintptr_t> right; // 32
  };
  struct ChildCasOp {
    bool is_left;       // 0
    uintptr_t expected; // 8
    uintptr_t update;   // 16
  };
  struct RelocateOp {
    std::atomic<int> state;   // 0
    Node *dest;               // 8
    uintptr_t dest_op;        // 16
    int_lf::KeyValue remove;  // 24
    int_lf::KeyValue replace; // 40
  };
};
static_assert(sizeof(IntLfFixedLayout::Node) == 40);
static_assert(sizeof(IntLfFixedLayout::ChildCasOp) == 24);
static_assert(sizeof(IntLfFixedLayout::RelocateOp) == 56);
static_assert(offsetof(IntLfBaselineLayout::Node, kv) % 16 == 0);
static_assert(offsetof(IntLfFixedLayout::Node, kv) % 16 == 0);

// Tests' access to the internals (stalling an operation half way).
template <class L> struct IntLfProbe;

template <class L> class IntLf final : public Bst<IntLf, L> {
public:
  using Node = typename L::Node;
  using ChildCasOp = typename L::ChildCasOp;
  using RelocateOp = typename L::RelocateOp;

  explicit IntLf(AllocPolicy policy);
  ~IntLf() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  std::string check_structure() const override;

  // Bst's quiescent walks: a marked node's key is removed.
  static Node *child(const Node *n, bool right);
  const Node *key_root() const { return child(root_, true); }
  static bool entry(const Node *n, Key *key, Value *value);

private:
  friend struct IntLfProbe<L>;

  enum class Found { kFound, kNotFoundLeft, kNotFoundRight, kAbort };
  // Where a search ended: curr and its parent, with the op words they had.
  struct Position {
    Node *pred = nullptr;
    uintptr_t pred_op = 0;
    Node *curr = nullptr;
    uintptr_t curr_op = 0;
    Value value = 0; // when found
  };

  Found find(Key key, Position &pos, Node *aux_root);
  void help(Node *pred, uintptr_t pred_op, Node *curr, uintptr_t curr_op, Node *last_right);
  void help_child_cas(ChildCasOp *op, Node *dest);
  bool help_relocate(RelocateOp *op, Node *pred, uintptr_t pred_op, Node *curr, bool dest_reached,
                     bool *unlink_installed);
  bool help_marked(Node *pred, uintptr_t pred_op, Node *curr);
  void unlink_marked(Key key);

  Node *new_node(Key key, Value value);
  ChildCasOp *new_descriptor();
  RelocateOp *new_relocate_descriptor();

  RecordAllocator::Kind descriptor_kind_;
  RecordAllocator::Kind relocate_kind_;
  int_lf::DescriptorLog descriptors_;
  Node *root_; // key kMinKey - 1: the tree is its right subtree
};

extern template class IntLf<IntLfBaselineLayout>;
extern template class IntLf<IntLfFixedLayout>;

} // namespace memlayout::trees
