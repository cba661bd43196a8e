#include "run_tool.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace structs_test {

std::string read_text(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text;
  REQUIRE(out.good());
}

std::string scratch_dir(const std::string &name) {
  std::filesystem::path dir = std::filesystem::path(STRUCTS_WORK_DIR) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

ToolRun run_tool(const std::vector<std::string> &argv, const std::string &cwd) {
  // Output goes to files: no pipe to drain while waiting.
  const std::string dir = scratch_dir("run." + std::to_string(getpid()));
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
        (!cwd.empty() && chdir(cwd.c_str()) != 0))
      _exit(126);
    std::vector<char *> args;
    for (const std::string &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  ToolRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  std::filesystem::remove_all(dir);
  return r;
}

} // namespace structs_test
