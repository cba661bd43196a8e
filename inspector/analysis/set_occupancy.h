// How a group's cache lines spread over the sets of one cache level: the
// occupancy histogram and the effective set fraction (design.md, "Definitions
// the analyses share"; the estimator and its derivation: docs/cache-model.md).
#pragma once

#include "address_map.h"
#include "cache_model.h"
#include "heap_model.h"
#include "object_extent.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace memlayout::inspector {

// What the estimator concluded, for reports and tests.
struct EffectiveSets {
  std::optional<double> fraction; // effective sets / domain; nullopt: too few lines
  double sets = 0;                // effective number of equally used sets
  double support = 0;             // estimated sets the group can reach at all
  bool full_spread = false;       // occupancy indistinguishable from all sets used
};

// Below this many lines no fraction is given. Between it and the domain size
// one is given only when the sample already covers its sets (see docs).
inline constexpr uint64_t kMinOccupancyLines = 32;

// The estimator on a histogram of lines per set (its size is the domain).
EffectiveSets effective_sets(std::span<const uint32_t> histogram);

struct SetOccupancy {
  int level = 0;
  SetBasis basis;
  uint64_t objects = 0;
  uint64_t lines = 0; // distinct lines counted (a line two objects share counts once)
  // Lines whose page had each PageKnowledge (index = the enum value); the
  // basis is the weakest present.
  uint64_t lines_known[3] = {0, 0, 0};
  std::vector<uint32_t> histogram; // lines per set index, basis.domain entries
  uint32_t occupied = 0;           // sets with at least one line
  EffectiveSets effective;
};

// Objects should come in ascending address order (as Group::objects are) so
// that a line shared by neighbours counts once.
SetOccupancy set_occupancy(std::span<const ObjectExtent> objects, const CacheLevel &level,
                           const AddressMap &map);

// A group's objects: each one's requested size, or its hot part (--hot).
SetOccupancy set_occupancy(const HeapSnapshot &snapshot, std::span<const uint32_t> objects,
                           HotRange hot, const CacheLevel &level, const AddressMap &map);

} // namespace memlayout::inspector
