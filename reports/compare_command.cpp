// memlayout compare: does the fix pay? Runs a program without and with
// segregation rules on the same allocator, interleaved, and prints the wall
// and CPU time ratios and each side's peak RSS — hyperfine's habits (--runs,
// --warmup, --show-output, --export-json), perf stat's "median, min-max".
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "json_write.h"
#include "preload_launch.h"
#include "route_setup.h"
#include "rule_args.h"
#include "rule_match.h"
#include "text_format.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace memlayout::cli {
namespace {

struct Sample {
  double wall_s = 0, cpu_s = 0;
  long maxrss_kib = 0;
  int status = 0;
};

struct Side {
  std::vector<Sample> runs;
  std::vector<double> wall() const {
    std::vector<double> v;
    for (const auto &s : runs)
      v.push_back(s.wall_s);
    return v;
  }
  std::vector<double> cpu() const {
    std::vector<double> v;
    for (const auto &s : runs)
      v.push_back(s.cpu_s);
    return v;
  }
  long maxrss() const {
    long m = 0;
    for (const auto &s : runs)
      m = std::max(m, s.maxrss_kib);
    return m;
  }
};

struct Summary {
  double median = 0, min = 0, max = 0;
};

Summary summarize(std::vector<double> v) {
  if (v.empty())
    return {};
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

std::string describe_status(int status) {
  if (WIFEXITED(status))
    return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Every run reads the same input. A file is read again from where it began;
// a pipe's bytes are kept in a temporary file first, since each run would
// otherwise get what the one before left (nothing). A terminal, or a
// device such as /dev/null, is left as it is.
class SameInput {
public:
  bool prepare(std::string *error) {
    struct stat st;
    if (isatty(0) || fstat(0, &st) != 0 || S_ISCHR(st.st_mode))
      return true;
    if (S_ISREG(st.st_mode)) {
      start_ = lseek(0, 0, SEEK_CUR);
      fd_ = start_ >= 0 ? 0 : -1;
      return true;
    }
    std::string path = temp_file("memlayout-input");
    int fd = path.empty() ? -1 : open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (!path.empty())
      unlink(path.c_str()); // the descriptor keeps it while compare runs
    if (fd < 0) {
      *error = std::string("cannot keep the standard input for every run: ") + std::strerror(errno);
      return false;
    }
    char buf[1 << 16];
    for (ssize_t n; (n = read(0, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 || write(fd, buf, static_cast<size_t>(n)) != n) {
        *error =
            std::string("cannot keep the standard input for every run: ") + std::strerror(errno);
        close(fd);
        return false;
      }
    }
    fd_ = fd;
    return true;
  }
  // In the child, before exec.
  void give() const {
    if (fd_ < 0)
      return;
    if (fd_ != 0)
      dup2(fd_, 0);
    lseek(0, start_, SEEK_SET);
  }

private:
  int fd_ = -1;
  off_t start_ = 0;
};

// One run of the program under the preload; false with *error when it could
// not be started. The small `memlayout` forks and measures it (`__measure`):
// forked from here its peak RSS would start at ours, LLVM included.
bool run_once(const PreloadEnv &env, std::vector<char *> &command, bool show_output,
              const SameInput &input, Sample *out, std::string *error) {
  int result[2];
  if (pipe2(result, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  std::string measurer = self_dir() + "/memlayout", fd = std::to_string(result[1]);
  std::vector<char *> argv = {measurer.data(), const_cast<char *>("__measure"), fd.data(),
                              const_cast<char *>("--")};
  argv.insert(argv.end(), command.begin(), command.end()); // ends with its nullptr
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    close(result[0]);
    fcntl(result[1], F_SETFD, 0); // for the measurer, which closes it on its exec
    if (!show_output) {
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
        close(null);
      }
    }
    input.give();
    apply_preload_env(env);
    // The measurer itself runs without the preload; it hands it on.
    if (const char *preload = getenv("LD_PRELOAD")) {
      setenv(kMeasuredPreloadEnv, preload, 1);
      unsetenv("LD_PRELOAD");
    }
    execv(argv[0], argv.data());
    _exit(126);
  }
  close(result[1]);
  MeasuredRun m;
  ssize_t got;
  do
    got = read(result[0], &m, sizeof m);
  while (got < 0 && errno == EINTR);
  close(result[0]);
  int measurer_status = wait_child(pid);
  if (got != static_cast<ssize_t>(sizeof m)) {
    *error = "cannot run " + measurer + " to measure the program (" +
             (WIFEXITED(measurer_status) ? "exit " + std::to_string(WEXITSTATUS(measurer_status))
                                         : "signal " + std::to_string(WTERMSIG(measurer_status))) +
             ")";
    return false;
  }
  if (m.exec_error) {
    *error = std::string(command[0]) + ": " + exec_failure(command[0], m.exec_error);
    return false;
  }
  out->status = m.status;
  out->wall_s = static_cast<double>(m.wall_ns) / 1e9;
  out->cpu_s = static_cast<double>(m.utime_us + m.stime_us) / 1e6;
  out->maxrss_kib = m.maxrss_kib;
  return true;
}

std::string range(const Summary &s, const char *format) {
  return fmt(format, s.median) + " (" + fmt(format, s.min) + "-" + fmt(format, s.max) + ")";
}

} // namespace

int compare_main(int argc, char **argv) {
  RuleArgs rule_args;
  inspector::WrapperPolicy wrappers;
  std::string allocator = "native", format, export_json, types_file;
  long runs = 10, warmup = 1;
  bool show_output = false;
  std::vector<std::string> program;
  auto app = make_command(
      "compare",
      "Runs COMMAND without rules (A) and with them (B), alternating, on the same\n"
      "allocator through the same interposer, and prints what the rules change: wall\n"
      "and CPU time of each side (median, min-max), the B/A ratio of each round's pair,\n"
      "and each side's peak RSS. Both sides must exit 0; every run reads the same\n"
      "standard input. COMMAND's output goes to /dev/null unless asked for.",
      "Usage: memlayout compare (--rules FILE | --segregate SPEC)... [OPTIONS] [--] COMMAND "
      "[ARGS...]");
  add_rule_options(*app, rule_args);
  app->add_option("-r,--runs", runs, "measured runs of each side")
      ->check(CLI::Range(1L, 100000L).description(""))
      ->type_name("N")
      ->capture_default_str();
  app->add_option("-w,--warmup", warmup, "unmeasured runs of each side first")
      ->check(CLI::Range(0L, 100000L).description(""))
      ->type_name("N")
      ->capture_default_str();
  add_allocator_option(*app, allocator, "native (default) or jemalloc, on both sides");
  add_wrapper_options(*app, wrappers.wrappers, wrappers.not_wrappers);
  app->add_option("--types", types_file, "type map for type= rules (memlayout structs)")
      ->type_name("MAP");
  app->add_flag("--show-output", show_output, "let COMMAND's stdout and stderr through");
  add_format_option(*app, format, {"text", "json"}, "json: schema memlayout.compare/1 on stdout");
  app->add_option("--export-json", export_json, "also write the JSON to FILE")->type_name("FILE");
  if (int rc = parse_command_with_program(*app, argc, argv, program); rc >= 0)
    return rc;
  if (program.empty())
    return usage_error(*app, "no command to compare");
  if (rule_args.empty())
    return usage_error(*app,
                       "no rules: give --rules FILE (see memlayout advise) or --segregate SPEC");
  // Before the runs: --export-json over the program (or a file the rules
  // read) would destroy what it measures.
  if (!export_json.empty()) {
    std::vector<std::string> read = rule_args.files;
    read.push_back(find_in_path(program[0]));
    read.push_back(types_file);
    if (output_is_an_input(export_json, read, "compare"))
      return 2;
  }
  std::vector<char *> command;
  for (auto &arg : program)
    command.push_back(arg.data());
  command.push_back(nullptr);

  LoadedRules rules;
  if (!load_rules(rule_args, &rules))
    return 2;
  if (!expand_match_keys(&rules, {command[0]}, types_file, true))
    return 2;
  RouteSetup routes;
  if (!routes.prepare(rules, {command[0]}, wrappers))
    return 2;
  PreloadEnv a_env, b_env;
  a_env.preload = b_env.preload = preload_for_launch();
  if (a_env.preload.empty())
    return 2;
  a_env.allocator = b_env.allocator = allocator;
  b_env.rules_text = rules.text;
  b_env.route_table = routes.table_path();
  b_env.rule_stats = routes.stats_path();

  // Rounds alternate which side goes first, so a drift in the machine's
  // speed (turbo, a neighbour) does not favour one side.
  Side a, b;
  std::vector<double> wall_ratio, cpu_ratio;
  std::string error;
  SameInput input;
  if (!input.prepare(&error)) {
    std::fprintf(stderr, "memlayout compare: %s\n", error.c_str());
    return 2;
  }
  bool tty = isatty(2);
  for (long round = -warmup; round < runs; ++round) {
    if (round == 0) // the counts of the measured runs only
      if (FILE *f = std::fopen(routes.stats_path().c_str(), "w"))
        std::fclose(f);
    Sample sa, sb;
    bool a_first = ((round + warmup) % 2) == 0;
    for (int k = 0; k < 2; ++k) {
      bool side_a = (k == 0) == a_first;
      if (!run_once(side_a ? a_env : b_env, command, show_output, input, side_a ? &sa : &sb,
                    &error)) {
        std::fprintf(stderr, "memlayout compare: %s\n", error.c_str());
        return 2;
      }
    }
    if (sa.status != sb.status || !WIFEXITED(sa.status) || WEXITSTATUS(sa.status) != 0) {
      std::fprintf(stderr,
                   "memlayout compare: the program did not succeed on both sides (A: %s, B: %s); "
                   "timings of failed runs compare nothing\n",
                   describe_status(sa.status).c_str(), describe_status(sb.status).c_str());
      return 1;
    }
    if (tty)
      std::fprintf(stderr, "\r\033[Kmemlayout compare: %s %ld/%ld", round < 0 ? "warmup" : "run",
                   round < 0 ? round + warmup + 1 : round + 1, round < 0 ? warmup : runs);
    if (round < 0)
      continue;
    a.runs.push_back(sa);
    b.runs.push_back(sb);
    wall_ratio.push_back(sa.wall_s > 0 ? sb.wall_s / sa.wall_s : 1);
    cpu_ratio.push_back(sa.cpu_s > 0 ? sb.cpu_s / sa.cpu_s : 1);
  }
  if (tty)
    std::fprintf(stderr, "\r\033[K");

  size_t processes = 0;
  std::vector<RuleCount> counts =
      read_rule_stats(routes.stats_path(), rules.set->count, &processes);
  Summary aw = summarize(a.wall()), bw = summarize(b.wall()), ac = summarize(a.cpu()),
          bc = summarize(b.cpu()), rw = summarize(wall_ratio), rc = summarize(cpu_ratio);

  auto summary = [](const Summary &x) {
    return Json{{"median", x.median}, {"min", x.min}, {"max", x.max}};
  };
  auto side = [&](const Side &x, const Summary &w, const Summary &c) {
    Json j = {{"wall_s", summary(w)},
              {"cpu_s", summary(c)},
              {"max_rss_kib", static_cast<int64_t>(x.maxrss())}};
    j["runs"] = Json::array();
    for (const auto &r : x.runs)
      j["runs"].push_back({{"wall_s", r.wall_s},
                           {"cpu_s", r.cpu_s},
                           {"max_rss_kib", static_cast<int64_t>(r.maxrss_kib)}});
    return j;
  };
  Json j;
  j["schema"] = "memlayout.compare/1";
  j["command"] = program;
  j["allocator"] = allocator;
  j["runs"] = runs;
  j["warmup"] = warmup;
  j["without_rules"] = side(a, aw, ac);
  j["with_rules"] = side(b, bw, bc);
  j["ratio"] = {{"wall", summary(rw)}, {"cpu", summary(rc)}};
  j["rules"] = Json::array();
  for (unsigned r = 0; r < rules.set->count; ++r) {
    j["rules"].push_back({{"rule", inspector::rule_text(rules.set->rules[r])},
                          {"allocations_per_run", static_cast<double>(counts[r].allocations) /
                                                      static_cast<double>(runs)}});
  }
  std::ostringstream json_text;
  write_json(j, json_text);
  if (!export_json.empty()) {
    CommandOutput out("compare");
    if (!out.open(export_json, rule_args.files))
      return 2;
    out.stream() << json_text.str();
    if (!out.close())
      return 2;
  }
  if (format == "json") {
    CommandOutput out("compare");
    out.open("");
    out.stream() << json_text.str();
    return out.close() ? 0 : 2;
  }

  std::string rules_name = rule_args.files.empty() ? "--segregate" : rule_args.files.front();
  std::printf("memlayout compare: %ld runs of each side, alternating, allocator %s\n", runs,
              allocator.c_str());
  std::printf("  %-28s %-26s %-26s %s\n", "", "wall s, median (min-max)", "CPU s", "peak RSS");
  std::printf("  %-28s %-26s %-26s %s\n", "A  without rules", range(aw, "%.3f").c_str(),
              range(ac, "%.3f").c_str(),
              human_bytes(1024.0 * static_cast<double>(a.maxrss())).c_str());
  std::printf("  %-28s %-26s %-26s %s\n", ("B  with " + rules_name).c_str(),
              range(bw, "%.3f").c_str(), range(bc, "%.3f").c_str(),
              human_bytes(1024.0 * static_cast<double>(b.maxrss())).c_str());
  std::printf("  %-28s %-26s %-26s\n", "B/A, per round", range(rw, "%.3f").c_str(),
              range(rc, "%.3f").c_str());
  double gain = (1 - rw.median) * 100;
  std::printf("\n  %s: B takes %.3fx A's wall time (%s%.1f%%)%s\n",
              rw.max < 1   ? "faster"
              : rw.min > 1 ? "slower"
                           : "within noise",
              rw.median, gain >= 0 ? "-" : "+", gain >= 0 ? gain : -gain,
              rw.max < 1 || rw.min > 1 ? ", every round" : ": rounds disagree, run more (-r N)");
  for (unsigned r = 0; r < rules.set->count; ++r) {
    std::string text = inspector::rule_text(rules.set->rules[r]);
    std::printf("  rule %u %s: %.0f allocations per run%s\n", r + 1, text.c_str(),
                runs ? static_cast<double>(counts[r].allocations) / static_cast<double>(runs) : 0.0,
                counts[r].allocations ? "" : " (routed nothing: the rules change nothing)");
  }
  return stdout_written("compare") ? 0 : 2;
}

} // namespace memlayout::cli
