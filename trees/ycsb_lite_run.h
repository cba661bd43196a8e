// One ycsb-lite run: load the table, run transactions, check.
#pragma once

#include "htm/htm_stats.h"
#include "ycsb_lite_options.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memlayout::trees::ycsb {

struct ThreadTxns {
  unsigned thread = 0;
  double seconds = 0;
  uint64_t reads = 0, updates = 0; // transactions of each kind
  uint64_t rows_updated = 0;
  uint64_t missing_rows = 0; // lookups that found no row (never, unless the tree is wrong)
  uint64_t txns() const { return reads + updates; }
};

struct YcsbResult {
  double load_s = 0;
  double duration_s = 0;
  uint64_t txns = 0;
  double txn_per_s = 0;
  std::vector<ThreadTxns> per_thread;
  bool checked = false;
  std::string check_error;           // empty when the check passed
  std::optional<htm::HtmReport> htm; // an HTM index's transactions
};

YcsbResult run_ycsb(const YcsbOptions &o);

} // namespace memlayout::trees::ycsb
