// Where a pool puts a group's objects under a rule's pad and align, predicted
// from the pool's size classes (alloc/: jemalloc's classes, small ones in
// 64 KiB pages that start at their first byte), and the actions a fix's rule
// needs so that the layout it makes creates no new finding: aligned objects
// that grow into a class a power of two of lines apart use a fraction of the
// sets; packed objects whose class is not a whole number of lines straddle.
// One definition for every fix that moves objects into a pool (findings.cpp)
// and for advise's merged rules. docs/findings.md, "Fixes that create no
// finding".
#pragma once

#include "findings.h"
#include "report.h"
#include "rules.h"

#include <cstdint>
#include <optional>
#include <string>

namespace memlayout::inspector {

// Bytes between consecutive objects of `size` requested bytes in a pool
// with these actions (pad, align: 0 = none).
uint64_t pool_stride(uint64_t size, uint64_t pad, uint64_t align);

struct PoolLayout {
  uint64_t stride = 0;
  // Of the extent [offset, offset + bytes) of each object: the share that
  // crosses more lines than its size needs, and the effective fraction of a
  // 64-set L1 its lines use (nullopt: too few lines to say).
  double straddle_fraction = 0;
  std::optional<double> l1_set_fraction;
};

// The layout of `objects` objects of `size` bytes placed back to back by a
// pool with these actions, judged on each one's extent.
PoolLayout predict_pool_layout(uint64_t size, uint64_t pad, uint64_t align, uint64_t extent_offset,
                               uint64_t extent_bytes, uint64_t objects);

// The smallest alignment that keeps an extent ending `end` bytes into the
// object within one line: a power of two from 16 to 64 (64 for more than a
// line: the extent then starts on one).
uint64_t straddle_align(uint64_t end);

// The smallest padding, in whole lines above `lines` and up to twice them,
// whose class (a pool's: jemalloc's) spaces consecutive objects an odd
// number of lines apart (or not a whole number): they then visit every set
// of a 64-set L1. Failing that, an even number not a multiple of 4 (half the
// sets). 0 when neither exists (from 512 bytes to 1 KiB, and from 4 KiB up).
uint64_t odd_stride_pad(uint64_t lines);

// Adds to a pool rule for group g (no pool: nothing to do) the align and
// pad its pool needs so that g's objects (their hot part with --hot) neither
// straddle lines (t.straddle_medium) nor, where the group has enough lines
// for set use to count (t.set_min_lines), use less than
// t.set_fraction_medium of the L1's sets. Returns what it added and why, in
// words ("" when the rule was fine as it was). `few_sets`, when given, is
// set where no padding brings the pool's objects onto enough sets.
std::string keep_pool_layout(rules::Rule &rule, const GroupReport &g, const FindingThresholds &t,
                             bool *few_sets = nullptr);

} // namespace memlayout::inspector
