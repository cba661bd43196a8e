// The replay's prediction, for `memlayout replay` and for `advise`, which
// checks the rules it writes by the layout they would make.
#pragma once

#include "report.h"
#include "report_builder.h"
#include "rule_args.h"

#include <string>

namespace memlayout::cli {

// The recorded sequence of `trace` up to o.at, re-executed under `rules` in
// a fresh worker process against the trace's allocator (or `allocator`:
// "jemalloc", "native"), and reported where the worker placed the objects,
// with the report's findings. `who` prefixes the warnings printed on the way
// (a rule that matched nothing, one routing other lines' allocations).
// False with error set, or empty when the message was printed already.
bool replay_layout(const std::string &trace, LoadedRules &rules, inspector::ReportOptions o,
                   const std::string &allocator, const char *who, inspector::Report &report,
                   std::string &error);

} // namespace memlayout::cli
