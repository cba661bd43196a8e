#include "gnuplot.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace memlayout::cli {

std::string find_gnuplot() {
  const char *path = std::getenv("PATH");
  if (!path || !*path)
    return {};
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    // An empty PATH entry means the current directory; a report should not
    // run a gnuplot that happens to lie there.
    if (end > start) {
      std::string candidate = dirs.substr(start, end - start) + "/gnuplot";
      struct stat st;
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    start = end + 1;
  }
  return {};
}

bool run_gnuplot(const std::string &gnuplot, const std::string &dir, const std::string &script,
                 std::string &error) {
  // gnuplot's complaints go to a log beside the script, read back on failure:
  // no pipe to drain, and the log stays for the user to look at.
  const std::string log = script.substr(0, script.rfind('.')) + ".log";
  pid_t pid = fork();
  if (pid < 0) {
    error = "cannot start gnuplot: " + std::string(std::strerror(errno));
    return false;
  }
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0)
      _exit(126);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0)
      dup2(null, 0);
    execl(gnuplot.c_str(), "gnuplot", script.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    unlink((dir + "/" + log).c_str());
    return true;
  }
  std::ifstream in(dir + "/" + log);
  std::stringstream complaint;
  complaint << in.rdbuf();
  std::string text = complaint.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  const size_t kTail = 600;
  if (text.size() > kTail)
    text = "..." + text.substr(text.size() - kTail);
  error = "gnuplot failed on " + dir + "/" + script +
          (WIFEXITED(status) ? " (exit " + std::to_string(WEXITSTATUS(status)) + ")"
                             : " (signal " + std::to_string(WTERMSIG(status)) + ")") +
          (text.empty() ? "" : ": " + text);
  return false;
}

} // namespace memlayout::cli
