// A layout report: everything `memlayout report` says about one snapshot of
// one trace, independent of how it is rendered (text, JSON, HTML) and of how
// it was computed. The JSON contract (schema memlayout.report/1) in
// ../shared/design.md is this structure written out.
#pragma once

#include "heap_model.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace memlayout::inspector {

inline constexpr const char *kReportSchema = "memlayout.report/1";

struct ReportCacheLevel {
  int level = 0;
  std::string type; // Data, Unified
  uint32_t sets = 0, ways = 0, line_size = 0;
  uint64_t size_bytes = 0;
  std::string indexing; // "virtual" or "physical"
  std::string bits;     // which address bits the figures rest on, in words
};

struct Stride {
  int64_t bytes = 0;
  double share = 0; // of consecutive pairs
};

struct GroupReport {
  Group group; // identity, site, sizes, objects, threads
  uint64_t objects = 0;
  double lines_per_object = 0;
  double straddle_fraction = 0;
  uint64_t hot_bytes = 0; // 0: whole objects
  // L1, L2, L3; empty when not computable (too few lines, level absent).
  std::array<std::optional<double>, 3> set_effective_fraction;
  std::array<uint64_t, 3> lines_counted{};
  std::vector<Stride> strides;
  uint64_t pages_4k = 0, pages_min = 0, regions_2m = 0, regions_min = 0, page_runs = 0;
  // Co-location with other groups (by id): objects sharing a line, an
  // adjacent (128-byte pair) line, a page.
  struct Neighbour {
    uint32_t group = 0;
    uint64_t same_line = 0, adjacent_line = 0, same_page = 0;
  };
  std::vector<Neighbour> neighbours;
  uint64_t cross_thread_lines = 0; // lines holding this group's and another thread's objects
  uint64_t lines_total = 0;
};

struct Finding {
  std::string kind;     // set_underutilization, line_straddle, ...
  std::string severity; // high, medium, low
  std::vector<uint32_t> groups;
  std::map<std::string, double> metric; // the numbers behind it
  std::string message, fix;
};

struct Report {
  std::string trace;
  std::string at; // peak, end, mark:NAME
  int64_t at_ns = 0;
  bool partial = false;
  uint64_t live_objects = 0, live_bytes = 0, groups_total = 0;
  std::string allocator;
  std::vector<ReportCacheLevel> levels;
  std::vector<GroupReport> groups; // by descending bytes
  std::vector<Finding> findings;   // by descending severity, then groups
  std::vector<std::string> notes;  // caveats the reader must know
};

} // namespace memlayout::inspector
