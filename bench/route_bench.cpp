// route-bench: what the interposer's rule matching costs per allocation once
// its decision for a call site is cached (budget: 10 ns), and on a cache miss
// (the first allocation from a call site).
//
//   route-bench [--sites N] [--rules N] [--runs N]
//
// Rules come from MEMLAYOUT_RULES as under `memlayout run`; the call sites
// are return addresses inside this program's own functions, some matched by
// a function rule and some not, looked up in a shuffled order.
#include "rule_router.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using memlayout::preload::route_for;

extern "C" __attribute__((noinline)) void route_bench_matched() { asm volatile(".rept 64\n nop\n .endr"); }
extern "C" __attribute__((noinline)) void route_bench_other() { asm volatile(".rept 64\n nop\n .endr"); }

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  size_t sites = 64, extra_rules = 7;
  int runs = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sites"))
      sites = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--rules"))
      extra_rules = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--runs"))
      runs = std::atoi(argv[i + 1]);
  }
  std::string rules = "function=route_bench_matched,pool=bench\n";
  for (size_t i = 0; i < extra_rules; ++i)
    rules += "function=no_such_function_" + std::to_string(i) + ",pad=64\nsize=" +
             std::to_string(100000 + i) + ",pad=64\n";
  setenv("MEMLAYOUT_RULES", rules.c_str(), 1);
  memlayout::preload::router_init();

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
  std::vector<double> warm, cold;
  size_t hits = 0;
  for (int run = 0; run < runs; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    for (int round = 0; round < kRounds; ++round)
      for (uintptr_t pc : order)
        hits += route_for({pc, 0, 0}, 48) != nullptr;
    auto t1 = std::chrono::steady_clock::now();
    warm.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                   (double(kRounds) * double(order.size())));
    // A miss: the decision is worked out from the function ranges.
    auto t2 = std::chrono::steady_clock::now();
    for (uintptr_t pc : pcs)
      hits += memlayout::preload::frame_decision_slow(pc, 48) != 0;
    auto t3 = std::chrono::steady_clock::now();
    cold.push_back(std::chrono::duration<double, std::nano>(t3 - t2).count() / double(pcs.size()));
  }
  std::printf("rule matching, %zu rules, %zu call sites: cached %.1f ns/allocation (median of "
              "%d), uncached %.0f ns%s\n",
              1 + 2 * extra_rules, sites, median(warm), runs, median(cold),
              hits ? "" : " (no site matched: broken)");
  return hits ? 0 : 1;
}
