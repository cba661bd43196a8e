// The shape the HTM B+trees share, written once: a tree derives from
// BptreeMap and writes its leaves and its operations on them.
//
// BptreeMap holds the inner levels (bptree_parts.h) with the root and
// height every transaction reads, the fallback lock, the HTM runtime and
// abort sink, the record kinds "leaf" and "inner" and their spare records,
// and implements from them what both trees did the same way: for_each (the
// leaf chain from the leftmost leaf), check_structure (the inner levels, the
// leaf chain, the fallback lock), htm_report over the tree's regions, and
// freeing every node. The tree supplies its leaf:
//
//   HtmBptree(const TreeConfig &config) : BptreeMap("htm-bptree", config) {
//     leaf_ = make_leaf_shape(...);
//     add_node_kinds(leaf_.bytes);    // then any kind of its own
//     op_ = open_regions({"op"})[0];  // after the last kind
//     alloc_leaf_ = [this] { return reinterpret_cast<uint8_t *>(new_leaf()); };
//     alloc_inner_ = ... new_inner() ...;
//     hdr_.root = alloc_leaf_();
//   }
//   ~HtmBptree() override { free_nodes({}); }
//   // lookup, insert, remove, put, scan: regions over the tree's leaves
//   // next_leaf, visit_leaf, check_leaf: the leaf, read when quiescent
#pragma once

#include "htm/abort_sink.h"
#include "htm/bptree_parts.h"
#include "htm/elided_region.h"
#include "htm/htm_map.h"
#include "htm/record_map.h"

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memlayout::trees::htm {

class BptreeMap : public HtmMap {
public:
  // Quiescent: each leaf from the leftmost along the chain, by visit_leaf.
  void for_each(const std::function<void(Key, Value)> &visit) const final;
  // Quiescent: the inner levels, each leaf by check_leaf, the leaf chain
  // against the tree's order, and the fallback lock.
  std::string check_structure() const final;
  // The regions' counts, summed and one by one, in open_regions' order.
  HtmReport htm_report() const final;
  void reset_htm_stats() final;

  const InnerShape &inner_shape() const { return inner_.shape(); }

protected:
  // Checks config.htm (std::invalid_argument when out of range) before
  // sizing anything from it.
  BptreeMap(std::string_view tree, const TreeConfig &config);

  // Registers "leaf" and "inner", first of the tree's record kinds.
  void add_node_kinds(uint32_t leaf_bytes);
  // Once every kind is registered: the abort sink over them, and one region
  // per name ("<tree>.<name>"); the tree keeps the pointers it returns.
  std::vector<ElidedRegion *> open_regions(std::initializer_list<const char *> names);

  // What the tree's new_leaf and new_inner do once they allocated p (those
  // two allocate themselves: their names are the records' allocation sites
  // in `memlayout report`): zero the record and enter it in the record map.
  uint8_t *fresh_leaf(void *p);
  uint8_t *fresh_inner(void *p);
  // Tops the calling thread's spares up to what one insert may take: a
  // leaf, and an inner node per level plus a new root.
  void refill_node_spares();
  // Quiescent, for the tree's destructor: frees every node and spare;
  // free_leaf_parts(leaf), when given, first for each leaf in the tree.
  void free_nodes(const std::function<void(uint8_t *leaf)> &free_leaf_parts);

  // The tree's leaves, read when quiescent.
  virtual uint8_t *next_leaf(uint8_t *leaf) const = 0;
  virtual void visit_leaf(uint8_t *leaf, const std::function<void(Key, Value)> &visit) const = 0;
  // Keys of the leaf lie in [lo, hi) (hi 0: unbounded).
  virtual void check_leaf(uint8_t *leaf, Key lo, Key hi, StructureErrors &errors) const = 0;

  bool fixed_;
  KeyCodec codec_;
  InnerLevels inner_;
  RecordAllocator::Kind leaf_kind_ = 0, inner_kind_ = 0;
  uint32_t leaf_bytes_ = 0;

  // The tree's shared header, read by every transaction; the fallback lock
  // on a line of its own.
  struct alignas(64) Header {
    uint8_t *root = nullptr;
    uint32_t height = 0; // inner levels above the leaves
  } hdr_;
  FallbackLock lock_;

  Runtime rt_;
  RecordMap map_;
  std::unique_ptr<AbortSink> sink_;
  SpareRecords spare_leaves_, spare_inners_;
  SpareRecords::Allocate alloc_leaf_, alloc_inner_; // the tree's new_leaf, new_inner

private:
  std::vector<std::pair<std::string, std::unique_ptr<ElidedRegion>>> regions_;
};

} // namespace memlayout::trees::htm
