// From a trace file to a Report: snapshot, groups, placement in the caches
// and pages, co-location, findings. The one pipeline every format renders.
#pragma once

#include "alloc_site.h"
#include "findings.h"
#include "heap_model.h"
#include "report.h"

#include <functional>
#include <string>
#include <vector>

namespace memlayout::inspector {

struct HotPrefix {
  std::string name; // matches a group's name, tag, function or type
  uint64_t bytes = 0;
  // Instead of bytes: the hot prefix ends with this member of the group's
  // record (from the type map).
  std::string field;
};

// What the plots of the HTML report need (Report::plots).
struct PlotOptions {
  bool enabled = false;
  size_t groups = 8;        // the largest groups plotted
  size_t regions = 16;      // 2 MiB regions per chunk map
  uint32_t max_bins = 4096; // set-occupancy bins; bigger caches are folded
};

struct ReportOptions {
  SnapshotSpec at;
  std::vector<HotPrefix> hot;
  std::string cache_file;                // cache model override; empty: this machine's sysfs
  std::vector<std::string> wrappers;     // --wrapper: functions to look through
  std::vector<std::string> not_wrappers; // --not-wrapper: never looked through
  // `wrapper=` / `not-wrapper=` lines of a rules file (replay's --rules); a
  // trace recorded under rules adds its own.
  std::vector<std::string> rules_wrappers, rules_not_wrappers;
  // Wrappers decided already (replay decides them for its routing): used as
  // they are, nothing detected again.
  const WrapperPolicy *wrappers_decided = nullptr;
  // A type map (`memlayout structs --format json`) naming groups by type;
  // empty: EXECUTABLE.memlayout-types.json when there is one and
  // find_types is set.
  std::string types_file;
  bool find_types = true;
  FindingThresholds thresholds;
  bool progress = false; // a progress bar on stderr (the caller decides: tty only)
  PlotOptions plots;
  // `memlayout replay`: rewrites the snapshot (addresses and sizes as another
  // allocator placed the same objects) before it is analysed, and names
  // groups by pool.
  std::function<void(HeapSnapshot &)> transform_snapshot;
  std::function<std::string(const LiveObject &)> pool_of;
  // The allocator whose layout this is, when not the trace's (a replay
  // against another): the report names it and the findings' size classes
  // are its. Empty: the trace's.
  std::string allocator;
};

// Returns false with `error` set ("FILE: offset N: ...") when the trace
// cannot be analysed; a truncated trace gives a partial report instead.
bool build_report(const std::string &trace_path, const ReportOptions &o, Report &out,
                  std::string &error);

// "peak", "end", "mark:NAME"; false on anything else.
bool parse_snapshot_spec(const std::string &text, SnapshotSpec &out);

} // namespace memlayout::inspector
