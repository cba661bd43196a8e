// record-overhead: what recording costs a program, against the program alone
// and against heaptrack, in one run on this machine.
//
//   record-overhead [--runs N] [--json FILE] [--only NAME] [--no-heaptrack]
//
// Every configuration of a workload runs N times, interleaved so that drift
// of a noisy machine hits all alike; the figure is the median wall time and
// its ratio to the program alone. memlayout's trace size is reported per
// recorded event.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Workload {
  std::string name;
  std::string description;
  std::vector<std::string> argv;
  std::string stdin_file; // empty: /dev/null
};

struct Config {
  std::string name;
  std::vector<std::string> prefix; // prepended to the workload's argv
  std::string output;              // trace file to measure, if any
};

struct Sample {
  double seconds;     // wall
  double cpu_seconds; // user + system of the command and its children
  int status;
  std::string err;
};

Sample run(const std::vector<std::string> &argv, const std::string &stdin_file) {
  std::vector<char *> args;
  for (auto &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  char errpath[] = "/tmp/record-overhead-XXXXXX";
  int errfd = mkstemp(errpath);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(stdin_file.empty() ? "/dev/null" : stdin_file.c_str(), O_RDONLY);
    int out = open("/dev/null", O_WRONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(errfd, 2);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto secs = [](const timeval &t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  double cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
  std::ifstream e(errpath);
  std::stringstream ss;
  ss << e.rdbuf();
  close(errfd);
  unlink(errpath);
  return {s, cpu, status, ss.str()};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "memlayout: 20.0 M events ..." -> events; from the record summary line.
double events_from_summary(const std::string &err) {
  auto at = err.rfind("memlayout: ");
  if (at == std::string::npos)
    return 0;
  double v = 0;
  char unit[8] = {};
  if (std::sscanf(err.c_str() + at, "memlayout: %lf %7s events", &v, unit) < 1)
    return 0;
  if (!std::strcmp(unit, "k"))
    v *= 1e3;
  else if (!std::strcmp(unit, "M"))
    v *= 1e6;
  else if (!std::strcmp(unit, "G"))
    v *= 1e9;
  return v;
}

bool on_path(const char *prog) {
  std::string cmd = std::string("command -v ") + prog + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

} // namespace

int usage_error(const std::string &problem) {
  std::fprintf(stderr,
               "record-overhead: %s\n"
               "usage: record-overhead [--runs N] [--json FILE] [--only WORKLOAD] "
               "[--no-heaptrack]\n",
               problem.c_str());
  return 2;
}

int main(int argc, char **argv) {
  int runs = 5;
  std::string json_path, only;
  bool heaptrack = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::printf("record-overhead: what recording costs a program, against the program alone\n"
                  "and heaptrack, in one run on this machine (docs/performance.md).\n\n"
                  "usage: record-overhead [--runs N] [--json FILE] [--only WORKLOAD] "
                  "[--no-heaptrack]\n"
                  "  --runs N        runs of every configuration, interleaved (5); the figures\n"
                  "                  are medians\n"
                  "  --json FILE     the figures as JSON too\n"
                  "  --only NAME     one workload: churn, or sqlite (when sqlite3 is installed)\n"
                  "  --no-heaptrack  leave heaptrack out (it is slow)\n");
      return 0;
    }
    if (a == "--runs" && has_value) {
      std::string v = argv[++i];
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || v[0] < '0' || v[0] > '9' || n < 1 || n > 1000)
        return usage_error("--runs: expected a whole number from 1 to 1000, not '" + v + "'");
      runs = static_cast<int>(n);
    } else if (a == "--json" && has_value) {
      json_path = argv[++i];
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--no-heaptrack") {
      heaptrack = false;
    } else {
      return usage_error(has_value || a.rfind("--", 0) != 0 ? "unknown argument '" + a + "'"
                                                            : a + " needs a value");
    }
  }
  fs::path bin = fs::canonical("/proc/self/exe").parent_path();
  fs::path memlayout = bin / "memlayout";
  fs::path src = MEMLAYOUT_SOURCE_DIR;
  fs::path tmp = fs::temp_directory_path() / ("record-overhead-" + std::to_string(getpid()));
  fs::create_directories(tmp);

  std::vector<Workload> workloads = {
      {"churn",
       "alloc_churn: 2 threads x 5 M free+malloc+memset (20 M events)",
       {(bin / "alloc_churn").string(), "2", "5000000"},
       ""},
  };
  if (on_path("sqlite3"))
    workloads.push_back({"sqlite",
                         "sqlite3: build, index and query a 200k-row table",
                         {"sqlite3", ":memory:"},
                         (src / "bench/workloads/sqlite.sql").string()});
  heaptrack = heaptrack && on_path("heaptrack");
  if (!only.empty() && std::none_of(workloads.begin(), workloads.end(),
                                    [&](const Workload &w) { return w.name == only; })) {
    fs::remove_all(tmp);
    std::string known;
    for (const Workload &w : workloads)
      known += (known.empty() ? "" : ", ") + w.name;
    return usage_error("--only: no workload '" + only + "' (here: " + known + ")");
  }

  std::FILE *json = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
  if (!json_path.empty() && !json) {
    std::fprintf(stderr, "record-overhead: cannot write '%s': %s\n", json_path.c_str(),
                 std::strerror(errno));
    fs::remove_all(tmp);
    return 2;
  }
  if (json)
    std::fprintf(json, "{\"runs\": %d, \"workloads\": [", runs);
  std::printf("%-8s %-20s %9s %7s %9s %7s %10s %8s\n", "workload", "configuration", "wall s",
              "ratio", "cpu s", "ratio", "events", "B/event");
  bool first_workload = true;
  for (auto &w : workloads) {
    if (!only.empty() && w.name != only)
      continue;
    std::string trace = (tmp / (w.name + ".trace")).string();
    std::string trace_je = (tmp / (w.name + "-je.trace")).string();
    std::vector<Config> configs = {
        {"alone", {}, ""},
        {"memlayout native", {memlayout.string(), "record", "-o", trace, "--"}, trace},
        {"memlayout jemalloc",
         {memlayout.string(), "record", "-o", trace_je, "--allocator", "jemalloc", "--"},
         trace_je},
    };
    if (heaptrack)
      configs.push_back(
          {"heaptrack", {"heaptrack", "-o", (tmp / (w.name + ".heaptrack")).string()}, ""});
    std::vector<std::vector<double>> times(configs.size()), cpu(configs.size());
    std::vector<double> events(configs.size(), 0);
    std::vector<uintmax_t> bytes(configs.size(), 0);
    for (int r = 0; r < runs; ++r)
      for (size_t c = 0; c < configs.size(); ++c) {
        std::vector<std::string> cmd = configs[c].prefix;
        cmd.insert(cmd.end(), w.argv.begin(), w.argv.end());
        Sample s = run(cmd, w.stdin_file);
        if (!WIFEXITED(s.status) || WEXITSTATUS(s.status)) {
          std::fprintf(stderr, "record-overhead: %s under %s failed:\n%s\n", w.name.c_str(),
                       configs[c].name.c_str(), s.err.c_str());
          if (json) { // no figures: the file must not pass for a measurement
            std::fclose(json);
            std::remove(json_path.c_str());
          }
          fs::remove_all(tmp);
          return 1;
        }
        times[c].push_back(s.seconds);
        cpu[c].push_back(s.cpu_seconds);
        if (!configs[c].output.empty()) {
          events[c] = events_from_summary(s.err);
          bytes[c] = fs::file_size(configs[c].output);
        }
      }
    double base = median(times[0]), cpu_base = median(cpu[0]);
    if (json)
      std::fprintf(json, "%s{\"name\": \"%s\", \"description\": \"%s\", \"configs\": [",
                   first_workload ? "" : ", ", w.name.c_str(), w.description.c_str());
    first_workload = false;
    for (size_t c = 0; c < configs.size(); ++c) {
      double m = median(times[c]), mc = median(cpu[c]);
      double bpe = events[c] ? static_cast<double>(bytes[c]) / events[c] : 0;
      char bpe_text[16] = "-";
      if (bpe)
        std::snprintf(bpe_text, sizeof bpe_text, "%.2f", bpe);
      std::printf("%-8s %-20s %9.3f %6.2fx %9.3f %6.2fx %10.0f %8s\n", w.name.c_str(),
                  configs[c].name.c_str(), m, m / base, mc, mc / cpu_base, events[c], bpe_text);
      if (json)
        std::fprintf(json,
                     "%s{\"name\": \"%s\", \"median_s\": %.4f, \"ratio\": %.3f, "
                     "\"median_cpu_s\": %.4f, \"cpu_ratio\": %.3f, \"events\": %.0f, "
                     "\"trace_bytes\": %ju, \"bytes_per_event\": %.3f}",
                     c ? ", " : "", configs[c].name.c_str(), m, m / base, mc, mc / cpu_base,
                     events[c], bytes[c], bpe);
    }
    if (json)
      std::fprintf(json, "]}");
  }
  fs::remove_all(tmp);
  if (json) {
    std::fprintf(json, "]}\n");
    if (std::fclose(json) != 0) {
      std::fprintf(stderr, "record-overhead: writing '%s': %s\n", json_path.c_str(),
                   std::strerror(errno));
      return 2;
    }
  }
  return 0;
}
