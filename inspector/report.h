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
  // The fix as a segregation rule (`--segregate RULE`, a line of `advise`'s
  // rules file); empty when no rule carries it out.
  std::string rule;
};

// What the HTML report's plots show, for the largest groups only. Filled by
// build_report when ReportOptions::plots asks for it (the renderers draw, they
// do not compute); absent from JSON, which has its own contract.
struct PlotOccupancy {
  uint32_t group = 0; // Group::id
  int level = 0;
  uint32_t domain = 0;         // set indices on the basis the figures rest on
  uint32_t sets_per_bin = 1;   // >1: a big LLC folded to a plottable size
  std::vector<uint64_t> lines; // lines per bin, domain / sets_per_bin bins
  uint64_t lines_total = 0;    // distinct lines counted
  std::optional<double> effective_fraction;
};

struct PlotOffsets {
  uint32_t group = 0;
  uint32_t line_size = 64;
  std::vector<uint64_t> objects;    // objects by start offset in their line
  std::vector<uint64_t> straddling; // of those, the ones that straddle
};

struct PlotChunks {
  uint32_t group = 0;
  uint64_t page_size = 4096, region_size = 2ull << 20;
  uint32_t pages_per_region = 512;
  uint64_t regions_total = 0;    // regions the group touches; the map holds the first ones
  std::vector<uint64_t> regions; // base addresses, ascending
  // Per region, the page indices the group has bytes in, ascending.
  std::vector<std::vector<uint32_t>> pages;
};

struct ReportPlots {
  std::vector<PlotOccupancy> occupancy; // per plotted group, per level
  std::vector<PlotOffsets> offsets;
  std::vector<PlotChunks> chunks;
  // Co-location among the plotted groups, row-major over `colocation_groups`:
  // the share of the row group's objects with an object of the column group
  // on the same line, the adjacent line of the 128-byte pair, the same page.
  std::vector<uint32_t> colocation_groups;
  std::vector<double> same_line, adjacent_line, same_page;
};

// A rule the trace was recorded under, and what it routed.
struct RuleStat {
  std::string rule; // canonical text
  uint64_t allocations = 0, bytes = 0;
};

struct Report {
  std::string trace;
  std::string at; // peak, end, mark:NAME
  int64_t at_ns = 0;
  bool partial = false;
  uint64_t live_objects = 0, live_bytes = 0, groups_total = 0;
  std::string allocator;
  std::vector<ReportCacheLevel> levels;
  std::vector<GroupReport> groups;  // by descending bytes
  std::vector<Finding> findings;    // by descending severity, then groups
  std::vector<std::string> notes;   // caveats the reader must know
  std::vector<RuleStat> rules;      // when recorded under rules
  std::optional<ReportPlots> plots; // only when asked for (HTML)
};

} // namespace memlayout::inspector
