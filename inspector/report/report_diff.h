// What changed between two reports of the same program — typically before and
// after a layout fix (segregation, padding): per allocation group the layout
// metrics side by side, groups that appeared or went away, and findings
// resolved, new or kept. Pure data; reports/ renders it (memlayout.diff/1).
#pragma once

#include "report.h"

#include <optional>
#include <string>
#include <vector>

namespace memlayout::inspector {

inline constexpr const char *kDiffSchema = "memlayout.diff/1";

// Which direction of a metric is an improvement. Counts (objects, bytes) are
// workload, not layout: a diff has no opinion on them.
enum class Better { kNeither, kHigher, kLower };

enum class Verdict { kSame, kBetter, kWorse, kChanged };

struct MetricDelta {
  std::string metric;         // "set_effective_fraction_L1", "straddle_fraction", ...
  std::optional<double> a, b; // empty: not computable on that side
  Better better = Better::kNeither;
  Verdict verdict = Verdict::kSame;
  // How big the change is, comparable across metrics: absolute for
  // fractions, relative to the larger side for everything else.
  double magnitude = 0;

  std::optional<double> delta() const {
    return a && b ? std::optional<double>(*b - *a) : std::nullopt;
  }
};

// kSiteMerged: B holds in one group (a pool) what A had in several of one
// call site (its size classes): B is compared with their union. kFunction:
// by function and file, the site's line moved (an edit above it).
enum class MatchedBy {
  kName,
  kSiteAndSizeClass,
  kSiteAndRequestedSize,
  kSite,
  kSiteMerged,
  kFunction,
  kRenamed // file and line, the function's name changed
};

struct GroupDelta {
  const GroupReport *a = nullptr, *b = nullptr;
  // kSiteMerged: every group of A it stands for, `a` the largest. Counts,
  // lines per object and the straddle fraction are the union's; the
  // metrics a union does not have (size class, set fractions, pages, which
  // the groups may share) are left out on A's side.
  std::vector<const GroupReport *> merged_a;
  MatchedBy matched_by = MatchedBy::kName;
  std::vector<MetricDelta> metrics; // in a fixed order (see report_diff.cpp)
  double magnitude = 0;             // the largest of its metrics'
};

// A finding with its groups named (names are what survive between reports:
// ids are per report). A group of B matched to one of A takes A's name, so a
// group renamed by the fix (a pool name) still matches its old findings.
struct FindingRef {
  const Finding *finding = nullptr;
  std::vector<std::string> groups;
};

struct ReportDiff {
  const Report *a = nullptr, *b = nullptr;
  MetricDelta live_objects, live_bytes;
  // Aborted transactions, when either side recorded them: aborts, false
  // conflicts and capacity aborts per 1000 transactions, false share.
  std::vector<MetricDelta> htm;
  std::vector<GroupDelta> groups; // matched, by descending magnitude
  std::vector<const GroupReport *> only_a, only_b;
  std::vector<FindingRef> resolved; // in A, not in B
  std::vector<FindingRef> added;    // in B, not in A
  std::vector<FindingRef> kept;     // in both (as B has it)
  std::vector<std::string> notes;   // why some deltas may not mean what they seem
};

// The reports must outlive the diff (it points into them).
ReportDiff diff_reports(const Report &a, const Report &b);

const char *metric_label(const std::string &metric); // "L1 set fraction"
const char *to_string(Verdict v);                    // same, better, worse, changed
const char *to_string(Better b);                     // neither, higher, lower
const char *to_string(MatchedBy m);                  // name, site+size_class, site

} // namespace memlayout::inspector
