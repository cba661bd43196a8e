// memlayout-bench's command line (the design's benchmark contract).
#pragma once

#include "map.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

// CLI11 stays out of headers (tree_options.h says why).
namespace CLI {
class App;
}

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
  unsigned scan_length = 100; // pairs per scan

  uint64_t prefill_keys() const {
    return prefill_count ? *prefill_count
                         : static_cast<uint64_t>(prefill_fraction * static_cast<double>(key_range));
  }
};

// memlayout-bench's option table, filling `o` as it parses.
struct BenchCommand {
  std::unique_ptr<CLI::App> app;
  CLI::App *htm_group;
};
BenchCommand make_bench_command(BenchOptions &o);
// What the parsed options, together, get wrong, or "" (--tree missing,
// a mix the tree cannot run, a prefill larger than the key range, ...).
std::string check_bench_options(const BenchOptions &o, const BenchCommand &command);

// Parses argv into `o`, printing --help or a usage error; -1 when the
// benchmark should run, else the exit status. The option table is gone when
// it returns: what it allocated would otherwise be live in the recorded heap
// beside the tree's records (and in `memlayout advise`'s rules).
int parse_bench_command_line(int argc, char **argv, BenchOptions &o);

// The two in one, printing nothing, for tests: `exit_status` -1 when the
// benchmark should run, 0 after --help, 2 with `error` for a usage error.
struct ParsedOptions {
  BenchOptions options;
  int exit_status = -1;
  std::string error;
};
ParsedOptions parse_bench_options(int argc, char **argv);

} // namespace memlayout::trees::bench
