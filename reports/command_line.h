// How every memlayout command declares and parses its options: one table per
// command (CLI11), so help, error wording and exit codes come from one place —
// 0 after --help, 2 for a usage error, printed as
//   memlayout report: --format: takes text, json or html, not 'xml'
//   Run 'memlayout report --help' for the options.
#pragma once

#include "report_builder.h"
#include "rule_args.h"

#include <CLI/CLI.hpp>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace memlayout::cli {

// The App of `memlayout NAME`: `description` is what --help prints first;
// `usage`, when given, replaces the generated "Usage:" line.
std::unique_ptr<CLI::App> make_command(const std::string &name, const std::string &description,
                                       const std::string &usage = "");

// Parses argv; returns -1 when the command should run, else its exit status.
int parse_command(CLI::App &app, int argc, char **argv);

// For commands that run a program (record, run, compare): the options, then
// the program's command line, after `--` or from the first argument that is
// not an option. An unknown option before it is a usage error.
int parse_command_with_program(CLI::App &app, int argc, char **argv,
                               std::vector<std::string> &program);

// A usage error found after parsing (a combination of options): printed as
// parse errors are; returns 2.
int usage_error(const CLI::App &app, const std::string &message);

// Validators worded alike: "takes text or json, not 'xml'".
CLI::Validator one_of(std::vector<std::string> choices);
CLI::Validator positive_number();

// --format with its choices (the first is the default), -o/--output.
void add_format_option(CLI::App &app, std::string &format, std::vector<std::string> choices,
                       const std::string &what);
void add_output_option(CLI::App &app, std::string &output);

// A count such as --top N: a positive number, its default shown.
void add_count_option(CLI::App &app, const std::string &name, size_t &value,
                      const std::string &what);
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
