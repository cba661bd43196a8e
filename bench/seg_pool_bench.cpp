// seg-pool-bench: what a segregation pool costs per allocation.
//
// malloc+free pairs in batches (48- and 64-byte objects alternating, the
// study's node sizes): allocate a batch, free it in LIFO or in FIFO order,
// repeat. Then across threads: one thread allocates batches of 1000, another
// frees them. Through
//   pool (C API)     seg_malloc / seg_free of libmemlayout_seg.so
//   pool (engine)    the engine linked statically, as the interposer uses it
//   aligned pool     the engine with a pool aligned to 64 bytes (align=64: the
//                    fix memlayout report proposes for straddling objects)
//   jemalloc         jemalloc 5.3's default arena and thread cache (mlje_malloc / mlje_free)
//   mimalloc         mi_malloc / mi_free of Debian's libmimalloc.so.2, when installed
//                    (loaded with RTLD_LOCAL, so it does not become the process's malloc)
//   glibc            malloc / free
// Prints ns per pair (median of the runs) and the pools' ratio to jemalloc.
// Times are threads' CPU time, so a busy machine stretches them less than
// wall time. The allocators take turns within each run.
//
//   seg-pool-bench [--runs N] [--batch N] [--pairs N] [--no-threads]
// Without --batch: batches of 1, 10, 100 and 1000.
#include "mlje.h"
#include "seg_core.h"

#include <memlayout/seg.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Config {
  int runs = 5;
  std::vector<size_t> batches = {1, 10, 100, 1000};
  size_t pairs = 1'000'000; // per run
  bool threads = true;
};

// mimalloc's entry points, when its shared library is there.
struct Mimalloc {
  void *(*malloc)(size_t) = nullptr;
  void (*free)(void *) = nullptr;
  bool load() {
    void *lib = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return false;
    malloc = reinterpret_cast<void *(*)(size_t)>(dlsym(lib, "mi_malloc"));
    free = reinterpret_cast<void (*)(void *)>(dlsym(lib, "mi_free"));
    return malloc && free;
  }
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

// One thread allocates batches of 1000 and hands each over to another, which
// frees them: every free is a free from another thread, and the allocating
// thread gets its objects back only through them. ns of CPU time of both
// threads per pair (waiting sleeps, so it costs none).
template <class Alloc, class Free>
double ns_per_pair_across(size_t pairs, Alloc alloc, Free release) {
  constexpr size_t kBatch = 1000, kInFlight = 4;
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::vector<void *>> queue;
  bool done = false;
  double producer_ns = 0;
  std::thread producer([&] {
    double start = thread_cpu_ns();
    for (size_t made = 0; made < pairs;) {
      std::vector<void *> batch;
      for (size_t i = 0; i < kBatch && made < pairs; ++i, ++made) {
        void *p = alloc(made & 1 ? 64 : 48);
        *static_cast<char *>(p) = 1;
        batch.push_back(p);
      }
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return queue.size() < kInFlight; });
      queue.push_back(std::move(batch));
      cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(m);
    done = true;
    producer_ns = thread_cpu_ns() - start;
    cv.notify_all();
  });
  double start = thread_cpu_ns();
  for (;;) {
    std::vector<void *> batch;
    {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return !queue.empty() || done; });
      if (queue.empty())
        break;
      batch = std::move(queue.front());
      queue.erase(queue.begin());
      cv.notify_all();
    }
    for (void *p : batch)
      release(p);
  }
  double consumer_ns = thread_cpu_ns() - start;
  producer.join();
  return (producer_ns + consumer_ns) / static_cast<double>(pairs);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool parse_count(const char *text, size_t *out) {
  // Digits only: strtoull takes "-1" and wraps it to 2^64 - 1.
  if (*text < '0' || *text > '9')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || !end || *end || v == 0 || v > (1ull << 40))
    return false;
  *out = static_cast<size_t>(v);
  return true;
}

int usage(const char *problem) {
  fprintf(stderr,
          "seg-pool-bench: %s\n"
          "usage: seg-pool-bench [--runs N] [--batch N] [--pairs N] [--no-threads]\n"
          "  ns per malloc+free pair: segregation pool, jemalloc, mimalloc, glibc\n",
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
      usage("segregation pool vs jemalloc vs mimalloc vs glibc");
      return 0;
    }
    if (arg == "--no-threads") {
      cfg.threads = false;
      continue;
    }
    if (arg != "--runs" && arg != "--batch" && arg != "--pairs")
      return usage(("unknown option " + arg).c_str());
    if (i + 1 >= argc || !parse_count(argv[i + 1], &value))
      return usage(("expected a positive whole number (at most 2^40) after " + arg).c_str());
    ++i;
    if (arg == "--runs" && value > 1000)
      return usage("--runs: at most 1000");
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
  memlayout::seg::PoolOptions aligned_options;
  aligned_options.alignment = 64;
  memlayout::seg::Pool *aligned_pool = memlayout::seg::pool_create("bench-64", aligned_options);
  if (!api_pool || !engine_pool || !aligned_pool) {
    fprintf(stderr, "seg-pool-bench: cannot create the pools: %s\n", strerror(errno));
    return 1;
  }
  auto api_alloc = [&](size_t n) { return seg_malloc(api_pool, n); };
  auto api_free = [](void *p) { seg_free(p); };
  auto engine_alloc = [&](size_t n) { return memlayout::seg::pool_alloc(engine_pool, n, 0); };
  auto engine_free = [](void *p) { memlayout::seg::pool_free(p); };
  auto aligned_pool_alloc = [&](size_t n) {
    return memlayout::seg::pool_alloc(aligned_pool, n, 0);
  };
  auto je_alloc = [](size_t n) { return mlje_malloc(n); };
  auto je_free = [](void *p) { mlje_free(p); };
  auto glibc_alloc = [](size_t n) { return malloc(n); };
  auto glibc_free = [](void *p) { free(p); };
  Mimalloc mi;
  bool have_mi = mi.load();
  auto mi_alloc = [&](size_t n) { return mi.malloc(n); };
  auto mi_free = [&](void *p) { mi.free(p); };

  // A column per allocator: ns per pair, median of the runs ("-" when absent).
  struct Row {
    std::vector<double> api, engine, aligned, je, mi, glibc;
  };
  auto print_row = [&](const char *batch, const char *order, Row &r) {
    for (auto *v : {&r.api, &r.engine, &r.aligned, &r.je, &r.mi, &r.glibc})
      if (!v->empty())
        v->erase(v->begin()); // run 0 warms caches, pages and page tables
    double a = median(r.api), e = median(r.engine), al = median(r.aligned), j = median(r.je),
           g = median(r.glibc);
    char mi_text[16] = "-";
    if (!r.mi.empty())
      snprintf(mi_text, sizeof mi_text, "%.1f", median(r.mi));
    printf("%6s %-6s %13.1f %14.1f %13.1f %9.1f %9s %7.1f %15.2fx %16.2fx %17.2fx\n", batch, order,
           a, e, al, j, mi_text, g, a / j, e / j, al / j);
  };

  printf("%zu pairs per run (48 and 64 B), median of %d runs, ns per pair\n", cfg.pairs, cfg.runs);
  printf("%6s %-6s %13s %14s %13s %9s %9s %7s %16s %17s %18s\n", "batch", "order", "pool (C API)",
         "pool (engine)", "aligned pool", "jemalloc", "mimalloc", "glibc", "C API/jemalloc",
         "engine/jemalloc", "aligned/jemalloc");
  for (size_t batch : cfg.batches) {
    for (Order order : {Order::kLifo, Order::kFifo}) {
      Row row;
      for (int r = 0; r <= cfg.runs; ++r) {
        row.api.push_back(ns_per_pair(cfg.pairs, batch, order, api_alloc, api_free));
        row.engine.push_back(ns_per_pair(cfg.pairs, batch, order, engine_alloc, engine_free));
        row.aligned.push_back(
            ns_per_pair(cfg.pairs, batch, order, aligned_pool_alloc, engine_free));
        row.je.push_back(ns_per_pair(cfg.pairs, batch, order, je_alloc, je_free));
        if (have_mi)
          row.mi.push_back(ns_per_pair(cfg.pairs, batch, order, mi_alloc, mi_free));
        row.glibc.push_back(ns_per_pair(cfg.pairs, batch, order, glibc_alloc, glibc_free));
      }
      print_row(std::to_string(batch).c_str(), order == Order::kLifo ? "LIFO" : "FIFO", row);
    }
  }
  if (cfg.threads) {
    Row row;
    for (int r = 0; r <= cfg.runs; ++r) {
      row.api.push_back(ns_per_pair_across(cfg.pairs, api_alloc, api_free));
      row.engine.push_back(ns_per_pair_across(cfg.pairs, engine_alloc, engine_free));
      row.aligned.push_back(ns_per_pair_across(cfg.pairs, aligned_pool_alloc, engine_free));
      row.je.push_back(ns_per_pair_across(cfg.pairs, je_alloc, je_free));
      if (have_mi)
        row.mi.push_back(ns_per_pair_across(cfg.pairs, mi_alloc, mi_free));
      row.glibc.push_back(ns_per_pair_across(cfg.pairs, glibc_alloc, glibc_free));
    }
    print_row("x-thr", "1000", row);
  }
  return 0;
}
