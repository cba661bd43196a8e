// What the HTM trees offer beyond the study's map interface: put (insert
// or overwrite, the key-value store's write of Eunomia's and Makreshanski's
// workloads), range scans, and their transactions' statistics.
#pragma once

#include "htm/htm_stats.h"
#include "map_with_records.h"

#include <cstddef>
#include <functional>

namespace memlayout::trees::htm {

class HtmMap : public MapWithRecords {
public:
  // The key's value becomes `value`; true when the key was absent.
  virtual bool put(Key key, Value value) = 0;
  // Visits up to n pairs with keys >= from in ascending order; returns how
  // many. Each leaf is read atomically, the scan as a whole is not.
  virtual size_t scan(Key from, size_t n, const std::function<void(Key, Value)> &visit) = 0;
  // Quiescent: commits, aborts by cause and class, fallbacks, by region and
  // record kind.
  virtual HtmReport htm_report() const = 0;
  // Quiescent: starts the statistics over (the harness, after the prefill).
  virtual void reset_htm_stats() = 0;

protected:
  using MapWithRecords::MapWithRecords;
};

} // namespace memlayout::trees::htm
