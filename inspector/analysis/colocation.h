// Which groups sit next to which: objects of group A that share a cache line,
// the other line of their 128-byte prefetch pair, or a 4 KiB page with an
// object of group B; and lines whose objects were allocated by different
// threads (cross-thread sharing, false-sharing candidates). The study's cases:
// edge-ext-lf is fast because 75% of its leaves share a line with their parent;
// int-lf's every node has a descriptor on its adjacent line; 48-byte row locks
// allocated back to back by different threads share every line.
#pragma once

#include "heap_model.h"

#include <cstdint>
#include <vector>

namespace memlayout::inspector {

struct ColocationOptions {
  uint32_t line_size = 64;
  uint32_t page_size = 4096;
  // A false-sharing candidate needs at least one object this small on the
  // line: locks, counters and flags rather than large records.
  uint64_t small_object_bytes = 64;
};

// Counts for one ordered pair of groups (a, b); a == b is a group with itself,
// which counts an object only when another object of the same group is there.
struct PairColocation {
  uint32_t a = 0, b = 0; // positions in the groups passed in (Colocation::group_ids)
  // Objects of a with an object of b ...
  uint64_t same_line = 0;     // ... on one of their lines
  uint64_t adjacent_line = 0; // ... on the other line of a 128-byte pair they
                              //     touch only one line of (line index XOR 1)
  uint64_t same_page = 0;     // ... on one of their pages
  // Lines (128-byte pairs) holding an object of a and an object of b
  // allocated by different threads. Symmetric.
  uint64_t cross_thread_lines = 0;
  uint64_t cross_thread_pairs = 0;
  // Cross-thread lines where one of the two objects is small (see options).
  uint64_t false_sharing_lines = 0;
};

struct Colocation {
  uint32_t line_size = 64, page_size = 4096;
  std::vector<uint32_t> group_ids;     // Group::id by position
  std::vector<uint64_t> group_objects; // objects per group, by position
  std::vector<PairColocation> pairs;   // pairs with any nonzero count, by (a, b)
  // Per group, by position: the lines its objects overlap; of those, the ones
  // also holding an object (of any group) allocated by another thread; and
  // of those the false-sharing candidates.
  std::vector<uint64_t> group_lines;
  std::vector<uint64_t> group_cross_thread_lines;
  std::vector<uint64_t> group_false_sharing_lines;
  // Over the whole analysed heap, each line or pair counted once.
  uint64_t cross_thread_lines = 0;
  uint64_t cross_thread_pairs = 0;
  uint64_t false_sharing_lines = 0;
  // Address-overlapping live objects (a corrupt or mis-decoded trace). The
  // counts then undercount co-location: cells are found assuming no overlap.
  uint64_t overlapping_objects = 0;
};

// Objects in no group are left out. One pass per granularity (line, 128-byte
// pair, page) over the snapshot's address-sorted objects: O(n + sum over
// lines/pairs/pages of d^2), d being the number of distinct groups in it, plus
// one hash-table lookup per counted group pair; memory O(groups + pairs
// reported), nothing per object beyond one group index.
Colocation analyse_colocation(const HeapSnapshot &snapshot, const std::vector<Group> &groups,
                              const ColocationOptions &opts = {});

enum class ColocationMetric : uint8_t {
  kSameLine,
  kAdjacentLine,
  kSamePage,
  kCrossThreadLines,
  kCrossThreadPairs,
  kFalseSharingLines,
};

uint64_t metric_value(const PairColocation &p, ColocationMetric m);

// True for the metrics that count objects of a (a share of a's objects makes
// sense), false for those that count lines.
bool counts_objects(ColocationMetric m);

// Row-major groups x groups for a plot: for object metrics the share of row
// group's objects, for line metrics the count.
std::vector<double> colocation_matrix(const Colocation &c, ColocationMetric m);

// The n pairs with the largest value of the metric (ties by share of a's
// objects, then positions); pairs of a group with itself only if asked.
std::vector<PairColocation> top_pairs(const Colocation &c, ColocationMetric m, size_t n,
                                      bool include_self = false);

} // namespace memlayout::inspector
