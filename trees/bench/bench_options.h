// memlayout-bench's command line (the design's benchmark contract).
#pragma once

#include "map.h"

#include <cstdint>
#include <optional>
#include <string>

namespace memlayout::trees::bench {

enum class OutputFormat { kText, kJson };

struct OpMix {
  unsigned lookup = 80, insert = 10, remove = 10; // percentages, sum 100
  unsigned put = 0, scan = 0; // the HTM trees only: insert-or-overwrite, range scan
};

struct KeyDist {
  bool zipf = false;
  double theta = 0; // zipf only
  // zipf only: rank r is key r, so the hottest keys are neighbours (in one
  // leaf of a B+tree), as in YCSB's unscrambled Zipfian and Eunomia's runs.
  bool adjacent = false;
};

struct BenchOptions {
  std::string tree;
  unsigned threads = 1;
  double duration_s = 1.0; // 0: prefill only
  uint64_t key_range = uint64_t{1} << 16;
  // --prefill: a count of keys, or a fraction of the key range when written
  // with a decimal point (0.5, the default: setbench and the study prefill
  // half the key range).
  double prefill_fraction = 0.5;
  std::optional<uint64_t> prefill_count;
  OpMix mix;
  KeyDist dist;
  TreeConfig config;
  bool noise = false;
  bool check = false;
  bool linearizable = false; // implies check
  OutputFormat format = OutputFormat::kText;
  uint64_t seed = 1;
  bool pin = false;
  bool list = false;
  bool help = false;
  unsigned scan_length = 100; // pairs per scan
  bool htm_given = false;     // an HTM tree option was on the command line

  uint64_t prefill_keys() const {
    return prefill_count ? *prefill_count
                         : static_cast<uint64_t>(prefill_fraction * static_cast<double>(key_range));
  }
};

struct ParsedOptions {
  BenchOptions options;
  std::string error; // empty when the command line is valid
};

ParsedOptions parse_bench_options(int argc, char **argv);
const char *bench_usage();
const char *bench_usage_htm(); // the HTM trees' options, printed after bench_usage()

} // namespace memlayout::trees::bench
