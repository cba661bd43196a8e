// The base of every tree: a ConcurrentMap that owns the RecordAllocator its
// records come from. A tree registers its record kinds in its constructor
// (records_.add_kind) and allocates through records_ on its update paths;
// records_ is a plain member, so that costs no more than the tree's own.
#pragma once

#include "map.h"

#include <string_view>

namespace memlayout::trees {

class MapWithRecords : public ConcurrentMap {
public:
  const RecordAllocator &records() const final { return records_; }

protected:
  // tree: the name its pools are named after ("int-lf": pool "int-lf.node").
  MapWithRecords(std::string_view tree, AllocPolicy policy) : records_(tree, policy) {}

  RecordAllocator records_;
};

} // namespace memlayout::trees
