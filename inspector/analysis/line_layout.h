// How one group's objects sit on cache lines: how many lines each overlaps
// against the fewest its size allows (straddling), where in the line they
// start, and the address strides between neighbours. The study's cases: 48-byte
// nodes at offsets 0/48/32/16 (one in four has its search fields cross a line)
// and int-lf nodes 128 bytes apart because a descriptor sits between each pair.
#pragma once

#include "heap_model.h"
#include "object_extent.h"

#include <cstdint>
#include <vector>

namespace memlayout::inspector {

struct LineLayoutOptions {
  uint32_t line_size = 64;
  // The bytes of each object the program reads on its hot path (`--hot`);
  // none: the whole requested size. Capped at the size.
  HotRange hot;
  // How many of the most common strides to keep.
  uint32_t top_strides = 3;
};

struct AddressStride {
  uint64_t bytes = 0; // distance from one object's address to the next one's
  uint64_t count = 0; // neighbour pairs this far apart
  double share = 0;   // count / (objects - 1)
};

struct LineLayout {
  uint32_t line_size = 64;
  uint64_t objects = 0;
  HotRange hot;                    // the option as applied
  double lines_per_object = 0;     // mean lines overlapped by each object's extent
  double min_lines_per_object = 0; // mean of ceil(extent / line_size)
  uint64_t straddling = 0;         // objects overlapping more lines than their minimum
  double straddle_fraction = 0;    // straddling / objects; 0 for an empty group
  // Indexed by start offset within the line (addr mod line_size): objects
  // starting there, and of those the ones that straddle. Exact offsets, so a
  // renderer can bucket them as it likes (offset_buckets).
  std::vector<uint64_t> offset_histogram;
  std::vector<uint64_t> straddling_by_offset;
  // The most common distances between address-consecutive objects of the
  // group, most common first (ties: the shorter stride first).
  std::vector<AddressStride> strides;
};

// O(n log n) for a group of n objects (the stride histogram sorts the n - 1
// differences; everything else is one pass). Objects are read in address
// order; a group whose index list is not sorted by address is sorted on a copy.
LineLayout analyse_line_layout(const HeapSnapshot &snapshot, const Group &group,
                               const LineLayoutOptions &opts = {});

// Sums an exact per-offset histogram into buckets of `bucket_bytes`
// (16 gives the four quarter-line buckets of the study's plots).
std::vector<uint64_t> offset_buckets(const std::vector<uint64_t> &exact, uint32_t bucket_bytes);

} // namespace memlayout::inspector
