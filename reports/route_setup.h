// What `memlayout run` and `record --rules` do around the program: before it
// starts, the route table that makes the interposer's matching the report's
// allocation-site definition (inspector/alloc_site.h); after it ends, one line
// per rule saying what it routed.
#pragma once

#include "alloc_site.h"
#include "rule_args.h"

#include <memory>
#include <string>
#include <vector>

namespace memlayout::cli {

class RouteSetup {
public:
  RouteSetup();
  ~RouteSetup(); // removes the files it made
  void remove_files();
  RouteSetup(const RouteSetup &) = delete;
  RouteSetup &operator=(const RouteSetup &) = delete;

  // Reads the program's and its libraries' code maps, detects wrappers, labels
  // the code for `rules` and writes the table and an empty stats file. Warns
  // about rules that can match nothing (with close names, inlined ones
  // included) and about rules naming a wrapper. False with a message when a
  // file cannot be written.
  // `programs`: the program first, then others a command names for the
  // rules (programs_named).
  bool prepare(const LoadedRules &rules, const std::vector<std::string> &programs,
               const inspector::WrapperPolicy &options);

  const std::string &table_path() const { return table_path_; }
  const std::string &stats_path() const { return stats_path_; }

  // After the run: "memlayout: rule N SPEC (ORIGIN): A allocations, B" per
  // rule, summed over the processes that wrote counts; a warning for each
  // rule that routed nothing. Returns how many routed nothing.
  size_t print_summary(const LoadedRules &rules, int wait_status, bool became_another) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string table_path_, stats_path_;
};

// Per rule: allocations and bytes, summed over the stats file's lines.
struct RuleCount {
  uint64_t allocations = 0, bytes = 0;
};
std::vector<RuleCount> read_rule_stats(const std::string &path, size_t rules, size_t *processes);

// Functions of the code maps close to a rule's function key, inlined ones
// marked: what a warning suggests.
std::vector<std::string> close_functions(const std::string &key,
                                         const std::vector<const inspector::ModuleCode *> &code);

} // namespace memlayout::cli
