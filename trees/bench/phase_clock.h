// The clock of a run's phases (memlayout-bench's prefill, ycsb-lite's load):
// each worker times its own share, since the main thread may not run again
// until the workers are nearly done, and the phase lasts from the first
// worker's start to the last one's end.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace memlayout::trees::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One worker's share of a phase.
struct PhaseSpan {
  Clock::time_point begin, end;
};

// 0 without workers.
template <class Worker>
double phase_seconds(const std::vector<Worker> &workers, PhaseSpan Worker::*span) {
  if (workers.empty())
    return 0;
  Clock::time_point begin = (workers.front().*span).begin, end = (workers.front().*span).end;
  for (const Worker &w : workers) {
    begin = std::min(begin, (w.*span).begin);
    end = std::max(end, (w.*span).end);
  }
  return seconds_between(begin, end);
}

} // namespace memlayout::trees::bench
