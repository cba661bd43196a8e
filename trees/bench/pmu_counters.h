// Hardware event counts per worker thread through libpfm4 and
// perf_event_open: LLC misses, dTLB load misses and L2 prefetches, the
// events the study explains its anomalies with. Where the PMU is missing (a
// VM without PMU passthrough, perf_event_paranoid, an unknown CPU) the
// session says why, and the harness reports "unavailable: <why>".
#pragma once

#include <linux/perf_event.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace memlayout::trees::bench {

enum class PmuEvent { kLlcMisses, kDtlbLoadMisses, kL2Prefetches };
inline constexpr int kPmuEventCount = 3;
const char *pmu_event_key(PmuEvent e); // "llc_misses", ... (the JSON keys)

// Process-wide: resolves each event to a perf_event_attr once and checks
// that the kernel accepts it.
class PmuSession {
public:
  PmuSession();
  bool available(PmuEvent e) const;
  bool any_available() const;
  // Why events are missing, one clause per event ("" when none is).
  std::string unavailable_reason() const;
  // A thread could not open an event the probe accepted.
  void disable(PmuEvent e, const std::string &why);

private:
  friend class ThreadCounters;
  mutable std::mutex mutex_;
  std::array<bool, kPmuEventCount> usable_{};
  std::array<perf_event_attr, kPmuEventCount> attr_{};
  std::array<std::string, kPmuEventCount> why_not_;
};

// One thread's counters, opened on that thread (perf counts the thread that
// opened them); start/stop around the measured run.
class ThreadCounters {
public:
  explicit ThreadCounters(PmuSession &session);
  ~ThreadCounters();
  ThreadCounters(const ThreadCounters &) = delete;
  ThreadCounters &operator=(const ThreadCounters &) = delete;

  void start();
  void stop();
  // Count of e during the run, scaled for multiplexing; -1 when not counted.
  int64_t count(PmuEvent e) const { return counts_[static_cast<int>(e)]; }

private:
  std::array<int, kPmuEventCount> fd_;
  std::array<int64_t, kPmuEventCount> counts_;
};

} // namespace memlayout::trees::bench
