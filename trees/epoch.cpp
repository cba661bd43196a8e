// Epoch-based reclamation (epoch.h). Each thread owns a ThreadRecord on a
// global lock-free list; records are never freed, only reused by later
// threads, so scanning the list needs no protection of its own.
//
// Safety argument. A record retired while the global epoch read e is tagged e
// and freed once the global epoch is at least e + 2. Its unlink is visible
// everywhere before its remover reads e (a full fence in retire). Take the
// scan that moved the epoch from e + 1 to e + 2: it read e + 1, fenced, then
// found every thread outside or announced at e + 1. A thread announced at
// e + 1 read the epoch after the move to e + 1, which came after the remover
// read e: its loads of the tree see the unlink. A thread that was inside
// with an older announcement blocks the scan, as long as the scan sees the
// announcement:
//
// - "fence": the announcement is a sequentially consistent store, so a
//   scanner that does not see it precedes it, and the thread's reads of the
//   epoch and the tree come later still (they see e + 1 and the unlink).
// - "membarrier": the announcement is a plain store. The scanner calls
//   membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) between reading the epoch
//   and reading the announcements, so that every running thread of the
//   process executes a full fence at some point P during the call (a thread
//   not running has passed through the kernel, a full fence). A thread whose
//   announcement precedes P in its program order has it visible to the scan.
//   One whose announcement follows P loads the tree after P, after
//   everything the scanner saw before the call: the move to e + 1 and the
//   unlink before it.
#include "epoch.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace memlayout::trees {
namespace epoch_detail {

std::atomic<uint64_t> g_epoch{2}; // starts at 2 so "tag + 2 <= epoch" never underflows
bool g_plain_announcement = false;
__thread ThreadRecord *t_record = nullptr;

} // namespace epoch_detail

namespace {

using namespace epoch_detail;

// Retires between attempts to advance the epoch (epoch.h: with fences, with
// membarrier).
constexpr unsigned kRetiresPerAdvance = 64;
constexpr unsigned kRetiresPerMembarrierAdvance = 1024;

void free_records(std::vector<Retired> &records) {
  for (const Retired &r : records)
    r.alloc->deallocate(r.kind, r.p);
  records.clear(); // keeps its capacity: no allocation in steady state
}

long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0U, 0); }

// Decided once, before the first record is handed out: every guard of the
// process announces the same way.
bool choose_plain_announcement() {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  if (const char *v = std::getenv("MEMLAYOUT_EPOCH_FENCE"); v && std::strcmp(v, "0") != 0)
    return false;
  long commands = membarrier(MEMBARRIER_CMD_QUERY);
  return commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#endif
}

// g_plain_announcement, set once by whichever thread asks first: a thread
// registering, or a query. The guard's fast path reads the flag itself,
// after its thread registered.
bool announcement_decided() {
  static const bool plain = [] {
    g_plain_announcement = choose_plain_announcement();
    return g_plain_announcement;
  }();
  return plain;
}

unsigned retires_per_advance() {
  return announcement_decided() ? kRetiresPerMembarrierAdvance : kRetiresPerAdvance;
}

// The caller's unlink is visible everywhere before it reads the epoch for
// the record's tag (the safety argument above). ThreadSanitizer models no
// fences (and warns of them): its builds order by the atomics alone.
void make_unlink_visible() {
#if !defined(__SANITIZE_THREAD__)
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Every running thread of the process executes a full fence (the heavy half
// of the asymmetric fence; the guard's compiler barrier is the light half).
void fence_every_thread() {
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    return;
  // A registration belongs to the address space: a forked child that lost
  // it registers again. Without the call no record can be freed safely.
  if (errno != EPERM || membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 ||
      membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::fprintf(stderr, "memlayout trees: membarrier failed after registering: %s\n",
                 std::strerror(errno));
    std::abort();
  }
}

std::atomic<ThreadRecord *> g_threads{nullptr};

// Limbo of threads that exited with records still waiting.
struct OrphanBatch {
  uint64_t epoch;
  std::vector<Retired> records;
};
std::mutex g_orphans_mutex;
std::vector<OrphanBatch> g_orphans;
std::atomic<size_t> g_orphan_records{0};

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

} // namespace

ThreadRecord *epoch_detail::register_thread() {
  announcement_decided();
  ThreadRecord *rec = acquire_record();
  rec->seen_epoch = g_epoch.load(std::memory_order_acquire);
  t_exit.rec = rec;
  t_record = rec;
  return rec;
}

void epoch_detail::free_expired(ThreadRecord *rec, uint64_t epoch) {
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

namespace {

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
  if (g_plain_announcement)
    fence_every_thread();
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

// Every ops_per_advance() operations: records waiting here or left by exited
// threads are worth a scan; a thread with nothing to free skips it.
void epoch_detail::periodic_advance(ThreadRecord *rec) {
  if (rec->pending.load(std::memory_order_relaxed) != 0 ||
      g_orphan_records.load(std::memory_order_relaxed) != 0)
    advance_and_free(rec);
  else
    rec->ops_since_advance = 0;
}

void retire(const RecordAllocator &alloc, RecordAllocator::Kind k, void *p, bool one_more_epoch) {
  ThreadRecord *rec = t_record;
  if (!rec) [[unlikely]]
    rec = register_thread();
  make_unlink_visible();
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
  if (++rec->retires_since_advance >= retires_per_advance())
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

size_t epoch_retires_per_scan() { return retires_per_advance(); }

const char *epoch_announcement() { return announcement_decided() ? "membarrier" : "fence"; }

} // namespace memlayout::trees
