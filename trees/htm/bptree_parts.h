// What the two HTM B+trees share: keys and payloads of configurable size,
// the inner (routing) nodes with their search and split, and the per-thread
// spare records a transaction takes nodes from (a transaction must not call
// malloc: the allocator's own lines would join its read and write sets).
//
// Records are byte arrays whose layout (offsets) is computed at run time
// from the key, payload and node sizes; every access goes through a Tx.
#pragma once

#include "htm/htm_config.h"
#include "htm/thread_index.h"
#include "htm/transaction.h"
#include "map.h"
#include "structure_errors.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace memlayout::trees::htm {

// Keys are `key_bytes` long: the 8-byte key, then filler a comparison reads
// too (a memcmp of keys sharing a prefix); payloads are `value_bytes`: the
// 8-byte value, then filler a lookup copies out and an update rewrites.
struct KeyCodec {
  uint32_t key_bytes = 8, value_bytes = 8;

  Key read_key(const Tx &tx, const uint8_t *at) const {
    Key k = tx.load(reinterpret_cast<const Key *>(at));
    if (key_bytes > 8)
      tx.touch(at + 8, key_bytes - 8);
    return k;
  }
  void write_key(const Tx &tx, uint8_t *at, Key k) const;
  Value read_value(const Tx &tx, const uint8_t *at) const {
    Value v = tx.load(reinterpret_cast<const Value *>(at));
    if (value_bytes > 8)
      tx.touch(at + 8, value_bytes - 8);
    return v;
  }
  void write_value(const Tx &tx, uint8_t *at, Value v) const;
  // Copies one key or payload between records (splits, shifts).
  void copy(const Tx &tx, uint8_t *to, const uint8_t *from, uint32_t bytes) const;

  // Quiescent reads (for_each, check_structure).
  static Key plain_key(const uint8_t *at) { return *reinterpret_cast<const Key *>(at); }
  // Whether a key's filler is what write_key wrote (a shift or split that
  // copied only the first 8 bytes would leave another key's).
  bool filler_intact(const uint8_t *at) const;
  static Value plain_value(const uint8_t *at) { return *reinterpret_cast<const Value *>(at); }
};

// Bytes rounded up to whole lines.
inline uint32_t line_round(uint32_t bytes) { return (bytes + 63) / 64 * 64; }

// An inner node: a count, `fanout` separator keys and fanout + 1 children.
// Child i holds the keys k with key[i-1] <= k < key[i]. Baseline: the
// fields back to back (DBX's layout); fixed: the count alone on the first
// line, keys and children each starting a line.
struct InnerShape {
  uint32_t fanout = 0;
  uint32_t count_off = 0, keys_off = 0, children_off = 0, bytes = 0;
  uint32_t key_bytes = 8;

  static InnerShape make(bool fixed, uint32_t node_bytes, uint32_t key_bytes);
  uint8_t *key_at(uint8_t *n, uint32_t i) const { return n + keys_off + i * key_bytes; }
  const uint8_t *key_at(const uint8_t *n, uint32_t i) const { return n + keys_off + i * key_bytes; }
  uint8_t **child_slot(uint8_t *n, uint32_t i) const {
    return reinterpret_cast<uint8_t **>(n + children_off) + i;
  }
  uint8_t *const *child_slot(const uint8_t *n, uint32_t i) const {
    return reinterpret_cast<uint8_t *const *>(n + children_off) + i;
  }
  uint32_t *count(uint8_t *n) const { return reinterpret_cast<uint32_t *>(n + count_off); }
  const uint32_t *count(const uint8_t *n) const {
    return reinterpret_cast<const uint32_t *>(n + count_off);
  }
};

// Per thread, records allocated ahead of need; a transaction takes them by
// position and the thread drops the ones it used after the commit.
class SpareRecords {
public:
  using Allocate = std::function<uint8_t *()>;
  SpareRecords();
  ~SpareRecords();
  // Each thread's pool of one kind.
  std::vector<uint8_t *> &mine() { return pools_[thread_index()]; }
  // Tops the calling thread's pool up to n records.
  void fill(size_t n, const Allocate &allocate);
  // Drops the first `used` records of the calling thread's pool (now in the tree).
  void consume(size_t used);
  // Quiescent: every pooled record, for the tree's destructor.
  std::vector<uint8_t *> drain();

private:
  std::unique_ptr<std::vector<uint8_t *>[]> pools_;
};

// Takes spare records inside one execution of a region body: from the pool
// in a transaction (aborting for more when it runs dry), allocated on the
// spot on the fallback path.
class SpareCursor {
public:
  SpareCursor(const Tx &tx, SpareRecords &pool, const SpareRecords::Allocate &allocate)
      : tx_(tx), pool_(pool), allocate_(allocate) {}
  uint8_t *take();
  size_t used() const { return used_; }

private:
  const Tx &tx_;
  SpareRecords &pool_;
  const SpareRecords::Allocate &allocate_;
  size_t used_ = 0;
};

// The inner levels of a B+tree and the operations both trees need on them.
class InnerLevels {
public:
  InnerLevels(InnerShape shape, KeyCodec codec) : s_(shape), codec_(codec) {}
  const InnerShape &shape() const { return s_; }

  // The child to follow for `key` (its index in the node).
  uint32_t child_index(const Tx &tx, const uint8_t *node, Key key) const;
  uint8_t *child(const Tx &tx, const uint8_t *node, uint32_t i) const {
    return tx.load(s_.child_slot(node, i));
  }

  // A path from the root: the inner nodes and the child index taken in each.
  static constexpr int kMaxDepth = 48;
  struct Path {
    uint8_t *node[kMaxDepth];
    uint32_t index[kMaxDepth];
    int depth = 0;
  };

  // After a child at path level `level` split into (child, right) with
  // separator `sep`: inserts (sep, right) into the parent, splitting inner
  // nodes up the path as needed and growing a new root (written through
  // root/height) when the split reaches it.
  void insert_separator(const Tx &tx, Path &path, int level, Key sep, uint8_t *right,
                        uint8_t **root, uint32_t *height, SpareCursor &spares) const;

  // Inside a region: from the root down `height` inner levels to the leaf
  // for `key`; the path taken (when asked for) and the bound above the
  // leaf's keys (0 for the last leaf).
  uint8_t *descend(const Tx &tx, uint8_t *const *root, const uint32_t *height, Key key, Path *path,
                   Key *hi) const;

  // Zeroes a fresh inner node (relaxed stores: it may later be read by
  // transactions that abort; see transaction.h).
  void init(uint8_t *node) const;

  // Quiescent: visits the leaves in key order with the bounds of their keys
  // ([lo, hi), hi 0: unbounded), checking the inner nodes on the way.
  void walk(uint8_t *root, uint32_t height,
            const std::function<void(uint8_t *leaf, Key lo, Key hi)> &leaf,
            std::string &errors) const;
  // Quiescent: frees every node through the callbacks.
  void free_all(uint8_t *root, uint32_t height, const std::function<void(uint8_t *)> &free_leaf,
                const std::function<void(uint8_t *)> &free_inner) const;

  // Quiescent checks of one inner node against [lo, hi) bounds; appends
  // problems to `errors`.
  void check(const uint8_t *node, Key lo, Key hi, std::string &errors) const;

private:
  void insert_at(const Tx &tx, uint8_t *node, uint32_t pos, Key sep, uint8_t *right) const;

  InnerShape s_;
  KeyCodec codec_;
};

// Zeroes n bytes with relaxed stores.
void zero_record(uint8_t *p, size_t n);

// Quiescent: the leaves, as the tree reaches them in key order, must be the
// chain their next pointers make.
template <class Next>
void check_leaf_chain(const std::vector<uint8_t *> &leaves, Next next, StructureErrors &errors) {
  uint8_t *n = leaves.empty() ? nullptr : leaves.front();
  for (size_t i = 0; i < leaves.size(); ++i, n = n ? next(n) : nullptr)
    if (n != leaves[i]) {
      errors.add("the leaf chain differs from the tree at leaf " + std::to_string(i));
      return;
    }
  if (n)
    errors.add("the leaf chain goes on past the last leaf");
}

// Throws std::invalid_argument when the key, payload or node size is out of range.
void check_tree_options(const HtmTreeOptions &o);

} // namespace memlayout::trees::htm
