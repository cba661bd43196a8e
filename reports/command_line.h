// The options the memlayout commands share, declared on the option table
// every program uses (cli/option_table.h).
#pragma once

#include "option_table.h"
#include "report_builder.h"
#include "rule_args.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace memlayout::cli {

// The App of `memlayout NAME` (make_program, named "memlayout NAME").
std::unique_ptr<CLI::App> make_command(const std::string &name, const std::string &description,
                                       const std::string &usage = "");

// --wrapper NAME and --not-wrapper NAME, both repeatable.
void add_wrapper_options(CLI::App &app, std::vector<std::string> &wrappers,
                         std::vector<std::string> &not_wrappers);

// --rules FILE and --segregate SPEC, both repeatable.
void add_rule_options(CLI::App &app, RuleArgs &rules);
// --allocator native|jemalloc.
void add_allocator_option(CLI::App &app, std::string &allocator, const std::string &what);

// --at, --hot, --cache, --types, --wrapper, --not-wrapper: what the analysis
// of a trace looks at (report, diff, advise, replay).
void add_analysis_options(CLI::App &app, inspector::ReportOptions &o);

} // namespace memlayout::cli
