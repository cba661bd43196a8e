// The stress regime every registered tree goes through (docs/testing.md):
// memlayout-bench runs with --check (per-key accounting, values, contents,
// check_structure) or --linearizable (and every operation's result against
// its times), at two and four times as many threads as the machine has
// CPUs, so that threads are preempted in the middle of operations; over
// tiny key ranges (every thread on the same few keys) and large ones with a
// parallel prefill, every operation mix, uniform and Zipf keys, both layouts,
// both allocation policies, with and without allocation noise, a new seed
// each run.
//
// One test per tree, registered from the tree registry, so a tree added to
// it is stressed without another line. Each runs the matrix below at least
// once and then keeps going with new seeds until its time budget is spent:
// MEMLAYOUT_STRESS_SECONDS (default 3) per tree; MEMLAYOUT_STRESS_SEED sets
// the first seed (default 1); MEMLAYOUT_BENCH, the memlayout-bench to run
// (default: the one built with this test). scripts/soak_trees.sh runs it for
// hours. Each
// run is its own process, so a crash or a hang (killed after 60 s) fails
// the test with the command line that reproduces it.
#include "map.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace memlayout::trees;

namespace {

// One configuration of the matrix. Threads, layout, policy and noise vary
// with the run number on top of it.
struct Workload {
  const char *key_range;
  const char *prefill;
  const char *ops;
  const char *duration; // "0": the parallel prefill only
  const char *dist;
  bool linearizable;
};

constexpr Workload kWorkloads[] = {
    // Issue 12's failing command: 20 000 keys, half of them inserted by all
    // threads at once.
    {"20000", "0.5", "80/10/10", "0", "uniform", false},
    // Every thread on 8 keys: the same nodes inserted and removed over and over.
    {"8", "0.5", "0/50/50", "0.02", "uniform", true},
    {"64", "0.5", "40/30/30", "0.02", "uniform", true},
    {"256", "0.5", "80/10/10", "0.02", "uniform", true},
    {"4096", "0.5", "20/40/40", "0.02", "zipf:0.99", true},
    // Growing from empty and draining a full tree.
    {"1024", "0", "10/90/0", "0.02", "uniform", true},
    {"1024", "1.0", "10/0/90", "0.02", "uniform", true},
    // Lookups only, over a tree built by all threads.
    {"16384", "0.5", "100/0/0", "0.02", "uniform", true},
    // Large: a deep tree, a quarter of a million keys inserted in parallel.
    {"65536", "0.5", "50/25/25", "0.05", "uniform", false},
    {"262144", "0.5", "80/10/10", "0", "uniform", false},
};
constexpr size_t kWorkloadCount = std::size(kWorkloads);
// Every workload at both thread counts in both layouts: the minimum a test
// runs, whatever its budget.
constexpr unsigned kMinimumRuns = kWorkloadCount * 4;
constexpr int kRunTimeoutS = 60;

unsigned cpus() { return std::max(1u, std::thread::hardware_concurrency()); }

uint64_t env_or(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (*end)
    FAIL(name << " must be a whole number, not '" << v << "'");
  return n;
}

// The command line of run number `run` of the tree's matrix.
std::vector<std::string> bench_args(std::string_view tree, uint64_t run, uint64_t seed) {
  const Workload &w = kWorkloads[run % kWorkloadCount];
  uint64_t round = run / kWorkloadCount;
  unsigned threads = std::min(64u, cpus() * (round % 2 ? 4 : 2));
  const char *bench = std::getenv("MEMLAYOUT_BENCH");
  std::vector<std::string> args = {bench && *bench ? bench : MLT_BENCH,
                                   "--tree",
                                   std::string(tree),
                                   "--threads",
                                   std::to_string(threads),
                                   "--key-range",
                                   w.key_range,
                                   "--prefill",
                                   w.prefill,
                                   "--ops",
                                   w.ops,
                                   "--duration",
                                   w.duration,
                                   "--dist",
                                   w.dist,
                                   "--layout",
                                   (round / 2) % 2 ? "fixed" : "baseline",
                                   "--alloc",
                                   (round / 4) % 2 ? "segregated" : "malloc",
                                   "--seed",
                                   std::to_string(seed),
                                   w.linearizable ? "--linearizable" : "--check",
                                   "--format",
                                   "json"};
  if ((round / 8) % 2)
    args.push_back("--noise");
  return args;
}

std::string command_line(const std::vector<std::string> &args) {
  std::string s = "memlayout-bench";
  for (size_t i = 1; i < args.size(); ++i)
    s += " " + args[i];
  return s;
}

struct Finished {
  bool exited = false, timed_out = false;
  int status = 0;     // exit status, or the signal that ended it
  std::string output; // stdout and stderr together
};

// Runs args[0] with args, output captured, killed after timeout_s.
Finished run_process(const std::vector<std::string> &args, int timeout_s) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(out[0]);
    close(out[1]);
    std::vector<char *> argv;
    for (const std::string &a : args)
      argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  Finished f;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      f.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0)
      continue;
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0)
      break;
    f.output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int raw = 0;
  waitpid(pid, &raw, 0);
  f.exited = WIFEXITED(raw);
  f.status = f.exited ? WEXITSTATUS(raw) : WTERMSIG(raw);
  return f;
}

struct Tally {
  uint64_t runs = 0, operations = 0, checked_histories = 0;
  std::vector<std::string> failures;
};

// The report in a run's output: its last line, a JSON object. Empty and
// *why set when there is none.
llvm::json::Object json_report(const std::string &output, std::string *why) {
  std::string_view text = output;
  while (text.ends_with('\n'))
    text.remove_suffix(1);
  text = text.substr(text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1);
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) {
    *why = "no JSON report (" + llvm::toString(v.takeError()) + ")";
    return {};
  }
  if (llvm::json::Object *o = v->getAsObject())
    return std::move(*o);
  *why = "the report is not a JSON object";
  return {};
}

// Runs one matrix entry and adds it to the tally: a failure is anything
// but exit 0 with a JSON report whose check is "ok".
void run_once(std::string_view tree, uint64_t run, uint64_t seed, Tally &t) {
  std::vector<std::string> args = bench_args(tree, run, seed);
  Finished f = run_process(args, kRunTimeoutS);
  ++t.runs;
  std::string why;
  llvm::json::Object report;
  if (f.timed_out)
    why = "did not finish within " + std::to_string(kRunTimeoutS) + " s";
  else if (!f.exited)
    why = "killed by signal " + std::to_string(f.status);
  else
    report = json_report(f.output, &why);
  if (why.empty()) {
    auto check = report.getString("check");
    auto error = report.getString("check_error");
    bool linearizable = std::find(args.begin(), args.end(), "--linearizable") != args.end();
    auto history = report.getInteger("history_ops");
    if (f.status != 0 || !check || *check != "ok")
      why = "exit status " + std::to_string(f.status) + ", check " +
            (check ? check->str() : "missing") + (error ? ": " + error->str() : "");
    else if (linearizable && !history)
      why = "--linearizable run reported no history_ops";
    t.operations += static_cast<uint64_t>(report.getInteger("ops").getValueOr(0)) +
                    static_cast<uint64_t>(report.getInteger("prefill").getValueOr(0));
    t.checked_histories += static_cast<uint64_t>(history.getValueOr(0));
  }
  if (!why.empty()) {
    std::string tail = f.output.size() > 2000 ? f.output.substr(f.output.size() - 2000) : f.output;
    t.failures.push_back(command_line(args) + "\n  " + why + "\n  output: " + tail);
  }
}

void stress(std::string_view tree) {
  uint64_t budget_s = env_or("MEMLAYOUT_STRESS_SECONDS", 3);
  uint64_t first_seed = env_or("MEMLAYOUT_STRESS_SEED", 1);
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Tally t;
  for (uint64_t run = 0; run < kMinimumRuns || elapsed() < static_cast<double>(budget_s); ++run)
    run_once(tree, run, first_seed + run, t);
  // The line scripts/soak_trees.sh adds up.
  std::cout << "stress " << tree << ": " << t.runs << " runs, seeds " << first_seed << ".."
            << first_seed + t.runs - 1 << ", " << t.operations << " operations, "
            << t.checked_histories << " checked for linearizability, " << t.failures.size()
            << " failed, " << static_cast<int>(elapsed()) << " s, " << cpus() << " CPUs"
            << std::endl;
  for (const std::string &f : t.failures)
    FAIL_CHECK(f);
  CHECK(t.runs >= kMinimumRuns);
  CHECK(t.operations > 0);
}

class StressTest : public Catch::ITestInvoker {
public:
  explicit StressTest(std::string_view tree) : tree_(tree) {}
  void invoke() const override { stress(tree_); }

private:
  std::string_view tree_;
};

bool register_stress_tests() {
  static std::vector<std::unique_ptr<Catch::AutoReg>> registrars;
  for (const TreeInfo &tree : all_trees()) {
    std::string name = "stress " + std::string(tree.name) +
                       ": oversubscribed memlayout-bench runs, checked and linearizable";
    std::string tags = "[stress][" + std::string(tree.name) + "]";
    registrars.push_back(std::make_unique<Catch::AutoReg>(
        new StressTest(tree.name), Catch::SourceLineInfo(__FILE__, __LINE__), Catch::StringRef(),
        Catch::NameAndTags{name, tags}));
  }
  return true;
}
const bool registered = register_stress_tests();

} // namespace

TEST_CASE("stress: the matrix oversubscribes the CPUs and covers both layouts", "[stress]") {
  CHECK(registered);
  bool two = false, four = false, fixed = false, baseline = false, lin = false,
       prefill_only = false;
  for (uint64_t run = 0; run < kMinimumRuns; ++run) {
    std::vector<std::string> a = bench_args("occ-avl", run, run + 1);
    auto value = [&](const char *opt) { return *(std::find(a.begin(), a.end(), opt) + 1); };
    unsigned threads = static_cast<unsigned>(std::stoul(value("--threads")));
    two |= threads == std::min(64u, 2 * cpus());
    four |= threads == std::min(64u, 4 * cpus());
    fixed |= value("--layout") == "fixed";
    baseline |= value("--layout") == "baseline";
    lin |= std::find(a.begin(), a.end(), "--linearizable") != a.end();
    prefill_only |= value("--duration") == "0";
  }
  CHECK(two);
  CHECK(four);
  CHECK(fixed);
  CHECK(baseline);
  CHECK(lin);
  CHECK(prefill_only);
}
