// ycsb-lite's command line.
#pragma once

#include "map.h"

#include <cstdint>
#include <string>

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
  bool help = false;
  bool htm_given = false; // an HTM tree option was on the command line
};

struct ParsedYcsbOptions {
  YcsbOptions options;
  std::string error; // empty when valid
};

ParsedYcsbOptions parse_ycsb_options(int argc, char **argv);
const char *ycsb_usage();
const char *ycsb_usage_htm(); // the HTM trees' options, printed after ycsb_usage()

} // namespace memlayout::trees::ycsb
