// What each free in a dump freed (the jsonl contract: every free has a size
// and a usable size), where the dump prints events in file order.
//
// File order puts each thread's blocks where the thread flushed them, so a
// free of another thread's allocation can come before that allocation, or
// after another allocation of the same address: pairing frees with
// allocations by address in file order names the wrong object or none.
// The threads' own order is kept in the file, so a thread's frees of its own
// allocations pair right within that thread. Frees of other threads'
// allocations are paired as `memlayout report`'s replay pairs them, merging
// the threads in time order (heap_snapshot.h), in a pass before the dump.
#pragma once

#include "addr_table.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace memlayout::cli {

struct FreedObject {
  uint64_t size, usable;
};

// Address -> sizes, one word per entry where size < 2^40 and usable - size
// < 2^24, the rare others spelt out beside. A key may be put more than
// once before it is taken: taken first in, first out.
class SizeTable {
public:
  void put(uint64_t key, FreedObject s);
  void replace(uint64_t key, FreedObject s); // an entry of key is dropped
  std::optional<FreedObject> take(uint64_t key);

private:
  static uint64_t pack(FreedObject s);
  std::optional<FreedObject> unpack(uint64_t key, uint64_t v);
  static constexpr uint64_t kWide = ~uint64_t{0};
  inspector::AddrTable table_;
  std::unordered_map<uint64_t, std::vector<FreedObject>> wide_; // kWide entries, in order
  std::unordered_map<uint64_t, std::vector<uint64_t>> queued_;  // later puts of a key held
};

class FreedSizes {
public:
  // Replays the trace at `path` in time order to find the frees of other
  // threads' allocations. False, with `error` set, when it cannot be
  // replayed: only frees of a thread's own allocations are then known.
  bool pair_across_threads(const std::string &path, std::string &error);

  // The events in file order, each with its thread (a free with the stamp
  // it carries: allocations are known by their order in their thread).
  void allocated(uint32_t tid, uint64_t ptr, FreedObject sizes);
  std::optional<FreedObject> freed(uint32_t tid, uint64_t ptr, uint64_t tsc);
  void reallocated(uint32_t tid, uint64_t old_ptr, uint64_t ptr, FreedObject sizes);

private:
  // (thread, address, n) as one table key: a free by its stamp, an
  // allocation by n, its count among the thread's allocations of the
  // address (one stamp may cover several events: sampled timestamps).
  // Distinct triples share a key with probability ~2^-64 per pair.
  static uint64_t event_key(uint32_t tid, uint64_t ptr, uint64_t n);
  // Counts an allocation of ptr by tid in `seen`; returns its number, from 1.
  static uint64_t allocation_number(inspector::AddrTable &seen, uint32_t tid, uint64_t ptr);

  std::unordered_map<uint32_t, SizeTable> own_; // per thread: its live allocations
  SizeTable across_;                            // event_key of a free -> what it freed
  // event_key of an allocation another thread frees -> 1: the allocating
  // thread's table must not keep it.
  inspector::AddrTable freed_elsewhere_;
  inspector::AddrTable allocations_seen_; // allocation_number's, in file order
};

} // namespace memlayout::cli
