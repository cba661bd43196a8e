// What rules add to `memlayout record` and `run`: checked and expanded
// against the program's code before it starts (LLVM reads its debug
// information), the route table it is given, one line per rule at the end.
//
// Linked into memlayout-full only. `memlayout` itself loads no LLVM, so that
// a recording does not pay LLVM's start-up (~15 ms, more than a short
// program's whole recording costs); without this part linked (the weak
// declaration below is null) it hands a command with rules to memlayout-full.
#pragma once

#include "alloc_site.h"
#include "preload_launch.h"
#include "rule_args.h"

#include <memory>
#include <string>

namespace memlayout::cli {

class RecordRules {
public:
  virtual ~RecordRules() = default;
  // The child's MEMLAYOUT_RULES, route table and stats file.
  virtual void set_env(PreloadEnv &env) const = 0;
  // After the run: what each rule routed.
  // `wait_status`: the program's, as waitpid gave it; `became_another`: it
  // replaced itself by exec (unfollowed).
  virtual void print_summary(int wait_status, bool became_another) const = 0;
  virtual void remove_files() = 0;
};

// Loads and expands the rules, labels the code of the command's program
// (with follow_children, of every program the command names: children get
// the rules too). Null with *status
// (the exit status) after printing what is wrong.
[[gnu::weak]] std::unique_ptr<RecordRules>
prepare_record_rules(const RuleArgs &args, const std::string &types_file,
                     const inspector::WrapperPolicy &wrappers,
                     const std::vector<std::string> &command, bool follow_children, int *status);

} // namespace memlayout::cli
