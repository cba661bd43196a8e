// memlayout structs: every record's layout as the compiler fixes it and as
// jemalloc and glibc place it, with the program's allocation sites.
#include "cache_model.h"
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "render_structs.h"
#include "struct_scan.h"
#include "structs_report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace memlayout::cli {
namespace {

uint32_t machine_line_size() {
  std::string ignored;
  if (auto model = inspector::CacheModel::from_sysfs(ignored); model && !model->levels.empty())
    return model->levels.front().line_size;
  return inspector::CacheModel::reference().levels.front().line_size;
}

bool selected(const std::string &type, const std::vector<std::string> &classes) {
  if (classes.empty())
    return true;
  for (const std::string &c : classes)
    if (inspector::record_selected(type, c))
      return true;
  return false;
}

} // namespace

int structs_main(int argc, char **argv) {
  inspector::ScanOptions scan;
  std::string format, output;
  std::vector<std::string> classes;
  bool keep_going = false;
  uint32_t line_size = 0;
  auto app = make_command(
      "structs",
      "Every record (struct, class, union) the files define, laid out like pahole does,\n"
      "with the size class jemalloc and the chunk glibc give it, the line offsets its\n"
      "objects can start at and what each does to it, risks (locks and atomics sharing\n"
      "lines, padding that does not pad, straddling fields) and fixes; then every\n"
      "allocation site (new, malloc(sizeof(T)), make_unique, allocate, seg_malloc, ...)\n"
      "with its type. Files are compiled by clang with the commands of a compilation\n"
      "database, like clang-tidy does, or with the arguments after --.\n\n"
      "Exit status: 0 done; 1 a file did not compile or does not exist (diagnostics on\n"
      "stderr), or no record matched any -C NAME; 2 bad usage or no compilation\n"
      "database.",
      "Usage: memlayout structs FILES... [OPTIONS] [-p BUILD_DIR | -- COMPILER_ARGS...]");
  app->add_option("FILES", scan.files, "the source files")->required();
  app->add_option("-p", scan.build_dir,
                  "the build directory whose compile_commands.json compiles the files (default: "
                  "the first one found from the first file's directory upward)")
      ->type_name("BUILD_DIR");
  add_format_option(*app, format, {"text", "json"},
                    "json is the type map `memlayout report --types` reads");
  app->add_option("-o,--output", output, "write to FILE instead of stdout")
      ->type_name("FILE")
      ->check(a_path());
  app->add_option("-C,--class", classes,
                  "only the record NAME (full name, or without its namespaces and classes) and "
                  "its sites; repeatable")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app->add_flag("--keep-going", keep_going,
                "report what was parsed when a file does not compile (the exit status is still 1)");
  app->add_option("--line-size", line_size, "cache line size (default: this machine's, else 64)")
      ->check(CLI::Validator(
          [](std::string &v) -> std::string {
            char *end = nullptr;
            unsigned long n = std::strtoul(v.c_str(), &end, 10);
            if (v.empty() || *end || n < 8 || n > 4096 || (n & (n - 1)))
              return "takes a power of two from 8 to 4096, not '" + v + "'";
            return {};
          },
          ""))
      ->type_name("N");
  // The compiler's arguments follow `--`: not ours to parse.
  int ours = argc;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      scan.fixed_args.emplace(argv + i + 1, argv + argc);
      ours = i;
      break;
    }
  if (int rc = parse_command(*app, ours, argv); rc >= 0)
    return rc;
  if (scan.fixed_args && !scan.build_dir.empty())
    return usage_error(*app, "-p and -- both say how to compile: give one");
  if (output_is_an_input(output, scan.files, "structs"))
    return 2;

  inspector::ScanResult scanned;
  std::string error;
  if (!inspector::scan_structs(scan, scanned, error)) {
    std::fprintf(stderr, "memlayout structs: %s\n", error.c_str());
    return 2;
  }
  const bool failed = !scanned.failed.empty();
  if (failed && !keep_going) {
    std::fprintf(stderr,
                 "memlayout structs: %zu of %zu files did not compile; nothing reported "
                 "(--keep-going reports what was parsed)\n",
                 scanned.failed.size(), scan.files.size());
    return 1;
  }

  inspector::StructsReport report =
      inspector::analyse_structs(std::move(scanned.records), std::move(scanned.sites),
                                 line_size ? line_size : machine_line_size());
  report.failed = std::move(scanned.failed);
  std::erase_if(report.records, [&](const auto &r) {
    return !classes.empty() && std::none_of(classes.begin(), classes.end(), [&](const auto &c) {
      return inspector::record_selected(r.layout, c);
    });
  });
  // A site by its type's name, or as the type of a record selected by its
  // other spelling.
  std::erase_if(report.sites, [&](const auto &s) {
    return !selected(s.type, classes) &&
           std::none_of(report.records.begin(), report.records.end(),
                        [&](const auto &r) { return r.layout.name == s.type; });
  });
  size_t unmatched = 0;
  for (const std::string &c : classes)
    if (std::none_of(report.records.begin(), report.records.end(),
                     [&](const auto &r) { return inspector::record_selected(r.layout, c); })) {
      std::fprintf(stderr, "memlayout structs: no record named '%s' in these files\n", c.c_str());
      ++unmatched;
    }
  // As grep: nothing of what was asked for is there.
  const bool nothing_selected = !classes.empty() && unmatched == classes.size();

  CommandOutput out("structs");
  if (!out.open(output, scan.files))
    return 2;
  if (format == "json") {
    render_structs_json(report, out.stream());
  } else {
    StructsTextOptions text;
    std::error_code ec;
    text.relative_to = std::filesystem::current_path(ec).string();
    render_structs_text(report, out.stream(), text);
  }
  if (!out.close())
    return 2;
  if (failed)
    std::fprintf(stderr,
                 "memlayout structs: %zu of %zu files did not compile; reported what was "
                 "parsed\n",
                 report.failed.size(), scan.files.size());
  return failed || nothing_selected ? 1 : 0;
}

} // namespace memlayout::cli
