// snapshot-bench: how fast build_snapshot replays a trace and how much memory
// it needs per live object (docs/performance.md).
//
//   snapshot-bench [--events N] [--threads T] [--live L] [--keep FILE] [--repeat R]
//                  [--from FILE] [--point peak|end|both] [--decode-thread on|off]
//
// --from replays a trace written before (--keep) instead of generating one;
// --point replays to one point only (for profiling one of them).
// --decode-thread off decodes the trace on the replay's own thread
// (SnapshotSpec::decode_thread), for the figure on one CPU.
// Writes a synthetic trace like the recorder's (T threads, compressed
// blocks of about 64 KiB, a TSC sample every 16 events, blocks interleaved
// in flush order): each thread allocates until it holds L/T objects, then
// churns (free a random one, allocate) and finally frees them all. Then it
// replays the trace from the file at the peak and at the end and prints
// events/s and the peak memory the replay added per live object (at the
// peak; the end has next to none, so its figure is the memory alone).
#include "heap_snapshot.h"
#include "trace_builder.h"
#include "trace_reader.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

using namespace memlayout;
using namespace memlayout::inspector;
using memlayout::testing::Block;
using memlayout::testing::TraceBuilder;

namespace {

// /proc/self/status field in KiB.
long status_kib(const char *field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line[n] == ':')
      return std::strtol(line.c_str() + n + 1, nullptr, 10);
  return -1;
}

// Resets VmHWM so the next reading is the peak of what follows.
void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

struct ThreadGen {
  uint32_t tid;
  uint64_t base;
  std::vector<uint64_t> live; // slot numbers
  std::vector<uint64_t> free_slots;
  uint64_t next_slot = 0;
  uint64_t tsc;
  uint64_t emitted = 0;
};

uint64_t generate(const std::string &path, uint64_t events, unsigned threads, uint64_t live) {
  TraceBuilder t;
  t.stacks({{1, {0x401000}}, {2, {0x402000}}, {3, {0x403000}}});
  std::mt19937_64 rng(42);
  std::vector<ThreadGen> gens;
  for (unsigned i = 0; i < threads; ++i)
    gens.push_back({1000 + i, 0x7f0000000000ull - (uint64_t{i} << 36), {}, {}, 0, 1000, 0});
  uint64_t per_thread = events / threads;
  uint64_t target = live / threads;
  static constexpr uint64_t kSizes[] = {24, 40, 48, 64, 100, 128};
  uint64_t written = 0;
  // Round-robin: one block per thread in turn, like threads flushing as
  // their buffers fill.
  for (bool more = true; more;) {
    more = false;
    for (ThreadGen &g : gens) {
      if (g.emitted >= per_thread)
        continue;
      more = true;
      Block b(g.tsc, g.tsc, g.tsc);
      uint64_t end = std::min(per_thread, g.emitted + 12000);
      uint64_t drain_from = per_thread - per_thread / 8;
      for (; g.emitted < end; ++g.emitted) {
        if (g.emitted % 16 == 15) {
          uint64_t d = 300 + rng() % 50;
          g.tsc += d;
          b.tick(d);
        }
        bool alloc =
            g.emitted < drain_from ? (g.live.size() < target || rng() % 2 == 0) : g.live.empty();
        if (alloc) {
          uint64_t slot;
          if (!g.free_slots.empty()) {
            slot = g.free_slots.back();
            g.free_slots.pop_back();
          } else {
            slot = g.next_slot++;
          }
          uint64_t size = kSizes[rng() % 6];
          b.alloc(trace::Api::kMalloc, g.base + slot * 128, size, (size + 15) & ~15ull,
                  1 + rng() % 3);
          g.live.push_back(slot);
        } else {
          size_t k = rng() % g.live.size();
          uint64_t slot = g.live[k];
          g.live[k] = g.live.back();
          g.live.pop_back();
          g.free_slots.push_back(slot);
          b.free(trace::Api::kFree, g.base + slot * 128);
        }
      }
      written += b.count;
      t.events(g.tid, b);
      // The builder keeps everything in memory: flush what is done.
      if (t.records.size() > (size_t{256} << 20)) {
        std::fprintf(stderr, "trace too large for the bench's in-memory builder\n");
        std::exit(1);
      }
    }
  }
  t.end(gens[0].tsc + 1000, gens[0].tsc + 1000);
  memlayout::testing::write_file(path, t.bytes());
  return written;
}

// The events its blocks hold by their headers, ticks included: what
// generate() counts, so that rates compare.
uint64_t count_events(const std::string &path) {
  TraceReader r;
  if (!r.open(path)) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    std::exit(1);
  }
  return r.block_event_count();
}

void run(const std::string &path, SnapshotPoint point, const char *what, uint64_t events,
         bool decode_thread) {
  malloc_trim(0);
  reset_peak_rss();
  long base = status_kib("VmRSS");
  auto t0 = std::chrono::steady_clock::now();
  timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  TraceReader r;
  if (!r.open(path)) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    std::exit(1);
  }
  HeapSnapshot s;
  std::string error;
  SnapshotSpec spec;
  spec.point = point;
  spec.decode_thread = decode_thread;
  if (!build_snapshot(r, spec, s, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  // CPU time too: on a shared machine it is the steadier figure.
  double cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) +
               static_cast<double>(c1.tv_nsec - c0.tv_nsec) * 1e-9;
  long peak = status_kib("VmHWM");
  char per_obj[32] = "     -";
  if (!s.objects.empty())
    std::snprintf(per_obj, sizeof per_obj, "%6.1f",
                  static_cast<double>(peak - base) * 1024.0 /
                      static_cast<double>(s.objects.size()));
  std::printf("%-5s %6.2f s  %6.1f M events/s (%5.1f per CPU s)  %9zu live objects  %6.1f MB peak "
              "added  %s B/live object\n",
              what, secs, static_cast<double>(events) / secs / 1e6,
              static_cast<double>(events) / cpu / 1e6, s.objects.size(),
              static_cast<double>(peak - base) / 1024.0, per_obj);
}

} // namespace

int main(int argc, char **argv) {
  uint64_t events = 20'000'000, live = 2'000'000;
  unsigned threads = 2;
  std::string keep, from, point = "both";
  unsigned repeat = 1;
  bool decode_thread = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--events")
      events = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--threads")
      threads = static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--live")
      live = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--keep")
      keep = argv[i + 1];
    else if (a == "--repeat")
      repeat = static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--from")
      from = argv[i + 1];
    else if (a == "--point" &&
             (std::strcmp(argv[i + 1], "peak") == 0 || std::strcmp(argv[i + 1], "end") == 0 ||
              std::strcmp(argv[i + 1], "both") == 0))
      point = argv[i + 1];
    else if (a == "--decode-thread" &&
             (std::strcmp(argv[i + 1], "on") == 0 || std::strcmp(argv[i + 1], "off") == 0))
      decode_thread = std::strcmp(argv[i + 1], "on") == 0;
    else {
      std::fprintf(stderr,
                   "usage: %s [--events N] [--threads T] [--live L] [--keep FILE] [--repeat R]\n"
                   "          [--from FILE] [--point peak|end|both] [--decode-thread on|off]\n",
                   argv[0]);
      return 2;
    }
  }
  if (threads == 0)
    threads = 1;
  std::string path = !from.empty()  ? from
                     : keep.empty() ? "/tmp/snapshot-bench." + std::to_string(::getpid()) + ".trace"
                                    : keep;
  uint64_t n;
  if (from.empty()) {
    n = generate(path, events, threads, live);
    std::printf("trace: %llu events, %u threads, up to %llu live objects\n",
                static_cast<unsigned long long>(n), threads, static_cast<unsigned long long>(live));
  } else {
    n = count_events(path);
    std::printf("trace: %s, %llu events\n", path.c_str(), static_cast<unsigned long long>(n));
  }
  for (unsigned i = 0; i < std::max(repeat, 1u); ++i) {
    if (point != "end")
      run(path, SnapshotPoint::kPeak, "peak", n, decode_thread);
    if (point != "peak")
      run(path, SnapshotPoint::kEnd, "end", n, decode_thread);
  }
  if (keep.empty() && from.empty())
    std::remove(path.c_str());
  return 0;
}
