// Which record of an HTM tree holds an address: the tree adds each record
// it allocates, and the abort accounting asks, for a line that aborted a
// transaction, which record kind it belongs to and at which offset.
// Allocation is rare (nodes are allocated outside transactions, ahead of
// need) and lookups happen only on aborts, so one reader-writer lock is
// enough.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

namespace memlayout::trees::htm {

class RecordMap {
public:
  void add(const void *p, size_t size, uint32_t kind);
  void remove(const void *p);
  void clear();

  struct Hit {
    uint32_t kind = 0;
    uint64_t base = 0, size = 0;
  };
  // The record containing addr; false when none does.
  bool find(uint64_t addr, Hit *hit) const;

private:
  mutable std::shared_mutex mutex_;
  std::map<uint64_t, Hit> by_base_;
};

} // namespace memlayout::trees::htm
