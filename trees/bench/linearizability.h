// Is a recorded history of map operations linearizable? Every operation is
// kept with the times it was invoked and returned; the history is
// linearizable when some order of the operations that keeps every one that
// returned before another was invoked ahead of it, run one at a time on a
// sequential map, gives each the result it returned.
//
// Operations on different keys commute, so the map is the product of one
// small object per key and a history is linearizable exactly when each
// key's sub-history is (linearizability is local: Herlihy and Wing 1990).
// A key is present or absent (the harness checks values separately): insert
// returns true only on an absent key, remove only on a present one, lookup
// says which. For that object the general search (Wing and Gong, Lowe:
// exponential in the operations that overlap, which 64 threads on 16 CPUs
// hammering one key make thousands) is not needed: a greedy construction,
// O(n log n) per key, decides it exactly (linearizability.cpp says why).
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
  enum Outcome { kLinearizable, kNotLinearizable } outcome = kLinearizable;
  // kNotLinearizable: the key, and the operation no order could place with
  // the operations overlapping it.
  std::string explanation;
  uint64_t keys = 0, ops = 0; // keys with operations, operations checked
};

// ops in any order; times with returned >= invoked.
LinearizabilityVerdict check_linearizable(std::vector<TimedOp> ops,
                                          const std::function<bool(Key)> &initially_present);

const char *op_kind_name(OpKind k);

} // namespace memlayout::trees::bench
