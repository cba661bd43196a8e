// htm-bptree: a B+tree whose every operation is one elided region over a
// global fallback lock — the HTM B+tree of DBX (Wang et al., EuroSys 2014)
// that Eunomia starts from, Karnagel et al.'s lock-elided B+tree and
// Makreshanski et al.'s "global elided lock" cpp-btree.
//
// Leaves hold sorted keys and payloads; inner nodes separators and
// children. Inserts split full nodes up the path inside the transaction
// (nodes come from per-thread spares); removes never merge (DBX and Eunomia
// rebalance lazily), so nodes live until the tree is destroyed.
//
// Layouts: baseline (DBX's): count, keys, payloads and the next-leaf
// pointer back to back from malloc. fixed: line-aligned nodes, the count and
// next pointer alone on the first line, keys and payloads each from a line.
#pragma once

#include "htm/bptree_map.h"

namespace memlayout::trees {

class HtmBptree final : public htm::BptreeMap {
public:
  explicit HtmBptree(const TreeConfig &config);
  ~HtmBptree() override;

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  bool put(Key key, Value value) override;
  size_t scan(Key from, size_t n, const std::function<void(Key, Value)> &visit) override;

  struct LeafShape {
    uint32_t fanout = 0;
    uint32_t count_off = 0, next_off = 0, keys_off = 0, values_off = 0, bytes = 0;
  };
  const LeafShape &leaf_shape() const { return leaf_; }

private:
  // The records' types for `memlayout report`: a function returning untyped
  // memory it got from malloc would count as an allocation wrapper.
  struct LeafRecord;
  struct InnerRecord;
  [[gnu::noinline]] LeafRecord *new_leaf();
  [[gnu::noinline]] InnerRecord *new_inner();

  // BptreeMap's quiescent reads.
  uint8_t *next_leaf(uint8_t *leaf) const override { return *next_of(leaf); }
  void visit_leaf(uint8_t *leaf, const std::function<void(Key, Value)> &visit) const override;
  void check_leaf(uint8_t *leaf, Key lo, Key hi, StructureErrors &errors) const override;

  uint8_t *key_at(uint8_t *leaf, uint32_t i) const {
    return leaf + leaf_.keys_off + i * codec_.key_bytes;
  }
  uint8_t *value_at(uint8_t *leaf, uint32_t i) const {
    return leaf + leaf_.values_off + i * codec_.value_bytes;
  }
  uint32_t *count_of(uint8_t *leaf) const {
    return reinterpret_cast<uint32_t *>(leaf + leaf_.count_off);
  }
  uint8_t **next_of(uint8_t *leaf) const {
    return reinterpret_cast<uint8_t **>(leaf + leaf_.next_off);
  }

  // Inside a region: the leaf for key, the path to it and the bound above
  // its keys (0 when it is the last leaf).
  uint8_t *descend(const htm::Tx &tx, Key key, htm::InnerLevels::Path *path, Key *hi) const;
  uint32_t lower_bound(const htm::Tx &tx, uint8_t *leaf, uint32_t count, Key key) const;
  void shift_right(const htm::Tx &tx, uint8_t *leaf, uint32_t pos, uint32_t count) const;
  // Insert or overwrite; true when the key was inserted.
  bool write(Key key, Value value, bool overwrite);

  // Read inside every transaction: from a line of its own, after
  // BptreeMap's members (RecordMap's lock among them, written by refills).
  alignas(64) LeafShape leaf_;
  htm::ElidedRegion *op_; // every operation: one region
};

} // namespace memlayout::trees
