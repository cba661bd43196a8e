// Runs clang (libTooling) over source files the way a clang tool does, and
// collects the record layouts and allocation sites they define. The
// compilation database follows clang tools' conventions: `-p BUILD_DIR`
// (compile_commands.json in BUILD_DIR or a parent), else one found from the
// first file upward, or fixed compiler arguments (everything after `--`).
#pragma once

#include "record_layout.h"

#include <optional>
#include <string>
#include <vector>

namespace memlayout::inspector {

struct ScanOptions {
  std::vector<std::string> files;
  std::string build_dir; // -p; "" to search from the first file upward
  // The compiler arguments after `--`, used for every file instead of a
  // database (FixedCompilationDatabase).
  std::optional<std::vector<std::string>> fixed_args;
  // clang's builtin headers (stddef.h, ...); "" for the one found at build time.
  std::string resource_dir;
};

struct ScanResult {
  std::vector<RecordLayout>
      records;                     // every record defined outside system headers, by file and line
  std::vector<AllocSite> sites;    // by file, line, column
  std::vector<std::string> failed; // files that did not compile (diagnostics went to stderr)
};

// False with `error` set when no file could be attempted (no compilation
// database: the error says how to give one). Files that fail to compile are
// listed in `failed`, with what they did define still collected.
bool scan_structs(const ScanOptions &o, ScanResult &out, std::string &error);

// The clang resource directory memlayout was built against.
const char *default_resource_dir();

} // namespace memlayout::inspector
