#include "preload_launch.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <iterator>
#include <sstream>
#include <sys/stat.h>
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
  if (fd < 0 && dir != "/tmp") {
    // A TMPDIR that is gone or not writable: said once, then /tmp, as the
    // C library's tmpfile() does.
    static bool said = false;
    if (!said) {
      said = true;
      std::fprintf(stderr, "memlayout: warning: TMPDIR %s: %s: using /tmp\n", dir.c_str(),
                   std::strerror(errno));
    }
    path = std::string("/tmp/") + stem + ".XXXXXX";
    fd = mkstemp(path.data());
  }
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

std::string preload_for_launch() {
  std::string preload = find_preload();
  if (preload.empty()) {
    std::fprintf(stderr, "memlayout: cannot find libmemlayout_preload.so beside %s/../lib\n",
                 self_dir().c_str());
    return {};
  }
  // One MEMLAYOUT_PRELOAD_LIBRARY names: the loader would say it cannot
  // load it on the program's stderr, and the program would run unrecorded.
  if (const char *named = std::getenv("MEMLAYOUT_PRELOAD_LIBRARY"); named && *named) {
    char magic[4] = {};
    int fd = open(preload.c_str(), O_RDONLY | O_CLOEXEC);
    bool elf = fd >= 0 && read(fd, magic, sizeof magic) == sizeof magic &&
               std::memcmp(magic,
                           "\x7f"
                           "ELF",
                           4) == 0;
    int err = errno;
    if (fd >= 0)
      close(fd);
    if (!elf) {
      std::fprintf(stderr, "memlayout: MEMLAYOUT_PRELOAD_LIBRARY=%s: %s\n", preload.c_str(),
                   fd < 0 ? std::strerror(err) : "not a shared library (no ELF header)");
      return {};
    }
  }
  if (preload.find_first_of(" :\t\n") != std::string::npos) {
    std::fprintf(stderr,
                 "memlayout: the preload library's path '%s' has a space or a colon, which "
                 "LD_PRELOAD cannot carry (the loader splits it there): install memlayout under "
                 "a path without them, or point MEMLAYOUT_PRELOAD_LIBRARY at a link to it that "
                 "has none\n",
                 preload.c_str());
    return {};
  }
  return preload;
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

int measure_main(int argc, char **argv) {
  // argv: __measure FD -- PROGRAM ARGS...
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "memlayout __measure: usage: memlayout __measure FD -- PROGRAM ARGS\n");
    return 2;
  }
  int out = std::atoi(argv[1]);
  fcntl(out, F_SETFD, FD_CLOEXEC); // the program must not inherit it
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0)
    return 2;
  MeasuredRun m;
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0)
    return 2;
  if (pid == 0) {
    close(pipefd[0]);
    if (const char *preload = getenv(kMeasuredPreloadEnv)) {
      setenv("LD_PRELOAD", preload, 1);
      unsetenv(kMeasuredPreloadEnv);
    }
    execvp(argv[3], argv + 3);
    int err = errno;
    (void)!write(pipefd[1], &err, sizeof err);
    _exit(127);
  }
  close(pipefd[1]);
  ssize_t got;
  do
    got = read(pipefd[0], &m.exec_error, sizeof m.exec_error);
  while (got < 0 && errno == EINTR);
  close(pipefd[0]);
  if (got != static_cast<ssize_t>(sizeof m.exec_error))
    m.exec_error = 0;
  struct rusage ru {};
  m.status = wait_child(pid, &ru);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  m.wall_ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  m.utime_us = ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec;
  m.stime_us = ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec;
  m.maxrss_kib = ru.ru_maxrss;
  return write(out, &m, sizeof m) == static_cast<ssize_t>(sizeof m) ? 0 : 2;
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

std::string find_in_path(const std::string &program) {
  if (program.find('/') != std::string::npos)
    return program;
  const char *path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + program;
    if (access(p.c_str(), X_OK) == 0)
      return p;
  }
  return {};
}

std::string exec_failure(const char *command, int error) {
  bool path = std::strchr(command, '/') != nullptr;
  struct stat st;
  if (path && error == EACCES && stat(command, &st) == 0 && S_ISDIR(st.st_mode))
    return "Is a directory";
  if (error == ENOENT && !path)
    return "command not found";
  return std::strerror(error);
}

} // namespace memlayout::cli
