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
  uint64_t hot_bytes = 0;  // 0: whole objects
  uint64_t hot_offset = 0; // where the hot bytes start in each object (make_shared: 16)
  // By cache level: [0] is L1, [1] L2, [2] L3 (a --cache file may leave out
  // L1); empty when not computable (too few lines, level absent).
  std::array<std::optional<double>, 3> set_effective_fraction;
  std::array<uint64_t, 3> lines_counted{};
  // The address bits a level's figure rests on for this group where they
  // are fewer than its level's (ReportCacheLevel::bits): pages that no
  // memory snapshot mapped (a buffer freed before the next one) fold its
  // sets into colours. Empty where the group's are the level's.
  std::array<std::string, 3> set_bits;
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
  // Members of the group's type that are locks, from a type map (mutexes,
  // spin locks: written by whichever thread takes them). Atomics are left
  // out: every concurrent tree's node has some. Empty when the type is unknown.
  std::vector<std::string> lock_fields;
};

// Severity as a number: high 2, medium 1, low (or unknown) 0.
inline int severity_rank(const std::string &severity) {
  return severity == "high" ? 2 : severity == "medium" ? 1 : 0;
}

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

// What the trace's aborted transactions (kHtmAborts records) say about the
// groups: which groups' lines the conflicts and capacity overflows struck,
// at which offsets in their objects, and which other groups shared them.
struct HtmGroupAborts {
  uint32_t group = 0;
  uint64_t conflicts_false = 0, conflicts_true = 0;
  uint64_t capacity_aborts = 0; // capacity aborts with a line of this group in the overflowing set
  uint64_t capacity_lines = 0;  // its lines in those sets
  // (offset in the object of the first byte the aborted transaction had
  // touched on the line, false conflicts), most first
  std::vector<std::pair<uint64_t, uint64_t>> false_offsets;
  // (offset of the first byte the conflicting access touched, in its object)
  std::vector<std::pair<uint64_t, uint64_t>> other_offsets;
  // Other groups whose objects the conflicting access touched on these lines.
  std::vector<std::pair<uint32_t, uint64_t>> sharers;
  // False conflicts where the other side touched another object of this
  // group sharing the line (small records back to back).
  uint64_t neighbour_object_conflicts = 0;
  // (offset of the line in the object, capacity aborts), most first
  std::vector<std::pair<uint64_t, uint64_t>> capacity_offsets;
  // Of its lines in overflowing sets, how many sit at the most common offset
  // within a 4 KiB page: objects that start alike pile one field onto one set.
  uint64_t capacity_same_page_offset = 0;
};

struct HtmAbortReport {
  uint64_t transactions = 0; // completed: committed or run on the fallback path
  uint64_t aborts = 0;
  std::array<uint64_t, 4> by_cause{}; // conflict, capacity, explicit, other
  uint64_t conflicts_true = 0, conflicts_false = 0;
  uint64_t same_key = 0, by_fallback_lock = 0, by_plain = 0;
  uint64_t capacity_write = 0, capacity_read = 0;
  uint64_t unresolved = 0; // lines no object live at the report's moment held
  uint32_t l1_sets = 0, l1_ways = 0;
  double capacity_mean_lines = 0, capacity_mean_sets = 0; // footprint at a capacity abort
  std::vector<std::string> regions;
  std::vector<HtmGroupAborts> groups; // groups the aborts struck, most first
};

// A rule the trace was recorded under, and what it routed.
struct RuleStat {
  std::string rule; // canonical text
  uint64_t allocations = 0, bytes = 0;
};

struct Report {
  std::string trace;
  std::string executable; // the recorded program, from the trace's header
  // The type map and cache model the analysis read ("" for none): no
  // output may be written over them.
  std::string type_map, cache_file;
  // The hot prefixes asked for, as given (NAME=BYTES, TYPE=FIELD): the
  // findings they make need them again (advise, as the HTML page says).
  std::vector<std::string> hot;
  std::string at; // peak, end, mark:NAME
  int64_t at_ns = 0;
  bool partial = false;
  std::string damage;    // the trace is damaged there (not only cut short): the reader's error
  std::string cut_short; // partial and not damaged: where the reader stopped
  std::string cut_cause; // why, where the trace says (stop_cause_text); "" when it does not
  std::vector<std::string> reader_warnings; // what the reader skipped or doubted, with offsets
  std::vector<std::string> symbol_warnings; // modules rebuilt since recording (names may be wrong)
  std::vector<std::string> option_warnings; // options that matched nothing (a --hot name's typo)
  uint64_t live_objects = 0, live_bytes = 0, groups_total = 0;
  std::string allocator;
  std::string cache_source; // where the geometry came from (CacheModel::source)
  std::vector<ReportCacheLevel> levels;
  std::vector<GroupReport> groups;   // by descending bytes
  std::vector<Finding> findings;     // by descending severity, then groups
  std::vector<std::string> notes;    // caveats the reader must know
  std::vector<RuleStat> rules;       // when recorded under rules, or those a replay applied
  bool rules_replayed = false;       // `rules` are a replay's
  std::optional<HtmAbortReport> htm; // when the trace records aborted transactions
  std::optional<ReportPlots> plots;  // only when asked for (HTML)
};

} // namespace memlayout::inspector
