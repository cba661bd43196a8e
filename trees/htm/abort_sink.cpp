#include "abort_sink.h"

#include "thread_index.h"

#include <memlayout/memlayout.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

namespace memlayout::trees::htm {
namespace {

// Aborts waiting to be written to the trace, per thread: one annotation call
// (one trace record) per batch.
struct TraceBatch {
  static constexpr size_t kEntries = 256;
  memlayout_htm_abort entries[kEntries];
  uint64_t lines[kEntries][AbortInfo::kMaxSetLines];
  size_t count = 0;
  // Completed transactions per region since the last flush (few regions).
  std::pair<const char *, uint64_t> completions[8] = {};

  void flush() {
    for (auto &[region, n] : completions)
      if (n && count < kEntries) {
        memlayout_htm_abort &e = entries[count++];
        e = memlayout_htm_abort{};
        e.cause = MEMLAYOUT_HTM_COMMITS;
        e.line = n;
        e.region = region;
        n = 0;
      }
    if (count)
      memlayout_htm_aborts(entries, count);
    count = 0;
  }
  ~TraceBatch() { flush(); }
};
// Allocated on a thread's first recorded abort: only recorded runs pay for it.
thread_local std::unique_ptr<TraceBatch> t_batch;

bool recording() {
  static const bool on = memlayout_recording() != 0;
  return on;
}

void trace_abort(const AbortInfo &a, const char *region, const L1Model &l1) {
  if (!t_batch)
    t_batch = std::make_unique<TraceBatch>();
  TraceBatch &b = *t_batch;
  memlayout_htm_abort &e = b.entries[b.count];
  e = memlayout_htm_abort{};
  e.cause = static_cast<uint8_t>(a.cause);
  e.region = region;
  e.l1_sets = l1.sets;
  e.l1_ways = l1.ways;
  if (a.cause == AbortCause::kConflict) {
    e.line = a.line;
    e.read_mask = a.victim_read_mask;
    e.write_mask = a.victim_write_mask;
    e.other_mask = a.requester_mask;
    e.flags = static_cast<uint8_t>(
        (a.overlap ? MEMLAYOUT_HTM_OVERLAP : 0) |
        (a.requester_writes ? MEMLAYOUT_HTM_OTHER_WRITES : 0) |
        (a.same_key ? MEMLAYOUT_HTM_SAME_KEY : 0) | (a.keys_known ? MEMLAYOUT_HTM_KEYS_KNOWN : 0) |
        (a.requester == Requester::kPlain ? MEMLAYOUT_HTM_BY_PLAIN : 0) |
        (a.requester == Requester::kFallbackLock ? MEMLAYOUT_HTM_BY_LOCK : 0));
  } else if (a.cause == AbortCause::kCapacity) {
    e.flags = a.write_capacity ? MEMLAYOUT_HTM_WRITE_CAPACITY : 0;
    e.set = a.set;
    e.tx_lines = a.lines;
    e.tx_written_lines = a.written_lines;
    e.tx_sets = a.sets_used;
    std::copy(a.set_lines, a.set_lines + a.set_lines_count, b.lines[b.count]);
    e.lines = b.lines[b.count];
    e.nlines = a.set_lines_count;
  }
  if (++b.count >= TraceBatch::kEntries - 8) // room for the completions
    b.flush();
}

void top(const std::vector<uint64_t> &counts, std::vector<std::pair<uint32_t, uint64_t>> &out) {
  out.clear();
  for (uint32_t off = 0; off < counts.size(); ++off)
    if (counts[off])
      out.emplace_back(off, counts[off]);
  std::sort(out.begin(), out.end(), [](const auto &x, const auto &y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  if (out.size() > 8)
    out.resize(8);
}

} // namespace

AbortSink::AbortSink(std::vector<std::string> kinds, const RecordMap *records)
    : names_(std::move(kinds)), records_(records),
      threads_(new std::atomic<PerThread *>[kMaxThreads]) {
  for (uint32_t i = 0; i < kMaxThreads; ++i)
    threads_[i].store(nullptr, std::memory_order_relaxed);
}

AbortSink::~AbortSink() {
  for (uint32_t i = 0; i < kMaxThreads; ++i)
    delete threads_[i].load(std::memory_order_relaxed);
}

AbortSink::PerThread &AbortSink::mine() {
  std::atomic<PerThread *> &slot = threads_[thread_index()];
  PerThread *p = slot.load(std::memory_order_acquire);
  if (!p) {
    p = new PerThread;
    p->kinds.resize(names_.size());
    for (Tally &t : p->kinds) {
      t.false_offsets.assign(kMaxOffset + 1, 0);
      t.capacity_offsets.assign(kMaxOffset + 1, 0);
    }
    slot.store(p, std::memory_order_release);
  }
  return *p;
}

void AbortSink::record(const AbortInfo &a, const char *region, const L1Model &l1) {
  if (recording() && a.cause != AbortCause::kExplicit)
    trace_abort(a, region, l1);
  if (!a.detailed || !records_)
    return;
  RecordMap::Hit hit;
  if (a.cause == AbortCause::kConflict) {
    uint64_t mine_mask = a.victim_read_mask | a.victim_write_mask;
    uint64_t first = a.line + (mine_mask ? static_cast<uint64_t>(__builtin_ctzll(mine_mask)) : 0);
    if (a.requester == Requester::kFallbackLock || !records_->find(first, &hit) ||
        hit.kind >= names_.size())
      return;
    Tally &t = mine().kinds[hit.kind];
    if (a.overlap) {
      ++t.conflicts_true;
    } else {
      ++t.conflicts_false;
      ++t.false_offsets[std::min<uint64_t>(first - hit.base, kMaxOffset)];
    }
  } else if (a.cause == AbortCause::kCapacity) {
    for (int i = 0; i < a.set_lines_count; ++i) {
      if (!records_->find(a.set_lines[i], &hit) || hit.kind >= names_.size())
        continue;
      Tally &t = mine().kinds[hit.kind];
      ++t.capacity_lines;
      ++t.capacity_offsets[std::min<uint64_t>(a.set_lines[i] - hit.base, kMaxOffset)];
    }
  }
}

std::vector<KindAborts> AbortSink::kinds() const {
  std::vector<KindAborts> out(names_.size());
  std::vector<std::vector<uint64_t>> fo(names_.size(), std::vector<uint64_t>(kMaxOffset + 1)),
      co(names_.size(), std::vector<uint64_t>(kMaxOffset + 1));
  for (size_t k = 0; k < names_.size(); ++k)
    out[k].kind = names_[k];
  for (uint32_t i = 0; i < kMaxThreads; ++i) {
    const PerThread *p = threads_[i].load(std::memory_order_acquire);
    if (!p)
      continue;
    for (size_t k = 0; k < p->kinds.size(); ++k) {
      const Tally &t = p->kinds[k];
      out[k].conflicts_true += t.conflicts_true;
      out[k].conflicts_false += t.conflicts_false;
      out[k].capacity_lines += t.capacity_lines;
      for (uint32_t off = 0; off <= kMaxOffset; ++off) {
        fo[k][off] += t.false_offsets[off];
        co[k][off] += t.capacity_offsets[off];
      }
    }
  }
  for (size_t k = 0; k < names_.size(); ++k) {
    top(fo[k], out[k].false_offsets);
    top(co[k], out[k].capacity_offsets);
  }
  return out;
}

void AbortSink::reset() {
  for (uint32_t i = 0; i < kMaxThreads; ++i)
    if (PerThread *p = threads_[i].load(std::memory_order_acquire))
      for (Tally &t : p->kinds) {
        t.conflicts_true = t.conflicts_false = t.capacity_lines = 0;
        std::fill(t.false_offsets.begin(), t.false_offsets.end(), 0);
        std::fill(t.capacity_offsets.begin(), t.capacity_offsets.end(), 0);
      }
}

const char *intern_region_name(const std::string &name) {
  static std::mutex m;
  static std::set<std::string> *names =
      new std::set<std::string>; // never freed: threads outlive trees
  std::lock_guard<std::mutex> g(m);
  return names->insert(name).first->c_str();
}

void AbortSink::count_completion(const char *region) {
  if (!recording())
    return;
  if (!t_batch)
    t_batch = std::make_unique<TraceBatch>();
  for (auto &[r, n] : t_batch->completions)
    if (r == region || !r) {
      r = region;
      ++n;
      return;
    }
}

void flush_thread_abort_records() {
  if (t_batch)
    t_batch->flush();
}

} // namespace memlayout::trees::htm
