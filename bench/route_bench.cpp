// route-bench: what the interposer's rule matching costs per allocation once
// its decisions are cached (budget: 10 ns with 64 rules), for allocations
// whose return address decides (direct calls, inlined constructors) and for
// allocations made through an out-of-line wrapper, whose caller's frame
// decides (an unwind of one frame); and on a cache miss.
//
//   route-bench [--sites N] [--rules N] [--runs N]
//
// Rules come from MEMLAYOUT_RULES and the code labels from a route table, as
// under `memlayout run`: this program's own functions stand in for the
// program's code, labelled as the CLI labels it.
#include "route_table_format.h"
#include "rule_router.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using memlayout::preload::route_for;
using memlayout::preload::UnwindStart;

extern "C" __attribute__((noinline)) void route_bench_matched() {
  asm volatile(".rept 64\n nop\n .endr");
}
extern "C" __attribute__((noinline)) void route_bench_other() {
  asm volatile(".rept 64\n nop\n .endr");
}

namespace {

size_t g_hits;

// An out-of-line allocation wrapper: the rule is decided by its caller.
extern "C" __attribute__((noinline)) void route_bench_wrapper(size_t n) {
  UnwindStart start = MEMLAYOUT_UNWIND_START();
  g_hits += route_for(start, n) != nullptr;
  asm volatile("" ::: "memory");
}
// Its callers: one the rule names, one it does not.
extern "C" __attribute__((noinline)) void route_bench_wrapped_site() {
  route_bench_wrapper(48);
  asm volatile("" ::: "memory");
}
extern "C" __attribute__((noinline)) void route_bench_wrapped_other() {
  route_bench_wrapper(48);
  asm volatile("" ::: "memory");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Symbol {
  uintptr_t lo, hi; // link-time addresses
};

Symbol symbol_of(void *fn) {
  Dl_info info;
  ElfW(Sym) *sym = nullptr;
  if (!dladdr1(fn, &info, reinterpret_cast<void **>(&sym), RTLD_DL_SYMENT) || !sym) {
    std::fprintf(stderr, "route-bench: no symbol for a bench function\n");
    std::exit(2);
  }
  auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  // dli_fbase is the load address; an executable's symbols may be absolute.
  uintptr_t lo = reinterpret_cast<uintptr_t>(fn) - base;
  return {lo, lo + sym->st_size};
}

// The table `memlayout run` would write for this program: the wrapper's code
// decided by its callers, the named sites labelled with rule 0.
std::string write_table() {
  namespace routes = memlayout::routes;
  std::vector<routes::RangeEntry> ranges;
  Symbol m = symbol_of(reinterpret_cast<void *>(&route_bench_matched));
  Symbol w = symbol_of(reinterpret_cast<void *>(&route_bench_wrapper));
  Symbol s = symbol_of(reinterpret_cast<void *>(&route_bench_wrapped_site));
  ranges.push_back({m.lo, m.hi, 1, 0});
  ranges.push_back({w.lo, w.hi, 0, routes::kSkipFrame});
  ranges.push_back({s.lo, s.hi, 1, 0});
  std::sort(ranges.begin(), ranges.end(), [](const auto &a, const auto &b) { return a.lo < b.lo; });
  struct stat st;
  if (stat("/proc/self/exe", &st) != 0)
    std::exit(2);
  routes::TableHeader h{};
  std::memcpy(h.magic, routes::kMagic, sizeof h.magic);
  h.version = routes::kVersion;
  h.modules = 1;
  h.ranges = static_cast<uint32_t>(ranges.size());
  routes::ModuleEntry e{};
  e.dev = st.st_dev;
  e.ino = st.st_ino;
  e.range_count = h.ranges;
  std::snprintf(e.path, sizeof e.path, "/proc/self/exe");
  char path[] = "/tmp/route-bench.XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    std::exit(2);
  bool ok = write(fd, &h, sizeof h) == static_cast<ssize_t>(sizeof h) &&
            write(fd, &e, sizeof e) == static_cast<ssize_t>(sizeof e) &&
            write(fd, ranges.data(), ranges.size() * sizeof ranges[0]) ==
                static_cast<ssize_t>(ranges.size() * sizeof ranges[0]);
  close(fd);
  if (!ok)
    std::exit(2);
  return path;
}

} // namespace

int main(int argc, char **argv) {
  size_t sites = 64, rule_count = 64;
  int runs = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sites"))
      sites = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--rules"))
      rule_count = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--runs"))
      runs = std::atoi(argv[i + 1]);
  }
  if (rule_count < 1 || rule_count > 64 || sites < 2 || runs < 1) {
    std::fprintf(stderr, "usage: route-bench [--sites N>=2] [--rules 1-64] [--runs N>=1]\n");
    return 2;
  }
  // Rule 0 names the matched sites; the rest name functions that do not
  // exist or sizes never asked for, as a long rules file would.
  std::string rules = "function=route_bench_matched,pool=bench\n";
  for (size_t i = 1; i < rule_count; ++i)
    rules += i % 2 ? "function=no_such_function_" + std::to_string(i) + ",pad=64\n"
                   : "size=" + std::to_string(100000 + i) + ",pad=64\n";
  std::string table = write_table();
  setenv("MEMLAYOUT_RULES", rules.c_str(), 1);
  setenv("MEMLAYOUT_ROUTE_TABLE", table.c_str(), 1);
  memlayout::preload::router_init();
  unlink(table.c_str());

  // Half the sites inside the matched function, half in the other.
  auto matched = reinterpret_cast<uintptr_t>(&route_bench_matched);
  auto other = reinterpret_cast<uintptr_t>(&route_bench_other);
  std::vector<uintptr_t> pcs;
  for (size_t i = 0; i < sites; ++i)
    pcs.push_back((i % 2 ? other : matched) + 8 + (i / 2) % 48);
  std::mt19937_64 rng(42);
  std::vector<uintptr_t> order;
  for (int k = 0; k < 4096; ++k)
    order.push_back(pcs[rng() % pcs.size()]);

  const int kRounds = 2000;
  const int kWrapped = 2000000;
  std::vector<double> warm, cold, wrapped;
  bool wrapped_right = true;
  for (int run = 0; run < runs; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    for (int round = 0; round < kRounds; ++round)
      for (uintptr_t pc : order)
        g_hits += route_for({pc, 0, 0}, 48) != nullptr;
    auto t1 = std::chrono::steady_clock::now();
    warm.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                   (double(kRounds) * double(order.size())));
    // A miss: the decision is worked out from the labels.
    auto t2 = std::chrono::steady_clock::now();
    for (uintptr_t pc : pcs)
      g_hits += memlayout::preload::frame_decision_slow(pc, 48) != 0;
    auto t3 = std::chrono::steady_clock::now();
    cold.push_back(std::chrono::duration<double, std::nano>(t3 - t2).count() / double(pcs.size()));
    // Through the wrapper, alternating its two callers (the two calls are
    // part of the figure: ~2 ns).
    size_t before = g_hits;
    auto t4 = std::chrono::steady_clock::now();
    for (int k = 0; k < kWrapped / 2; ++k) {
      route_bench_wrapped_site();
      route_bench_wrapped_other();
    }
    auto t5 = std::chrono::steady_clock::now();
    // Exactly the named caller's allocations are routed.
    wrapped_right = wrapped_right && g_hits - before == kWrapped / 2;
    wrapped.push_back(std::chrono::duration<double, std::nano>(t5 - t4).count() / kWrapped);
  }
  std::printf("rule matching, %zu rules, %zu call sites:\n"
              "  decided by the return address, cached: %.1f ns/allocation (median of %d)\n"
              "  decided by the caller of a wrapper, cached: %.1f ns/allocation (unwind of one "
              "frame included)\n"
              "  uncached (first allocation from a call site): %.0f ns\n",
              rule_count, sites, median(warm), runs, median(wrapped), median(cold));
  if (!g_hits || !wrapped_right) {
    std::printf("%s: broken\n",
                g_hits ? "the wrapper's callers were routed wrong" : "no site matched");
    return 1;
  }
  return 0;
}
