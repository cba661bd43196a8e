// memlayout record: run a program under the preload and leave its trace.
#include "commands.h"
#include "preload_launch.h"
#include "route_setup.h"
#include "rule_args.h"
#include "trace_reader.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace memlayout::cli {
namespace {

constexpr const char *kUsage =
    "usage: memlayout record [options] [--] COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with every heap allocation recorded: address, requested and\n"
    "usable size, thread, time and call stack, plus loaded modules and page\n"
    "frames. COMMAND's output and exit status are its own.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE        trace file (default memlayout.PROGRAM.PID.trace)\n"
    "  --allocator MODE         native (default): the program's own allocator;\n"
    "                           jemalloc: serve it from jemalloc 5.3\n"
    "  --stack-depth N          frames recorded per call site, 1-64 (default 8)\n"
    "  --unwind METHOD          cfi (default: exact, cached .eh_frame rules),\n"
    "                           fp (frame pointers), dwarf (libgcc, slow)\n"
    "  --follow-children        also record programs COMMAND executes\n"
    "  --no-page-frames         do not read physical frames at snapshots\n"
    "  --segregate SPEC         route matching allocations: a rule such as\n"
    "                           function=make_node,pool=nodes (repeatable)\n"
    "  --rules FILE             rules, one per line (# comments); see\n"
    "                           docs/segregation.md\n"
    "  --types MAP              type map for type= rules (default: PROGRAM's\n"
    "                           .memlayout-types.json beside it)\n"
    "  --wrapper NAME           look through NAME when deciding a rule's site\n"
    "  --not-wrapper NAME       never look through NAME, even if detected\n"
    "  -h, --help               this text\n"
    "\n"
    "Forked children write FILE with .PID inserted before the extension; with\n"
    "--follow-children an image replaced by exec continues in FILE.PID.N.\n";

struct Options {
  std::string output;
  std::string allocator = "native";
  std::string unwind = "cfi";
  int stack_depth = 8;
  bool follow_children = false;
  bool page_frames = true;
  RuleArgs rules;
  std::string types_file;            // --types MAP for type= rules
  inspector::WrapperPolicy wrappers; // --wrapper, --not-wrapper
  std::vector<char *> command;
};

constexpr const char *kRunUsage =
    "usage: memlayout run [options] [--] COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with segregation rules applied and nothing recorded: the\n"
    "allocations the rules match come from their pools, padded or aligned as\n"
    "the rules say, and one line per rule at exit says what it routed.\n"
    "Without rules it runs COMMAND on the same allocator, untouched: the\n"
    "baseline to compare a fix with (see memlayout compare). COMMAND's output\n"
    "and exit status are its own.\n"
    "\n"
    "options:\n"
    "  --segregate SPEC         a rule such as function=make_node,pool=nodes\n"
    "                           (repeatable)\n"
    "  --rules FILE             rules, one per line (# comments), e.g. from\n"
    "                           memlayout advise; see docs/segregation.md\n"
    "  --allocator MODE         native (default) or jemalloc, for what the rules\n"
    "                           leave alone\n"
    "  --types MAP              type map for type= rules (memlayout structs)\n"
    "  --wrapper NAME           look through NAME when deciding a rule's site\n"
    "  --not-wrapper NAME       never look through NAME, even if detected\n"
    "  -h, --help               this text\n";

// `record` and `run` share their launcher; run records nothing.
bool g_run_mode = false;

int usage_error(const char *fmt, const char *arg) {
  std::fprintf(stderr, "memlayout %s: ", g_run_mode ? "run" : "record");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, "\n\n%s", g_run_mode ? kRunUsage : kUsage);
  return 2;
}

// Returns -1 when parsing succeeded, else the exit status to return.
int parse(int argc, char **argv, Options &o) {
  int i = 1;
  auto value = [&](const char *name) -> const char * {
    if (i + 1 >= argc)
      return nullptr;
    (void)name;
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-')
      break;
    std::string name = a, inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      name = a.substr(0, a.find('='));
      inline_value = a.substr(a.find('=') + 1);
      has_inline = true;
    }
    auto take = [&]() -> const char * {
      return has_inline ? inline_value.c_str() : value(name.c_str());
    };
    bool record_only = name == "-o" || name == "--output" || name == "--unwind" ||
                       name == "--stack-depth" || name == "--follow-children" ||
                       name == "--no-page-frames";
    if (g_run_mode && record_only)
      return usage_error("'%s' is an option of memlayout record", name.c_str());
    if (name == "-h" || name == "--help") {
      std::fputs(g_run_mode ? kRunUsage : kUsage, stdout);
      return 0;
    } else if (name == "-o" || name == "--output") {
      const char *v = take();
      if (!v || !*v)
        return usage_error("%s needs a file name", name.c_str());
      o.output = v;
    } else if (name == "--allocator") {
      const char *v = take();
      if (!v || (std::strcmp(v, "native") && std::strcmp(v, "jemalloc")))
        return usage_error("--allocator takes native or jemalloc, not '%s'", v ? v : "");
      o.allocator = v;
    } else if (name == "--unwind") {
      const char *v = take();
      if (!v || (std::strcmp(v, "cfi") && std::strcmp(v, "fp") && std::strcmp(v, "dwarf")))
        return usage_error("--unwind takes cfi, fp or dwarf, not '%s'", v ? v : "");
      o.unwind = v;
    } else if (name == "--stack-depth") {
      const char *v = take();
      char *end = nullptr;
      long n = v ? std::strtol(v, &end, 10) : 0;
      if (!v || *end || n < 1 || n > 64)
        return usage_error("--stack-depth takes a number from 1 to 64, not '%s'", v ? v : "");
      o.stack_depth = static_cast<int>(n);
    } else if (name == "--follow-children") {
      o.follow_children = true;
    } else if (name == "--no-page-frames") {
      o.page_frames = false;
    } else if (name == "--segregate") {
      const char *v = take();
      if (!v || !*v)
        return usage_error("%s needs a rule, e.g. function=make_node,pool=nodes", name.c_str());
      o.rules.specs.push_back(v);
    } else if (name == "--types") {
      const char *v = take();
      if (!v || !*v)
        return usage_error("%s needs a type map (memlayout structs --format json)", name.c_str());
      o.types_file = v;
    } else if (name == "--wrapper" || name == "--not-wrapper") {
      const char *v = take();
      if (!v || !*v)
        return usage_error("%s needs a function name", name.c_str());
      (name == "--wrapper" ? o.wrappers.wrappers : o.wrappers.not_wrappers).push_back(v);
    } else if (name == "--rules") {
      const char *v = take();
      if (!v || !*v)
        return usage_error("%s needs a file name", name.c_str());
      o.rules.files.push_back(v);
    } else {
      return usage_error("unknown option '%s'", a.c_str());
    }
  }
  for (; i < argc; ++i)
    o.command.push_back(argv[i]);
  if (o.command.empty())
    return usage_error("%s", g_run_mode ? "no command to run" : "no command to record");
  o.command.push_back(nullptr);
  return -1;
}

std::string absolute(const std::string &path) {
  if (!path.empty() && path[0] == '/')
    return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd))
    return path;
  return std::string(cwd) + "/" + path;
}

std::string basename_of(const char *path) {
  const char *s = std::strrchr(path, '/');
  return s ? s + 1 : path;
}

// What the child tells the parent through a close-on-exec pipe when it could
// not start the program.
struct ChildFailure {
  int stage; // 1: trace file, 2: exec
  int error;
};

struct TraceSummary {
  bool complete = false;
  uint64_t events = 0, allocs = 0, bytes = 0, file_bytes = 0;
};

// The reader's prescan: record headers and tables, no event block decoded.
TraceSummary summarize(const std::string &path) {
  TraceSummary s;
  inspector::TraceReader r;
  if (!r.open(path))
    return s;
  s.file_bytes = r.file_size();
  if (const auto &end = r.final_end()) {
    s.complete = true;
    s.events = end->events;
    s.allocs = end->allocs;
    s.bytes = end->bytes_allocated;
  } else {
    s.events = r.block_event_count();
  }
  return s;
}

std::string human(double v, const char *unit) {
  const char *prefix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  const char *sep = (i || *unit) ? " " : "";
  std::snprintf(buf, sizeof buf, i ? "%.1f%s%s%s" : "%.0f%s%s%s", v, sep, prefix[i], unit);
  return buf;
}

void print_summary(const std::string &path) {
  TraceSummary s = summarize(path);
  if (!s.file_bytes) {
    std::fprintf(stderr, "memlayout: no trace was written to %s\n", path.c_str());
    return;
  }
  std::fprintf(
      stderr, "memlayout: %s events (%s allocations, %s), %s trace, %.2f B/event%s -> %s\n",
      human(static_cast<double>(s.events), "").c_str(),
      human(static_cast<double>(s.allocs), "").c_str(),
      human(static_cast<double>(s.bytes), "B").c_str(),
      human(static_cast<double>(s.file_bytes), "B").c_str(),
      s.events ? static_cast<double>(s.file_bytes) / static_cast<double>(s.events) : 0.0,
      s.complete ? "" : " (incomplete: the program did not finish writing it)", path.c_str());
}

int launch(int argc, char **argv) {
  Options o;
  if (int rc = parse(argc, argv, o); rc >= 0)
    return rc;
  LoadedRules rules;
  if (!load_rules(o.rules, &rules))
    return 2;
  if (!expand_match_keys(&rules, o.command[0], o.types_file, true))
    return 2;
  RouteSetup routes;
  if (rules.set->count && !routes.prepare(rules, o.command[0], o.wrappers))
    return 2;
  std::string preload = find_preload();
  if (preload.empty()) {
    std::fprintf(stderr, "memlayout: cannot find libmemlayout_preload.so beside %s/../lib\n",
                 self_dir().c_str());
    return 2;
  }
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    std::perror("memlayout: pipe");
    return 2;
  }
  std::string prog = basename_of(o.command[0]);
  std::string explicit_output = o.output.empty() ? std::string() : absolute(o.output);
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("memlayout: fork");
    return 2;
  }
  if (pid == 0) {
    close(pipefd[0]);
    std::string out =
        explicit_output.empty()
            ? absolute("memlayout." + prog + "." + std::to_string(getpid()) + ".trace")
            : explicit_output;
    auto fail = [&](int stage, int err) {
      ChildFailure f{stage, err};
      (void)!write(pipefd[1], &f, sizeof f);
      _exit(stage == 2 ? (err == ENOENT ? 127 : 126) : 2);
    };
    if (!g_run_mode) {
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0)
        fail(1, errno);
      close(fd);
    }
    PreloadEnv env;
    env.preload = preload;
    env.mode = g_run_mode ? "run" : "record";
    env.allocator = o.allocator;
    if (rules.set->count) {
      env.rules_text = rules.text;
      env.route_table = routes.table_path();
      env.rule_stats = routes.stats_path();
    }
    apply_preload_env(env);
    setenv("MEMLAYOUT_OUTPUT", out.c_str(), 1);
    setenv("MEMLAYOUT_UNWIND", o.unwind.c_str(), 1);
    setenv("MEMLAYOUT_STACK_DEPTH", std::to_string(o.stack_depth).c_str(), 1);
    setenv("MEMLAYOUT_ROOT_PID", std::to_string(getpid()).c_str(), 1);
    setenv("MEMLAYOUT_FOLLOW_CHILDREN", o.follow_children ? "1" : "0", 1);
    setenv("MEMLAYOUT_PAGEMAP", o.page_frames ? "1" : "0", 1);
    unsetenv("MEMLAYOUT_EXEC_GEN");
    execvp(o.command[0], o.command.data());
    fail(2, errno);
  }
  close(pipefd[1]);
  // Like system(): the terminal's ^C and ^\ are for the program.
  struct sigaction ignore {
  }, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  ChildFailure failure{};
  ssize_t got;
  do
    got = read(pipefd[0], &failure, sizeof failure);
  while (got < 0 && errno == EINTR);
  close(pipefd[0]);
  int status = wait_child(pid);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  std::string out = explicit_output.empty()
                        ? absolute("memlayout." + prog + "." + std::to_string(pid) + ".trace")
                        : explicit_output;
  if (got == static_cast<ssize_t>(sizeof failure)) {
    if (failure.stage == 1) {
      std::fprintf(stderr, "memlayout: cannot write the trace '%s': %s\n", out.c_str(),
                   std::strerror(failure.error));
      return 2;
    }
    std::fprintf(stderr, "memlayout: %s: %s\n", o.command[0],
                 failure.error == ENOENT ? "command not found" : std::strerror(failure.error));
    unlink(out.c_str());
    return failure.error == ENOENT ? 127 : 126;
  }
  if (!g_run_mode)
    print_summary(out);
  if (rules.set->count)
    routes.print_summary(rules);
  if (WIFSIGNALED(status)) {
    // Die the same way, so a shell or CI sees what the program did.
    int sig = WTERMSIG(status);
    std::fflush(nullptr);
    routes.remove_files(); // no destructor runs after raise()
    signal(sig, SIG_DFL);
    struct rlimit no_core {
      0, 0
    };
    setrlimit(RLIMIT_CORE, &no_core);
    raise(sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

} // namespace

int record_main(int argc, char **argv) {
  g_run_mode = false;
  return launch(argc, argv);
}

int run_main(int argc, char **argv) {
  g_run_mode = true;
  return launch(argc, argv);
}

} // namespace memlayout::cli
