// seg-pool-bench: what a segregation pool costs per allocation.
//
// malloc+free pairs in batches (48- and 64-byte objects alternating, the
// study's node sizes): allocate a batch, free it in LIFO or in FIFO order,
// repeat. Through
//   pool (C API)     seg_malloc / seg_free of libmemlayout_seg.so
//   pool (engine)    the engine linked statically, as the interposer uses it
//   jemalloc         jemalloc 5.3's default arena and thread cache (mlje_malloc / mlje_free)
//   glibc            malloc / free
// Prints ns per pair (median of the runs) and the pools' ratio to jemalloc.
// Times are the thread's CPU time, so a busy machine stretches them less
// than wall time; the allocators take turns within each run.
//
//   seg-pool-bench [--runs N] [--batch N] [--pairs N]
// Without --batch: batches of 1, 10, 100 and 1000.
#include "mlje.h"
#include "seg_core.h"

#include <memlayout/seg.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

struct Config {
  int runs = 5;
  std::vector<size_t> batches = {1, 10, 100, 1000};
  size_t pairs = 1'000'000; // per run
};

enum class Order { kLifo, kFifo };

// Keeps the compiler from eliding a malloc/free pair it can see through.
inline void escape(void *p) { asm volatile("" : : "r"(p) : "memory"); }

double thread_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

template <class Alloc, class Free>
double ns_per_pair(size_t pairs, size_t batch, Order order, Alloc alloc, Free release) {
  std::vector<void *> live(batch);
  size_t batches = pairs / batch;
  double start = thread_cpu_ns();
  for (size_t b = 0; b < batches; ++b) {
    for (size_t i = 0; i < batch; ++i) {
      void *p = alloc(i & 1 ? 64 : 48);
      *static_cast<char *>(p) = 1;
      escape(p);
      live[i] = p;
    }
    if (order == Order::kLifo)
      for (size_t i = batch; i-- > 0;)
        release(live[i]);
    else
      for (size_t i = 0; i < batch; ++i)
        release(live[i]);
  }
  return (thread_cpu_ns() - start) / static_cast<double>(batches * batch);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool parse_count(const char *text, size_t *out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || !end || *end || v == 0)
    return false;
  *out = static_cast<size_t>(v);
  return true;
}

int usage(const char *problem) {
  fprintf(stderr,
          "seg-pool-bench: %s\n"
          "usage: seg-pool-bench [--runs N] [--batch N] [--pairs N]\n"
          "  ns of CPU time per malloc+free pair: segregation pool, jemalloc, glibc\n",
          problem);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t value = 0;
    if (arg == "--help" || arg == "-h") {
      usage("segregation pool vs jemalloc vs glibc");
      return 0;
    }
    if (arg != "--runs" && arg != "--batch" && arg != "--pairs")
      return usage(("unknown option " + arg).c_str());
    if (i + 1 >= argc || !parse_count(argv[i + 1], &value))
      return usage(("expected a positive number after " + arg).c_str());
    ++i;
    if (arg == "--runs")
      cfg.runs = static_cast<int>(value);
    else if (arg == "--batch")
      cfg.batches = {value};
    else
      cfg.pairs = value;
  }
  for (size_t batch : cfg.batches)
    if (cfg.pairs < batch)
      return usage("--pairs must be at least the batch size");

  seg_pool *api_pool = seg_pool_create("bench", nullptr);
  memlayout::seg::Pool *engine_pool =
      memlayout::seg::pool_create("bench", memlayout::seg::PoolOptions{});
  if (!api_pool || !engine_pool) {
    fprintf(stderr, "seg-pool-bench: cannot create the pools: %s\n", strerror(errno));
    return 1;
  }
  auto api_alloc = [&](size_t n) { return seg_malloc(api_pool, n); };
  auto api_free = [](void *p) { seg_free(p); };
  auto engine_alloc = [&](size_t n) { return memlayout::seg::pool_alloc(engine_pool, n, 0); };
  auto engine_free = [](void *p) { memlayout::seg::pool_free(p); };
  auto je_alloc = [](size_t n) { return mlje_malloc(n); };
  auto je_free = [](void *p) { mlje_free(p); };
  auto glibc_alloc = [](size_t n) { return malloc(n); };
  auto glibc_free = [](void *p) { free(p); };

  printf("%zu pairs per run (48 and 64 B), median of %d runs, ns of thread CPU time per pair\n",
         cfg.pairs, cfg.runs);
  printf("%6s %-6s %13s %14s %9s %7s %15s %16s\n", "batch", "order", "pool (C API)",
         "pool (engine)", "jemalloc", "glibc", "C API/jemalloc", "engine/jemalloc");
  for (size_t batch : cfg.batches) {
    for (Order order : {Order::kLifo, Order::kFifo}) {
      std::vector<double> api, engine, je, glibc;
      for (int r = 0; r <= cfg.runs; ++r) { // run 0 warms caches, slabs and page tables
        api.push_back(ns_per_pair(cfg.pairs, batch, order, api_alloc, api_free));
        engine.push_back(ns_per_pair(cfg.pairs, batch, order, engine_alloc, engine_free));
        je.push_back(ns_per_pair(cfg.pairs, batch, order, je_alloc, je_free));
        glibc.push_back(ns_per_pair(cfg.pairs, batch, order, glibc_alloc, glibc_free));
      }
      for (auto *v : {&api, &engine, &je, &glibc})
        v->erase(v->begin());
      double a = median(api), e = median(engine), j = median(je), g = median(glibc);
      printf("%6zu %-6s %13.1f %14.1f %9.1f %7.1f %14.2fx %15.2fx\n", batch,
             order == Order::kLifo ? "LIFO" : "FIFO", a, e, j, g, a / j, e / j);
    }
  }
  return 0;
}
