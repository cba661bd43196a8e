// What the regions of an HTM tree count, per thread, and their sums: the
// `htm` object of memlayout-bench's JSON and its text lines.
#pragma once

#include "abort_info.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace memlayout::trees::htm {

struct HtmCounts {
  uint64_t commits = 0;                        // transactions that committed
  uint64_t fallbacks = 0;                      // executions on the fallback lock
  std::array<uint64_t, kAbortCauses> aborts{}; // by AbortCause
  // Conflict aborts the emulator classified (RTM gives no detail):
  uint64_t conflicts_true = 0;  // the two sides touched overlapping bytes
  uint64_t conflicts_false = 0; // same line, disjoint bytes
  // The same conflicts by who and which keys (Eunomia's breakdown):
  uint64_t conflicts_same_key = 0;        // operations on the same key
  uint64_t conflicts_other_key_false = 0; // other keys, disjoint bytes: records sharing a line
  uint64_t conflicts_other_key_true = 0;  // other keys, same bytes: shared metadata
  uint64_t conflicts_lock = 0;            // the fallback lock taken (the lemming effect)
  uint64_t conflicts_plain = 0;           // another plain access (lock bits, advisory locks)
  uint64_t capacity_write = 0, capacity_read = 0;
  uint64_t lock_held = 0;    // explicit aborts: the fallback lock was held at begin
  uint64_t need_records = 0; // explicit aborts: spare records ran out

  uint64_t total_aborts() const {
    uint64_t n = 0;
    for (uint64_t a : aborts)
      n += a;
    return n;
  }
  HtmCounts &operator+=(const HtmCounts &o);
  // Counts one abort (info.detailed: with the emulator's classification).
  void count_abort(const AbortInfo &info);
};

// Conflict and capacity aborts by record kind (the emulator only), with the
// offsets in the record where they struck, most frequent first.
struct KindAborts {
  std::string kind;
  uint64_t conflicts_true = 0, conflicts_false = 0;
  uint64_t capacity_lines = 0; // lines of the kind in the sets that overflowed
  // (offset in the record of the first byte the aborted transaction had
  // touched on the line, false conflicts there)
  std::vector<std::pair<uint32_t, uint64_t>> false_offsets;
  // (offset of the line's start in the record, capacity aborts it took part in)
  std::vector<std::pair<uint32_t, uint64_t>> capacity_offsets;
};

struct HtmReport {
  std::string backend; // "rtm" or "emulate"
  HtmCounts counts;
  std::vector<std::pair<std::string, HtmCounts>> regions; // by region name
  std::vector<KindAborts> kinds;
  std::string l1; // the emulator's L1 model, "64x8"
};

} // namespace memlayout::trees::htm
