#include "bench_run.h"

#include "alloc_noise.h"
#include "htm/abort_sink.h"
#include "htm/htm_map.h"
#include "htm/lockstep.h"
#include "key_permutation.h"
#include "linearizability.h"
#include "phase_clock.h"
#include "random.h"
#include "zipf.h"

#include <memlayout/memlayout.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <optional>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <time.h>

namespace memlayout::trees::bench {
namespace {

// Operation times for --linearizable: one clock all CPUs share, read with a
// full fence after an invocation's reading and before a return's, so that
// the operation's loads and stores fall between its two readings.
uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}
uint64_t invocation_time() {
  uint64_t t = monotonic_ns();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return t;
}
uint64_t return_time() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return monotonic_ns();
}

// Operations a --linearizable run records, over all threads (32 bytes
// each); a worker whose share is full stops.
constexpr size_t kHistoryCapacity = size_t{2} << 20;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cpus.push_back(c);
  return cpus;
}

bool pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Draws keys: uniform over [1, K], or Zipf ranks scrambled over [1, K].
class KeyGenerator {
public:
  KeyGenerator(const BenchOptions &o) : range_(o.key_range) {
    if (o.dist.zipf) {
      zipf_.emplace(o.key_range, o.dist.theta);
      if (!o.dist.adjacent)
        scrambler_.emplace(o.key_range);
    }
  }
  Key operator()(Xoshiro256 &rng) const {
    if (zipf_) {
      uint64_t rank = (*zipf_)(rng);
      return static_cast<Key>(scrambler_ ? (*scrambler_)(rank) : rank);
    }
    return static_cast<Key>(1 + rng.below(range_));
  }

private:
  uint64_t range_;
  std::optional<ZipfGenerator> zipf_;
  std::optional<KeyScrambler> scrambler_;
};

// Everything one worker writes during the run, on its own lines.
struct alignas(64) Worker {
  ThreadResult result;
  std::vector<int32_t> delta;   // per key: successful inserts - removes (--check)
  std::vector<TimedOp> history; // every operation (--linearizable)
  bool history_full = false;    // stopped before the run's end: its share is full
  bool prefill_failed = false;
  // The worker's own prefill: timed by the workers, since the main thread
  // may not run again until theirs is nearly done (2 CPUs, 2 workers).
  PhaseSpan prefill;
};

// What the measured loop keeps besides its counters: nothing (the
// benchmark), per-key counts (--check), or counts and every operation with
// its times (--linearizable). One instantiation each.
enum class Bookkeeping { kNone, kCounts, kHistory };

class Run {
public:
  Run(const BenchOptions &o, ConcurrentMap &tree)
      : o_(o), tree_(tree), htm_tree_(dynamic_cast<htm::HtmMap *>(&tree)),
        lockstep_(htm_tree_ && o.config.htm.htm.lockstep &&
                  htm_tree_->htm_report().backend == "emulate"),
        keys_(o), prefill_order_(o.key_range, o.seed ^ 0xabcdef), workers_(o.threads),
        sync_(o.threads + 1) {}

  BenchResult operator()();

private:
  void work(unsigned t, int cpu);
  template <Bookkeeping B> void operate(Worker &w, Xoshiro256 &rng, AllocationNoise *noise);
  void check(BenchResult &r) const;
  void check_history(BenchResult &r) const;

  const BenchOptions &o_;
  ConcurrentMap &tree_;
  htm::HtmMap *htm_tree_; // the HTM trees: put, scan and abort statistics
  bool lockstep_;         // the emulator runs the measured operations in lockstep
  KeyGenerator keys_;
  KeyPermutation prefill_order_;
  PmuSession pmu_;
  std::vector<Worker> workers_;
  std::barrier<> sync_;
  alignas(64) std::atomic<bool> stop_{false};
};

void Run::work(unsigned t, int cpu) {
  Worker &w = workers_[t];
  w.result.thread = t;
  if (cpu >= 0 && pin_self(cpu))
    w.result.cpu = cpu;
  ThreadCounters counters(pmu_);
  Xoshiro256 rng(o_.seed * 0x9e3779b97f4a7c15ULL + t + 1);
  std::optional<AllocationNoise> noise;
  if (o_.noise)
    noise.emplace();

  sync_.arrive_and_wait(); // start the prefill together
  w.prefill.begin = Clock::now();
  uint64_t prefill = o_.prefill_keys();
  for (uint64_t i = t; i < prefill; i += o_.threads) {
    Key k = static_cast<Key>(prefill_order_(i) + 1);
    if (!tree_.insert(k, bench_value_of(k)))
      w.prefill_failed = true;
    if (noise)
      noise->churn(rng);
  }
  w.prefill.end = Clock::now();
  sync_.arrive_and_wait(); // prefill done
  sync_.arrive_and_wait(); // the main thread has marked it: go
  if (o_.duration_s == 0) {
    htm::flush_thread_abort_records();
    return;
  }

  counters.start();
  auto t0 = Clock::now();
  double cpu0 = thread_cpu_seconds();
  {
    std::optional<htm::LockstepScope> lockstep;
    if (lockstep_)
      lockstep.emplace(o_.threads);
    AllocationNoise *n = noise ? &*noise : nullptr;
    if (o_.linearizable)
      operate<Bookkeeping::kHistory>(w, rng, n);
    else if (o_.check)
      operate<Bookkeeping::kCounts>(w, rng, n);
    else
      operate<Bookkeeping::kNone>(w, rng, n);
  }
  w.result.cpu_seconds = thread_cpu_seconds() - cpu0;
  w.result.seconds = seconds_between(t0, Clock::now());
  counters.stop();
  for (int e = 0; e < kPmuEventCount; ++e)
    w.result.counters[e] = counters.count(static_cast<PmuEvent>(e));
  htm::flush_thread_abort_records(); // into the trace, when recorded
}

template <Bookkeeping B> void Run::operate(Worker &w, Xoshiro256 &rng, AllocationNoise *noise) {
  ThreadResult &r = w.result;
  const unsigned lookup_below = o_.mix.lookup, insert_below = o_.mix.lookup + o_.mix.insert;
  const unsigned remove_below = insert_below + o_.mix.remove;
  const unsigned put_below = remove_below + o_.mix.put;
  constexpr bool kCounting = B != Bookkeeping::kNone;
  // The history has no put or scan: check_bench_options refuses
  // --linearizable with a mix that has them.
  constexpr bool kRecording = B == Bookkeeping::kHistory;
  int32_t *delta = w.delta.data();
  size_t history_room = kRecording ? w.history.capacity() : 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (kRecording && w.history.size() == history_room) {
      w.history_full = true;
      break;
    }
    Key k = keys_(rng);
    unsigned op = static_cast<unsigned>(rng.below(100));
    TimedOp timed;
    if (kRecording) {
      timed.key = k;
      timed.thread = r.thread;
      timed.invoked = invocation_time();
    }
    if (op < lookup_below) {
      Value v;
      ++r.lookups;
      bool found = tree_.lookup(k, &v);
      if (kRecording)
        timed.kind = OpKind::kLookup, timed.result = found;
      if (found) {
        ++r.lookup_hits;
        if (kCounting && v != bench_value_of(k))
          ++r.wrong_values;
      }
    } else if (op < insert_below) {
      ++r.inserts;
      bool inserted = tree_.insert(k, bench_value_of(k));
      if (kRecording)
        timed.kind = OpKind::kInsert, timed.result = inserted;
      if (inserted) {
        ++r.inserts_ok;
        if (kCounting)
          ++delta[k];
      }
    } else if (op < remove_below) {
      ++r.removes;
      bool removed = tree_.remove(k);
      if (kRecording)
        timed.kind = OpKind::kRemove, timed.result = removed;
      if (removed) {
        ++r.removes_ok;
        if (kCounting)
          --delta[k];
      }
    } else if (op < put_below) {
      ++r.puts;
      if (htm_tree_->put(k, bench_value_of(k))) {
        ++r.puts_inserted;
        if (kCounting)
          ++delta[k];
      }
    } else {
      ++r.scans;
      r.scanned += htm_tree_->scan(k, o_.scan_length, [&](Key sk, Value sv) {
        if (kCounting && sv != bench_value_of(sk))
          ++r.wrong_values;
      });
    }
    if (kRecording) {
      timed.returned = return_time();
      w.history.push_back(timed);
    }
    if (noise)
      noise->churn(rng);
  }
}

BenchResult Run::operator()() {
  BenchResult r;
  if (o_.check)
    for (Worker &w : workers_)
      w.delta.assign(o_.key_range + 1, 0);
  if (o_.linearizable)
    for (Worker &w : workers_)
      w.history.reserve(std::max<size_t>(1024, kHistoryCapacity / o_.threads));

  std::vector<int> cpus = o_.pin ? allowed_cpus() : std::vector<int>{};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < o_.threads; ++t)
    threads.emplace_back(&Run::work, this, t, cpus.empty() ? -1 : cpus[t % cpus.size()]);

  sync_.arrive_and_wait();
  sync_.arrive_and_wait();
  r.prefill_s = phase_seconds(workers_, &Worker::prefill);
  r.prefilled = o_.prefill_keys();
  memlayout_mark("prefilled"); // memlayout report --at mark:prefilled
  if (htm_tree_ && o_.duration_s > 0)
    htm_tree_->reset_htm_stats(); // the run's transactions, not the prefill's
  auto t0 = Clock::now();
  sync_.arrive_and_wait();
  if (o_.duration_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.duration_s));
    stop_.store(true);
    r.duration_s = seconds_between(t0, Clock::now());
  }
  for (std::thread &t : threads)
    t.join();
  if (o_.duration_s > 0)
    memlayout_mark("measured"); // the tree as the run left it: report --at mark:measured
  if (htm_tree_)
    r.htm = htm_tree_->htm_report();

  for (const Worker &w : workers_) {
    r.per_thread.push_back(w.result);
    r.ops += w.result.ops();
  }
  r.mops = r.duration_s > 0 ? static_cast<double>(r.ops) / r.duration_s / 1e6 : 0;
  for (int e = 0; e < kPmuEventCount; ++e) {
    int64_t total = 0;
    for (const Worker &w : workers_)
      total = (total < 0 || w.result.counters[e] < 0) ? -1 : total + w.result.counters[e];
    r.counters[e] = r.duration_s > 0 ? total : -1;
  }
  r.counters_unavailable = pmu_.unavailable_reason();
  for (RecordAllocator::Kind k = 0; k < tree_.records().kind_count(); ++k)
    r.records.push_back({tree_.records().kind_name(k), tree_.records().record_size(k)});
  if (o_.check)
    check(r);
  return r;
}

void Run::check(BenchResult &r) const {
  auto fail = [&](std::string why) {
    r.check = CheckState::kFailed;
    r.check_error = std::move(why);
  };
  r.check = CheckState::kOk;
  for (const Worker &w : workers_) {
    if (w.prefill_failed)
      return fail("a prefill insert of a key not yet in the tree returned false");
    if (w.result.wrong_values)
      return fail(std::to_string(w.result.wrong_values) +
                  " lookups or scanned pairs had a wrong value");
  }
  // expected[k]: 1 if the key was prefilled, plus every thread's successful
  // inserts minus removes of it; must end 0 or 1.
  std::vector<int32_t> expected(o_.key_range + 1, 0);
  for (uint64_t i = 0; i < o_.prefill_keys(); ++i)
    expected[prefill_order_(i) + 1] = 1;
  for (const Worker &w : workers_)
    for (uint64_t k = 1; k <= o_.key_range; ++k)
      expected[k] += w.delta[k];
  uint64_t expected_count = 0;
  for (uint64_t k = 1; k <= o_.key_range; ++k) {
    if (expected[k] != 0 && expected[k] != 1)
      return fail("key " + std::to_string(k) + ": successful inserts minus removes is " +
                  std::to_string(expected[k]) + ", not 0 or 1");
    expected_count += static_cast<uint64_t>(expected[k]);
  }
  std::string contents_error;
  uint64_t seen = 0;
  Key last = 0;
  tree_.for_each([&](Key k, Value v) {
    if (!contents_error.empty())
      return;
    if (k <= last)
      contents_error =
          "for_each visits key " + std::to_string(k) + " after " + std::to_string(last);
    else if (k < 1 || static_cast<uint64_t>(k) > o_.key_range || expected[k] != 1)
      contents_error = "the tree holds key " + std::to_string(k) + ", which it should not";
    else if (v != bench_value_of(k))
      contents_error = "key " + std::to_string(k) + " has a wrong value";
    last = k;
    ++seen;
  });
  if (!contents_error.empty())
    return fail(contents_error);
  if (seen != expected_count)
    return fail("the tree holds " + std::to_string(seen) + " keys, the operations imply " +
                std::to_string(expected_count));
  if (std::string s = tree_.check_structure(); !s.empty())
    return fail("check_structure: " + s);
  if (o_.linearizable)
    check_history(r);
}

void Run::check_history(BenchResult &r) const {
  // Every worker started from the prefilled keys.
  std::vector<bool> initial(o_.key_range + 1, false);
  for (uint64_t i = 0; i < o_.prefill_keys(); ++i)
    initial[prefill_order_(i) + 1] = true;
  std::vector<TimedOp> all;
  for (const Worker &w : workers_)
    all.insert(all.end(), w.history.begin(), w.history.end());
  r.history_ops = all.size();
  for (const Worker &w : workers_)
    if (w.history_full) {
      ++r.history_full_threads;
      r.history_full_after_s = r.history_full_threads == 1
                                   ? w.result.seconds
                                   : std::min(r.history_full_after_s, w.result.seconds);
    }
  LinearizabilityVerdict v = check_linearizable(std::move(all), [&](Key k) { return initial[k]; });
  if (v.outcome == LinearizabilityVerdict::kLinearizable)
    return;
  r.check = CheckState::kFailed;
  r.check_error = "not linearizable: " + v.explanation;
}

} // namespace

BenchResult run_benchmark(const BenchOptions &options) {
  const TreeInfo *info = find_tree(options.tree);
  std::unique_ptr<ConcurrentMap> tree = info->make(options.config);
  return Run(options, *tree)();
}

} // namespace memlayout::trees::bench
