// Epoch-based reclamation (epoch.h). Each thread owns a ThreadRecord on a
// global lock-free list; records are never freed, only reused by later
// threads, so scanning the list needs no protection of its own.
//
// Safety argument. A record retired while the global epoch read e is tagged e
// and freed once the global epoch is at least e + 2. Any thread that can
// still hold it entered its operation before the unlink, so it announced an
// epoch <= e; while it stays inside, the epoch cannot pass its announcement
// + 1 <= e + 1. The announcement is a sequentially consistent store, so a
// scanner that does not see it precedes it, and the thread's later reads
// then see the unlink.
#include "epoch.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace memlayout::trees {
namespace {

// Retires between attempts to advance the epoch, and operations between
// attempts by a thread that has records waiting.
constexpr unsigned kRetiresPerAdvance = 64;
constexpr unsigned kOpsPerAdvance = 256;

struct Retired {
  const RecordAllocator *alloc;
  RecordAllocator::Kind kind;
  void *p;
};

struct LimboBucket {
  uint64_t epoch = 0; // the global epoch its records were retired in
  std::vector<Retired> records;
};

void free_records(std::vector<Retired> &records) {
  for (const Retired &r : records)
    r.alloc->deallocate(r.kind, r.p);
  records.clear(); // keeps its capacity: no allocation in steady state
}

// Announcement word: epoch << 1 | inside-an-operation bit.
constexpr uint64_t kActive = 1;

struct alignas(64) ThreadRecord {
  // Read by every scanner: alone on its line, with in_use.
  std::atomic<uint64_t> announced{0};
  std::atomic<bool> in_use{true};
  ThreadRecord *next = nullptr; // immutable once published

  // Owner-only below (and quiescent reclaim_all).
  alignas(64) unsigned depth = 0; // nested guards
  uint64_t entered_epoch = 0;     // announced by the outermost guard
  uint64_t seen_epoch = 0;        // the epoch of the last free pass
  unsigned ops_since_advance = 0;
  unsigned retires_since_advance = 0;
  std::array<LimboBucket, 3> limbo;
  std::atomic<size_t> pending{0}; // written by the owner, read by retired_pending()
};

std::atomic<uint64_t> g_epoch{2}; // starts at 2 so "tag + 2 <= epoch" never underflows
std::atomic<ThreadRecord *> g_threads{nullptr};

// Limbo of threads that exited with records still waiting.
struct OrphanBatch {
  uint64_t epoch;
  std::vector<Retired> records;
};
std::mutex g_orphans_mutex;
std::vector<OrphanBatch> g_orphans;
std::atomic<size_t> g_orphan_records{0};

thread_local ThreadRecord *t_record = nullptr;

void release_record(ThreadRecord *rec);

// Gives the thread's record back at thread exit. Touched only when a thread
// registers, so the fast path reads the trivially destructible t_record.
struct ThreadExit {
  ThreadRecord *rec = nullptr;
  ~ThreadExit() {
    if (rec)
      release_record(rec);
    t_record = nullptr;
  }
};
thread_local ThreadExit t_exit;

ThreadRecord *acquire_record() {
  for (ThreadRecord *r = g_threads.load(std::memory_order_acquire); r; r = r->next) {
    bool free_slot = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(free_slot, true, std::memory_order_acquire))
      return r;
  }
  auto *r = new ThreadRecord;
  ThreadRecord *head = g_threads.load(std::memory_order_relaxed);
  do
    r->next = head;
  while (!g_threads.compare_exchange_weak(head, r, std::memory_order_release,
                                          std::memory_order_relaxed));
  return r;
}

ThreadRecord *register_thread() {
  ThreadRecord *rec = acquire_record();
  rec->seen_epoch = g_epoch.load(std::memory_order_acquire);
  t_exit.rec = rec;
  t_record = rec;
  return rec;
}

void free_expired(ThreadRecord *rec, uint64_t epoch) {
  size_t freed = 0;
  for (LimboBucket &b : rec->limbo) {
    if (!b.records.empty() && b.epoch + 2 <= epoch) {
      freed += b.records.size();
      free_records(b.records);
    }
  }
  if (freed)
    rec->pending.store(rec->pending.load(std::memory_order_relaxed) - freed,
                       std::memory_order_relaxed);
  rec->seen_epoch = epoch;
}

void free_expired_orphans(uint64_t epoch) {
  std::lock_guard lock(g_orphans_mutex);
  size_t freed = 0;
  std::erase_if(g_orphans, [&](OrphanBatch &b) {
    if (b.epoch + 2 > epoch)
      return false;
    freed += b.records.size();
    free_records(b.records);
    return true;
  });
  g_orphan_records.fetch_sub(freed, std::memory_order_relaxed);
}

// Moves the global epoch on when every thread inside an operation has
// announced the current one. Returns the epoch now in force.
uint64_t try_advance() {
  uint64_t e = g_epoch.load(std::memory_order_seq_cst);
  for (ThreadRecord *r = g_threads.load(std::memory_order_acquire); r; r = r->next) {
    uint64_t a = r->announced.load(std::memory_order_seq_cst);
    if ((a & kActive) && (a >> 1) != e)
      return e;
  }
  if (g_epoch.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst))
    ++e; // else e holds the epoch another thread advanced to
  if (g_orphan_records.load(std::memory_order_relaxed))
    free_expired_orphans(e);
  return e;
}

void advance_and_free(ThreadRecord *rec) {
  rec->ops_since_advance = 0;
  rec->retires_since_advance = 0;
  free_expired(rec, try_advance());
}

// Every kOpsPerAdvance operations: records waiting here or left by exited
// threads are worth a scan; a thread with nothing to free skips it.
void periodic_advance(ThreadRecord *rec) {
  if (rec->pending.load(std::memory_order_relaxed) != 0 ||
      g_orphan_records.load(std::memory_order_relaxed) != 0)
    advance_and_free(rec);
  else
    rec->ops_since_advance = 0;
}

void release_record(ThreadRecord *rec) {
  // Whatever is still waiting goes to the orphans, for a later advance.
  size_t moved = 0;
  {
    std::lock_guard lock(g_orphans_mutex);
    for (LimboBucket &b : rec->limbo) {
      if (b.records.empty())
        continue;
      moved += b.records.size();
      g_orphans.push_back(OrphanBatch{b.epoch, std::move(b.records)});
      b.records = {};
    }
  }
  g_orphan_records.fetch_add(moved, std::memory_order_relaxed);
  rec->pending.store(0, std::memory_order_relaxed);
  rec->depth = 0;
  rec->ops_since_advance = rec->retires_since_advance = 0;
  rec->announced.store(0, std::memory_order_release);
  rec->in_use.store(false, std::memory_order_release);
}

} // namespace

EpochGuard::EpochGuard() {
  ThreadRecord *rec = t_record;
  if (!rec) [[unlikely]]
    rec = register_thread();
  if (rec->depth++ != 0)
    return;
  uint64_t e = g_epoch.load(std::memory_order_acquire);
  rec->entered_epoch = e;
  // seq_cst store: visible to any scanner before this thread reads the tree.
  rec->announced.store(e << 1 | kActive, std::memory_order_seq_cst);
  if (e != rec->seen_epoch) [[unlikely]]
    free_expired(rec, e);
}

EpochGuard::~EpochGuard() {
  ThreadRecord *rec = t_record;
  if (--rec->depth != 0)
    return;
  rec->announced.store(rec->entered_epoch << 1, std::memory_order_release);
  if (++rec->ops_since_advance >= kOpsPerAdvance) [[unlikely]]
    periodic_advance(rec);
}

void retire(const RecordAllocator &alloc, RecordAllocator::Kind k, void *p, bool one_more_epoch) {
  ThreadRecord *rec = t_record;
  if (!rec) [[unlikely]]
    rec = register_thread();
  // The epoch now, not the one announced: the unlink happened in it or before.
  // One later with one_more_epoch (no more: three buckets hold the tags
  // e - 2 .. e + 1, and the bucket of e + 1 can only hold e - 2, expired).
  uint64_t e = g_epoch.load(std::memory_order_seq_cst) + (one_more_epoch ? 1 : 0);
  LimboBucket &b = rec->limbo[e % 3];
  if (b.epoch != e) {
    // The bucket last held epoch e - 3 or older: all of it has expired.
    size_t freed = b.records.size();
    free_records(b.records);
    rec->pending.store(rec->pending.load(std::memory_order_relaxed) - freed,
                       std::memory_order_relaxed);
    b.epoch = e;
  }
  b.records.push_back(Retired{&alloc, k, p});
  rec->pending.store(rec->pending.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (++rec->retires_since_advance >= kRetiresPerAdvance)
    advance_and_free(rec);
}

void reclaim_all() {
  for (ThreadRecord *r = g_threads.load(std::memory_order_acquire); r; r = r->next) {
    for (LimboBucket &b : r->limbo)
      free_records(b.records);
    r->pending.store(0, std::memory_order_relaxed);
  }
  std::lock_guard lock(g_orphans_mutex);
  for (OrphanBatch &b : g_orphans)
    free_records(b.records);
  g_orphans.clear();
  g_orphan_records.store(0, std::memory_order_relaxed);
}

size_t retired_pending() {
  size_t n = g_orphan_records.load(std::memory_order_relaxed);
  for (ThreadRecord *r = g_threads.load(std::memory_order_acquire); r; r = r->next)
    n += r->pending.load(std::memory_order_relaxed);
  return n;
}

} // namespace memlayout::trees
