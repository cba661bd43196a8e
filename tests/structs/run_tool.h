// Runs a program for the structs tests and keeps what it printed.
#pragma once

#include <string>
#include <vector>

namespace structs_test {

struct ToolRun {
  int exit_code = -1; // -1: did not exit normally
  std::string out, err;
};

// argv[0] is the program's path; `cwd` empty: this process's directory.
ToolRun run_tool(const std::vector<std::string> &argv, const std::string &cwd = "");

// A fresh empty directory under the test's build directory.
std::string scratch_dir(const std::string &name);

std::string read_text(const std::string &path);
void write_text(const std::string &path, const std::string &text);

} // namespace structs_test
