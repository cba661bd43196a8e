// How every memlayout program declares and parses its options — `memlayout
// COMMAND`, memlayout-bench, ycsb-lite: one table per program (CLI11), so
// help, error wording and exit codes come from one place — 0 after --help, 2
// for a usage error, printed as
//   memlayout report: --format: takes text, json or html, not 'xml'
//   Run 'memlayout report --help' for the options.
// CLI11 only (no LLVM): the trees' programs link it too.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memlayout::cli {

// The App of a program: `name` is how messages and --help call it
// ("memlayout report", "memlayout-bench"); `description` is what --help
// prints first; `usage`, when given, replaces the generated "Usage:" line.
std::unique_ptr<CLI::App> make_program(const std::string &name, const std::string &description,
                                       const std::string &usage = "");

// What parsing argv came to, printing nothing: `exit_status` is -1 when the
// program should run, 0 after --help, 2 after a usage error (`error` says
// which, in the words every program uses).
struct ParseOutcome {
  int exit_status = -1;
  std::string error;
};
ParseOutcome parse_arguments(CLI::App &app, int argc, char **argv);

// parse_arguments, then prints --help to stdout or the error to stderr;
// returns -1 when the program should run, else its exit status.
int parse_command(CLI::App &app, int argc, char **argv);

// For commands that run a program (record, run, compare): the options, then
// the program's command line, after `--` or from the first argument that is
// not an option. An unknown option before it is a usage error.
int parse_command_with_program(CLI::App &app, int argc, char **argv,
                               std::vector<std::string> &program);

// A usage error found after parsing (a combination of options): printed as
// parse errors are; returns 2.
int usage_error(const CLI::App &app, const std::string &message);

// Validators worded alike: "takes text or json, not 'xml'", "takes a number
// from 1 to 1024, not '0'".
CLI::Validator one_of(std::vector<std::string> choices);
CLI::Validator positive_number();
// A file's path: not empty (`-o ""` is a mistake, not "the default").
CLI::Validator a_path();
CLI::Validator whole_number(uint64_t lo, uint64_t hi, const std::string &what = "a number");
CLI::Validator real_number(double lo, double hi, const std::string &what = "a number");
// The message of a value an option's own callback refuses, in the same words.
CLI::ValidationError refused(const std::string &option, const std::string &takes,
                             const std::string &value);

// --format with its choices (the first is the default), -o/--output.
void add_format_option(CLI::App &app, std::string &format, std::vector<std::string> choices,
                       const std::string &what);
void add_output_option(CLI::App &app, std::string &output);

// A count such as --top N: a positive number, its default shown.
void add_count_option(CLI::App &app, const std::string &name, size_t &value,
                      const std::string &what);

} // namespace memlayout::cli
