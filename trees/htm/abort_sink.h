// Where a tree's aborts go besides the counters: attributed to the record
// kind the line belongs to (with the offset in the record), and, when the
// program runs under `memlayout record`, written into the trace through the
// annotation interface (memlayout_htm_aborts) for `memlayout report`.
#pragma once

#include "abort_info.h"
#include "htm_config.h"
#include "htm_stats.h"
#include "record_map.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace memlayout::trees::htm {

class AbortSink {
public:
  // kinds: the tree's record kind names, by the index RecordMap holds.
  AbortSink(std::vector<std::string> kinds, const RecordMap *records);
  ~AbortSink();
  AbortSink(const AbortSink &) = delete;
  AbortSink &operator=(const AbortSink &) = delete;

  // Called by a region after each abort, outside any transaction. `region`
  // must outlive the process's threads: pass intern_region_name's result.
  void record(const AbortInfo &a, const char *region, const L1Model &l1);

  // A transaction of `region` completed (committed or ran on the fallback
  // path): counted for the trace, when recorded.
  static void count_completion(const char *region);

  // Quiescent: the aborts by record kind, summed over threads; zeroed.
  std::vector<KindAborts> kinds() const;
  void reset();

private:
  // Offsets are counted per byte of the first kMaxOffset bytes of a record
  // (one allocation per thread and kind, none while counting); beyond that,
  // in the last bucket.
  static constexpr uint32_t kMaxOffset = 4096;
  struct Tally {
    uint64_t conflicts_true = 0, conflicts_false = 0, capacity_lines = 0;
    std::vector<uint32_t> false_offsets, capacity_offsets; // kMaxOffset + 1 each
  };
  struct PerThread {
    std::vector<Tally> kinds;
  };
  PerThread &mine();

  std::vector<std::string> names_;
  const RecordMap *records_;
  std::unique_ptr<std::atomic<PerThread *>[]> threads_;
};

// A stable copy of a region name.
const char *intern_region_name(const std::string &name);

// Writes the calling thread's buffered abort records to the trace (they are
// buffered per thread and written in batches; also at thread exit).
void flush_thread_abort_records();

} // namespace memlayout::trees::htm
