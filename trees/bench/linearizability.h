// Is a recorded history of map operations linearizable? Every operation is
// kept with the times it was invoked and returned; the history is
// linearizable when some order of the operations that keeps every one that
// returned before another was invoked ahead of it, run one at a time on a
// sequential map, gives each the result it returned.
//
// Operations on different keys commute, so the map is the product of one
// small object per key and a history is linearizable exactly when each
// key's sub-history is (linearizability is local: Herlihy and Wing 1990).
// Each key's history is searched with Wing and Gong's algorithm as improved
// by Lowe (just-in-time linearization, configurations memoised), the
// method of Knossos and Porcupine. A key is present or absent (the harness
// checks values separately): insert returns true only on an absent key,
// remove only on a present one, lookup says which.
#pragma once

#include "map.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace memlayout::trees::bench {

enum class OpKind : uint8_t { kLookup, kInsert, kRemove };

// One completed operation. Times are from one clock all threads read (the
// harness: nanoseconds of CLOCK_MONOTONIC, fenced so that an operation's
// memory accesses fall between its two readings).
struct TimedOp {
  uint64_t invoked = 0, returned = 0;
  Key key = 0;
  OpKind kind = OpKind::kLookup;
  bool result = false; // found / inserted / removed
  uint32_t thread = 0;
};

struct LinearizabilityVerdict {
  enum Outcome { kLinearizable, kNotLinearizable, kUndecided } outcome = kLinearizable;
  // kNotLinearizable: the key, and the operations around the first one no
  // order could place; kUndecided: where the search gave up.
  std::string explanation;
  uint64_t keys = 0, ops = 0; // keys with operations, operations checked
  uint64_t steps = 0;         // search steps, summed over the keys
};

// ops in any order. step_limit bounds the search per key (a violation deep in
// a long history with long overlapping operations can take exponential
// time); the verdict is kUndecided when a key exceeds it.
LinearizabilityVerdict check_linearizable(std::vector<TimedOp> ops,
                                          const std::function<bool(Key)> &initially_present,
                                          uint64_t step_limit = 200'000'000);

const char *op_kind_name(OpKind k);

} // namespace memlayout::trees::bench
