#include "preload_launch.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <iterator>
#include <sys/wait.h>
#include <unistd.h>

namespace memlayout::cli {

std::string temp_file(const char *stem) {
  const char *tmp = std::getenv("TMPDIR");
  std::string dir = tmp && *tmp ? tmp : "/tmp";
  if (dir[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd))
      dir = std::string(cwd) + "/" + dir;
  }
  std::string path = dir + "/" + stem + ".XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0)
    return {};
  close(fd);
  return path;
}

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return ".";
  buf[n] = '\0';
  std::string p = buf;
  return p.substr(0, p.rfind('/'));
}

// The preload library sits in ../lib beside bin/ in the build tree and in an
// installed prefix alike.
std::string find_preload() {
  if (const char *env = std::getenv("MEMLAYOUT_PRELOAD_LIBRARY"); env && *env)
    return env;
  std::string dir = self_dir();
  for (const char *rel : {"/../lib/libmemlayout_preload.so", "/libmemlayout_preload.so"}) {
    std::string p = dir + rel;
    char real[PATH_MAX];
    if (access(p.c_str(), R_OK) == 0 && realpath(p.c_str(), real))
      return real;
  }
  return {};
}

void apply_preload_env(const PreloadEnv &env) {
  std::string ld = env.preload;
  if (const char *old = std::getenv("LD_PRELOAD"); old && *old)
    ld += ":" + std::string(old);
  setenv("LD_PRELOAD", ld.c_str(), 1);
  setenv("MEMLAYOUT_MODE", env.mode.c_str(), 1);
  setenv("MEMLAYOUT_ALLOCATOR", env.allocator.c_str(), 1);
  auto set_or_clear = [](const char *name, const std::string &v) {
    if (v.empty())
      unsetenv(name);
    else
      setenv(name, v.c_str(), 1);
  };
  set_or_clear("MEMLAYOUT_RULES", env.rules_text);
  set_or_clear("MEMLAYOUT_ROUTE_TABLE", env.route_table);
  set_or_clear("MEMLAYOUT_RULE_STATS", env.rule_stats);
}

namespace {

volatile sig_atomic_t g_forward_to = 0;
constexpr int kForwarded[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM};
static_assert(std::size(kForwarded) == 5); // ChildSignals::old_forwarded_

void forward_signal(int sig) {
  int saved = errno;
  if (pid_t pid = g_forward_to; pid > 0)
    kill(pid, sig);
  errno = saved;
}

} // namespace

ChildSignals::ChildSignals(pid_t child) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int_);
  sigaction(SIGQUIT, &ignore, &old_quit_);
  old_child_ = g_forward_to;
  g_forward_to = child;
  struct sigaction forward {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i)
    sigaction(kForwarded[i], &forward, &old_forwarded_[i]);
}

ChildSignals::~ChildSignals() {
  for (size_t i = 0; i < std::size(kForwarded); ++i)
    sigaction(kForwarded[i], &old_forwarded_[i], nullptr);
  g_forward_to = old_child_;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGQUIT, &old_quit_, nullptr);
}

int wait_child(pid_t pid, struct rusage *usage) {
  ChildSignals signals(pid);
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  if (usage)
    *usage = ru;
  return status;
}

} // namespace memlayout::cli
