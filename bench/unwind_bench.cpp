// unwind-bench: ns per captured stack for each unwind method at depths
// 1/4/8/16, through real call chains: all frames with frame pointers, or
// every other frame from a shared library built without them. Rows:
//   fp, dwarf   the methods as the recorder calls them
//   cfi         as called: a repeated stack hits the per-thread stack cache
//   cfi rules   the walk every new stack takes: cached rules, no stack cache
//   cfi cold    rule cache flushed before each stack (includes first touches
//               of the cache's pages): the one-time cost per return address
//
//   unwind-bench [--runs N]   (prints the median of N runs, default 7)
#include "unwind.h"
#include "unwind_bench_chain.h"
#include "unwind_cfi.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using memlayout::preload::unwind;
using memlayout::preload::unwind_method_name;
using memlayout::preload::UnwindMethod;
using memlayout::preload::UnwindStart;

namespace {

enum Variant { kWarm, kRulesOnly, kCold };

size_t capture(UnwindMethod m, Variant v, const UnwindStart &start, uintptr_t *frames,
               size_t depth) {
  if (v == kRulesOnly)
    return memlayout::preload::cfi::unwind_rules_only(start, frames, depth);
  return unwind(m, start, frames, depth);
}

struct Job {
  Variant variant;
  UnwindMethod method;
  size_t depth;
  int iterations;
  double ns_per_stack;
  size_t frames;
  size_t correct; // leading frames that agree with libgcc's walk
};
Job *g_job;
volatile uintptr_t g_sink;

double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// The entry point, compiled with frame pointers like an interposed malloc.
[[gnu::noipa]] int measure(BenchChain *) {
  const UnwindStart start = MEMLAYOUT_UNWIND_START();
  Job &j = *g_job;
  uintptr_t frames[64];
  size_t n = 0;
  double total = 0;
  if (j.variant == kCold) { // rule cache flushed before every stack
    for (int i = 0; i < j.iterations; ++i) {
      memlayout::preload::unwind_modules_changed();
      double t0 = now_ns();
      n = capture(j.method, kRulesOnly, start, frames, j.depth);
      total += now_ns() - t0;
      g_sink = g_sink + frames[n - 1];
    }
  } else {
    n = capture(j.method, j.variant, start, frames, j.depth); // warm up
    double t0 = now_ns();
    for (int i = 0; i < j.iterations; ++i) {
      n = capture(j.method, j.variant, start, frames, j.depth);
      g_sink = g_sink + frames[n - 1];
    }
    total = now_ns() - t0;
  }
  j.ns_per_stack = total / j.iterations;
  j.frames = n;
  uintptr_t ref[64];
  size_t ref_n = unwind(UnwindMethod::kDwarf, start, ref, j.depth);
  j.correct = 0;
  while (j.correct < n && j.correct < ref_n && frames[j.correct] == ref[j.correct])
    ++j.correct;
  return 0;
}

[[gnu::noipa]] int exe_step(BenchChain *c, int d) {
  int r;
  if (d <= 1)
    r = c->at_bottom(c);
  else if (c->mixed && d % 2 == 0)
    r = unwind_bench_lib_step(c, d - 1);
  else
    r = exe_step(c, d - 1);
  asm volatile("" ::: "memory");
  return r + 1;
}

// Runs the job at the bottom of a chain whose `depth` innermost frames are
// the chain's own (frames[0] is the innermost exe_step).
void run(Job *job, bool mixed) {
  g_job = job;
  BenchChain c{exe_step, measure, mixed};
  exe_step(&c, static_cast<int>(job->depth));
}

} // namespace

int main(int argc, char **argv) {
  int runs = 7;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
  }
  const size_t depths[] = {1, 4, 8, 16};
  printf("median of %d runs; ns per captured stack (frames captured/frames right)\n", runs);
  printf("%-6s %-12s", "chain", "method");
  for (size_t d : depths)
    printf(" %16s", ("depth " + std::to_string(d)).c_str());
  printf("\n");
  for (bool mixed : {false, true}) {
    for (int row = 0; row < 5; ++row) {
      static constexpr struct {
        UnwindMethod method;
        Variant variant;
        const char *name;
      } kRows[] = {{UnwindMethod::kFramePointer, kWarm, "fp"},
                   {UnwindMethod::kCfi, kWarm, "cfi"},
                   {UnwindMethod::kCfi, kRulesOnly, "cfi rules"},
                   {UnwindMethod::kCfi, kCold, "cfi cold"},
                   {UnwindMethod::kDwarf, kWarm, "dwarf"}};
      const UnwindMethod m = kRows[row].method;
      const Variant variant = kRows[row].variant;
      printf("%-6s %-12s", mixed ? "mixed" : "fp", kRows[row].name);
      for (size_t d : depths) {
        std::vector<double> samples;
        Job job{};
        for (int r = 0; r < runs; ++r) {
          int iterations = m == UnwindMethod::kDwarf ? 20000 : variant == kCold ? 200 : 1000000;
          job = Job{variant, m, d, iterations, 0, 0, 0};
          run(&job, mixed);
          samples.push_back(job.ns_per_stack);
        }
        std::sort(samples.begin(), samples.end());
        char cell[32];
        snprintf(cell, sizeof cell, "%.1f (%zu/%zu)", samples[samples.size() / 2], job.frames,
                 job.correct);
        printf(" %16s", cell);
      }
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
