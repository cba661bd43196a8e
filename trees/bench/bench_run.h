// One memlayout-bench run: prefill, timed workers, optional check.
#pragma once

#include "bench_options.h"
#include "htm/htm_stats.h"
#include "pmu_counters.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memlayout::trees::bench {

struct ThreadResult {
  unsigned thread = 0;
  int cpu = -1;           // the CPU it was pinned to, -1 when not pinned
  double seconds = 0;     // wall time of its run
  double cpu_seconds = 0; // CPU time it got: below `seconds` when the machine is shared
  uint64_t lookups = 0, lookup_hits = 0;
  uint64_t inserts = 0, inserts_ok = 0;
  uint64_t removes = 0, removes_ok = 0;
  uint64_t puts = 0, puts_inserted = 0; // HTM trees: put inserted the key (else overwrote)
  uint64_t scans = 0, scanned = 0;      // HTM trees: scans, pairs they visited
  uint64_t wrong_values = 0; // lookups or scans that returned another key's value (--check)
  std::array<int64_t, kPmuEventCount> counters{-1, -1, -1};

  uint64_t ops() const { return lookups + inserts + removes + puts + scans; }
  double mops() const { return seconds > 0 ? static_cast<double>(ops()) / seconds / 1e6 : 0; }
};

enum class CheckState { kSkipped, kOk, kFailed };

struct RecordKind {
  std::string kind;
  size_t size;
};

struct BenchResult {
  std::vector<ThreadResult> per_thread;
  uint64_t prefilled = 0;
  double prefill_s = 0;
  double duration_s = 0; // measured, from the workers' start to the stop signal
  uint64_t ops = 0;
  double mops = 0;
  CheckState check = CheckState::kSkipped;
  std::string check_error;
  uint64_t history_ops = 0; // operations --linearizable recorded and checked
  // Workers whose share of the history filled before the run's end, and
  // when the first of them stopped: the run's figures are not a full run's.
  unsigned history_full_threads = 0;
  double history_full_after_s = 0;
  std::vector<RecordKind> records;
  // Totals over the threads, for the events every thread counted.
  std::array<int64_t, kPmuEventCount> counters{-1, -1, -1};
  std::string counters_unavailable;  // "" when all events were counted
  std::optional<htm::HtmReport> htm; // the HTM trees' transactions
};

BenchResult run_benchmark(const BenchOptions &options);

// The value the harness stores for a key, so lookups can be checked.
inline Value bench_value_of(Key key) {
  return static_cast<Value>(static_cast<uint64_t>(key) * 0x9e3779b97f4a7c15ULL);
}

} // namespace memlayout::trees::bench
