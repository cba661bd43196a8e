#include "ycsb_lite_run.h"

#include "htm/abort_sink.h"
#include "htm/htm_map.h"

#include "key_permutation.h"
#include "phase_clock.h"
#include "random.h"
#include "ycsb_lite_table.h"
#include "zipf.h"

#include <memlayout/memlayout.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <thread>

namespace memlayout::trees::ycsb {
namespace {

using bench::Clock;
using bench::KeyPermutation;
using bench::KeyScrambler;
using bench::phase_seconds;
using bench::PhaseSpan;
using bench::seconds_between;
using bench::Xoshiro256;
using bench::ZipfGenerator;

struct alignas(64) Worker {
  ThreadTxns result;
  // The worker's own load, timed by the workers: the main thread may not
  // run again until theirs is nearly done (1,000 rows "loaded in 6 us").
  PhaseSpan load;
};

class Run {
public:
  Run(const YcsbOptions &o, Table &table, htm::HtmMap *htm_index)
      : o_(o), table_(table), htm_index_(htm_index), zipf_(o.rows, o.theta), scramble_(o.rows),
        load_order_(o.rows, o.seed ^ 0x5eed), workers_(o.threads), sync_(o.threads + 1) {}

  YcsbResult operator()();

private:
  void work(unsigned t);
  void transaction(Xoshiro256 &rng, std::vector<Key> &keys, std::vector<RowWrapper *> &rows,
                   ThreadTxns &r);

  const YcsbOptions &o_;
  Table &table_;
  htm::HtmMap *htm_index_; // an HTM index, whose counts are the run's only
  ZipfGenerator zipf_;
  KeyScrambler scramble_;
  KeyPermutation load_order_;
  std::vector<Worker> workers_;
  std::barrier<> sync_;
  alignas(64) std::atomic<bool> stop_{false};
};

void Run::work(unsigned t) {
  ThreadTxns &r = workers_[t].result;
  r.thread = t;
  Xoshiro256 rng(o_.seed * 0x9e3779b97f4a7c15ULL + t + 1);
  sync_.arrive_and_wait();
  // Each thread loads its share of the rows, in random key order (sorted
  // order would make an unbalanced tree a list).
  workers_[t].load.begin = Clock::now();
  for (uint64_t i = t; i < o_.rows; i += o_.threads)
    table_.load(static_cast<Key>(load_order_(i) + 1));
  workers_[t].load.end = Clock::now();
  sync_.arrive_and_wait(); // loaded
  sync_.arrive_and_wait(); // marked: go
  if (o_.duration_s > 0) {
    std::vector<Key> keys(o_.txn_rows);
    std::vector<RowWrapper *> rows(o_.txn_rows);
    auto t0 = Clock::now();
    while (!stop_.load(std::memory_order_relaxed))
      transaction(rng, keys, rows, r);
    r.seconds = seconds_between(t0, Clock::now());
  }
  htm::flush_thread_abort_records(); // an HTM index's aborts, into the trace when recorded
}

// Picks txn_rows distinct Zipf rows, locks them in key order (no deadlock),
// reads every row or updates each one, unlocks.
void Run::transaction(Xoshiro256 &rng, std::vector<Key> &keys, std::vector<RowWrapper *> &rows,
                      ThreadTxns &r) {
  size_t n = 0;
  while (n < keys.size()) {
    Key k = static_cast<Key>(scramble_(zipf_(rng)));
    if (std::find(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(n), k) ==
        keys.begin() + static_cast<ptrdiff_t>(n))
      keys[n++] = k;
  }
  std::sort(keys.begin(), keys.end());
  bool update = rng.below(100) >= o_.read_pct;
  size_t found = 0;
  for (Key k : keys) {
    RowWrapper *w = table_.find(k);
    if (!w) {
      ++r.missing_rows;
      continue;
    }
    rows[found++] = w;
  }
  for (size_t i = 0; i < found; ++i) {
    pthread_mutex_lock(&rows[i]->lock->mutex);
    ++rows[i]->lock->acquisitions;
  }
  uint64_t sink = 0;
  for (size_t i = 0; i < found; ++i) {
    Row *row = rows[i]->row;
    if (update) {
      ++row->version;
      row->last_writer = r.thread;
      row->payload[row->version % kPayloadBytes] ^= 1;
    } else {
      sink += row->version;
      for (size_t b = 0; b < kPayloadBytes; b += 8)
        sink += row->payload[b];
    }
  }
  for (size_t i = found; i-- > 0;)
    pthread_mutex_unlock(&rows[i]->lock->mutex);
  asm volatile("" : : "r"(sink)); // the reads are the work: keep them
  if (update) {
    ++r.updates;
    r.rows_updated += found;
  } else {
    ++r.reads;
  }
}

YcsbResult Run::operator()() {
  YcsbResult res;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < o_.threads; ++t)
    threads.emplace_back(&Run::work, this, t);
  sync_.arrive_and_wait();
  sync_.arrive_and_wait();
  res.load_s = phase_seconds(workers_, &Worker::load);
  memlayout_mark("loaded"); // memlayout report --at mark:loaded
  // The run's transactions, not the load's (a load-only run keeps the
  // load's, as memlayout-bench keeps the prefill's). The workers wait at
  // the barrier.
  if (htm_index_ && o_.duration_s > 0)
    htm_index_->reset_htm_stats();
  auto t0 = Clock::now();
  sync_.arrive_and_wait();
  if (o_.duration_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.duration_s));
    stop_.store(true);
    res.duration_s = seconds_between(t0, Clock::now());
  }
  for (std::thread &t : threads)
    t.join();
  if (htm_index_)
    res.htm = htm_index_->htm_report(); // not --check's lookups, nor the table's erases
  uint64_t rows_updated = 0, missing = 0;
  for (const Worker &w : workers_) {
    res.per_thread.push_back(w.result);
    res.txns += w.result.txns();
    rows_updated += w.result.rows_updated;
    missing += w.result.missing_rows;
  }
  res.txn_per_s = res.duration_s > 0 ? static_cast<double>(res.txns) / res.duration_s : 0;
  if (o_.check) {
    res.checked = true;
    uint64_t versions = 0, present = 0;
    for (uint64_t k = 1; k <= o_.rows; ++k) {
      if (RowWrapper *w = table_.find(static_cast<Key>(k))) {
        versions += w->row->version;
        ++present;
      }
    }
    if (missing || present != o_.rows)
      res.check_error = std::to_string(o_.rows - present) + " rows missing from the index";
    else if (versions != rows_updated)
      res.check_error = "rows record " + std::to_string(versions) + " updates, transactions made " +
                        std::to_string(rows_updated) + ": updates were lost";
  }
  return res;
}

} // namespace

YcsbResult run_ycsb(const YcsbOptions &o) {
  std::unique_ptr<ConcurrentMap> index = find_tree(o.tree)->make(o.config);
  YcsbResult r;
  {
    Table table(*index, o.config.alloc, o.pad_locks);
    r = Run(o, table, dynamic_cast<htm::HtmMap *>(index.get()))();
  } // the table frees its rows through the index before the index goes
  return r;
}

} // namespace memlayout::trees::ycsb
