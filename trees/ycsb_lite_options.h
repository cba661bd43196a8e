// ycsb-lite's command line.
#pragma once

#include "map.h"

#include <cstdint>
#include <memory>
#include <string>

// CLI11 stays out of headers (tree_options.h says why).
namespace CLI {
class App;
}

namespace memlayout::trees::ycsb {

struct YcsbOptions {
  std::string tree;
  unsigned threads = 1;
  double duration_s = 1.0; // 0: load only
  uint64_t rows = 1'000'000;
  double theta = 0.99;    // Zipf skew of the rows a transaction touches
  unsigned txn_rows = 16; // rows per transaction
  unsigned read_pct = 90; // read-only transactions; the rest update
  TreeConfig config;
  bool pad_locks = false;
  bool check = false;
  bool json = false;
  uint64_t seed = 1;
};

// ycsb-lite's option table, filling `o` as it parses.
struct YcsbCommand {
  std::unique_ptr<CLI::App> app;
  CLI::App *htm_group;
};
YcsbCommand make_ycsb_command(YcsbOptions &o);
// What the parsed options, together, get wrong, or "".
std::string check_ycsb_options(const YcsbOptions &o, const YcsbCommand &command);

// Parses argv into `o`, printing --help or a usage error; -1 when the run
// should go on, else the exit status. The option table is gone when it
// returns, so that none of it is live in a recorded heap.
int parse_ycsb_command_line(int argc, char **argv, YcsbOptions &o);

} // namespace memlayout::trees::ycsb
