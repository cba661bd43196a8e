// memlayout structs: every record's layout as the compiler fixes it and as
// jemalloc and glibc place it, with the program's allocation sites.
#include "cache_model.h"
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

constexpr const char *kUsage =
    "usage: memlayout structs FILES... [options] [-p BUILD_DIR | -- COMPILER_ARGS]\n"
    "\n"
    "Every record (struct, class, union) the files define, laid out like pahole\n"
    "does, with the size class jemalloc and the chunk glibc give it, the line\n"
    "offsets its objects can start at and what each does to it, risks (locks\n"
    "and atomics sharing lines, padding that does not pad, straddling fields)\n"
    "and fixes; then every allocation site (new, malloc(sizeof(T)), make_unique,\n"
    "allocate, seg_malloc, ...) with its type. Files are compiled by clang with\n"
    "the commands of a compilation database, like clang-tidy does.\n"
    "\n"
    "options:\n"
    "  -p BUILD_DIR           the build directory whose compile_commands.json\n"
    "                         compiles the files (default: the first one found\n"
    "                         from the first file's directory upward)\n"
    "  -- COMPILER_ARGS       compile every file with these arguments instead\n"
    "                         (e.g. -- -std=c++20 -Iinclude; -x c++ for C++ headers)\n"
    "  --format text|json     output format (default text); json is the type map\n"
    "                         `memlayout report --types` reads\n"
    "  -o, --output FILE      write to FILE instead of stdout\n"
    "  -C, --class NAME       only the record NAME (full name, or without its\n"
    "                         namespaces and classes) and its sites; repeatable\n"
    "  --keep-going           report what was parsed when a file does not compile\n"
    "                         (the exit status is still 1)\n"
    "  --line-size N          cache line size (default: this machine's, else 64)\n"
    "  -h, --help             this text\n"
    "\n"
    "exit status: 0 done; 1 a file did not compile (diagnostics on stderr);\n"
    "2 bad usage or no compilation database.\n";

int usage_error(const std::string &message) {
  std::fprintf(stderr, "memlayout structs: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

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
  std::string format = "text", output;
  std::vector<std::string> classes;
  bool keep_going = false;
  uint32_t line_size = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--") {
      scan.fixed_args.emplace(argv + i + 1, argv + argc);
      break;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-p" || a.rfind("-p=", 0) == 0) {
      const char *v = a == "-p" ? value() : argv[i] + a.find('=') + 1;
      if (!v || !*v)
        return usage_error("-p needs the build directory (the one with compile_commands.json)");
      scan.build_dir = v;
    } else if (a == "--format") {
      const char *v = value();
      if (!v || (std::strcmp(v, "text") && std::strcmp(v, "json")))
        return usage_error(std::string("--format takes text or json, not '") + (v ? v : "") + "'");
      format = v;
    } else if (a == "-o" || a == "--output") {
      const char *v = value();
      if (!v || !*v)
        return usage_error(a + " needs a path");
      output = v;
    } else if (a == "-C" || a == "--class") {
      const char *v = value();
      if (!v || !*v)
        return usage_error(a + " needs a record name");
      classes.push_back(v);
    } else if (a == "--keep-going") {
      keep_going = true;
    } else if (a == "--line-size") {
      const char *v = value();
      char *end = nullptr;
      unsigned long n = v ? std::strtoul(v, &end, 10) : 0;
      if (!v || *end || n < 8 || n > 4096 || (n & (n - 1)))
        return usage_error(std::string("--line-size takes a power of two from 8 to 4096, not '") +
                           (v ? v : "") + "'");
      line_size = static_cast<uint32_t>(n);
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option '" + a + "'");
    } else {
      scan.files.push_back(a);
    }
  }
  if (scan.files.empty())
    return usage_error("no source files given");
  if (scan.fixed_args && !scan.build_dir.empty())
    return usage_error("-p and -- both say how to compile: give one");

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
  std::erase_if(report.records, [&](const auto &r) { return !selected(r.layout.name, classes); });
  std::erase_if(report.sites, [&](const auto &s) { return !selected(s.type, classes); });
  for (const std::string &c : classes)
    if (std::none_of(report.records.begin(), report.records.end(),
                     [&](const auto &r) { return inspector::record_selected(r.layout.name, c); }))
      std::fprintf(stderr, "memlayout structs: no record named '%s' in these files\n", c.c_str());

  std::ofstream file;
  std::ostream *out = &std::cout;
  if (!output.empty()) {
    file.open(output);
    if (!file) {
      std::fprintf(stderr, "memlayout structs: cannot write '%s': %s\n", output.c_str(),
                   std::strerror(errno));
      return 2;
    }
    out = &file;
  }
  if (format == "json") {
    render_structs_json(report, *out);
  } else {
    StructsTextOptions text;
    std::error_code ec;
    text.relative_to = std::filesystem::current_path(ec).string();
    render_structs_text(report, *out, text);
  }
  out->flush();
  if (!*out) {
    std::fprintf(stderr, "memlayout structs: write error\n");
    return 2;
  }
  if (failed)
    std::fprintf(stderr,
                 "memlayout structs: %zu of %zu files did not compile; reported what was "
                 "parsed\n",
                 report.failed.size(), scan.files.size());
  return failed ? 1 : 0;
}

} // namespace memlayout::cli
