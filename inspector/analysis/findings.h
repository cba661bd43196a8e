// Findings: what is wrong with a layout, how much, and what to change. Pure
// functions of the report's measurements; thresholds in one table, explained
// in docs/findings.md.
#pragma once

#include "report.h"

#include <vector>

namespace memlayout::inspector {

struct FindingThresholds {
  // Below this effective set fraction a group runs with a smaller cache.
  double set_fraction_medium = 0.75, set_fraction_high = 0.55;
  // Fewer lines than this at a level say nothing about its sets.
  uint64_t set_min_lines = 256;
  // Share of objects whose (hot) bytes cross a line boundary.
  double straddle_medium = 0.10, straddle_high = 0.20;
  // Larger objects (without --hot) lose a smaller share by one more line:
  // straddling is judged on extents of at most this many bytes.
  uint64_t straddle_max_bytes = 128;
  uint64_t min_objects = 32; // below this a group is too small to matter
  // A layout finding about a group holding less than this share of the live
  // heap's bytes, or whose lines fit in this fraction of the L1 (hot, they
  // stay there whatever their layout), is one severity lower: glibc's locale
  // tables straddle lines in every C program, and matter in none.
  double minor_heap_share = 0.01, minor_l1_fraction = 0.125;
  // Share of a group's objects next to (same or adjacent line) another group's.
  double interleave_share = 0.25;
  double prefetch_share = 0.50;
  // Share of a group's lines that also hold another thread's objects.
  double cross_thread_share = 0.10;
  uint64_t false_sharing_max_size = 64;
  // Pages touched against the minimum the group's bytes need.
  double page_spread_medium = 2.0, page_spread_high = 4.0;
  uint64_t page_spread_min_pages = 16;
  // Aborted transactions (htm_false_conflict, htm_capacity): false conflicts
  // on a group's lines as a share of all conflict aborts; capacity aborts as
  // a share of all aborts; below the counts, too few to say anything.
  uint64_t htm_min_false = 20;
  double htm_false_share = 0.10;
  // False conflict aborts per 1000 completed transactions (when the trace
  // counts them): what the false sharing costs.
  double htm_false_rate_medium = 1.0, htm_false_rate_high = 10.0;
  uint64_t htm_min_capacity = 10;
  double htm_capacity_share_medium = 0.02, htm_capacity_share_high = 0.10;
  // A group whose lines were at least this share of the overflowing sets' lines.
  double htm_capacity_group_share = 0.25;
  // Transactions holding less than this share of the L1's lines when a set
  // overflowed: uneven set use rather than a footprint too big.
  double htm_uneven_footprint = 0.5;
};

std::vector<Finding> find_problems(const Report &r, const FindingThresholds &t = {});

// The segregation rule in a fix's text ("... --segregate RULE"), canonical;
// empty when the fix has none.
std::string rule_of_fix(const std::string &fix);

} // namespace memlayout::inspector
