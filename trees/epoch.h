// Epoch-based reclamation shared by every tree (Fraser's scheme, as in
// setbench's DEBRA without neutralization): a thread announces the global
// epoch while it runs an operation; a record retired in epoch e is freed once
// every thread has been seen outside, or in an epoch after, e + 1.
//
//   { EpochGuard g;  ...read and unlink records...  retire(alloc, kind, p); }
//
// The announcement must be visible to a scanner before the thread reads the
// tree. A sequentially consistent store does that at the cost of a full
// fence on every operation, which stalls a lookup's first loads behind the
// previous operation's last: 6-7% of log-int's lookups on 1 M keys. Where
// the kernel has membarrier(2)'s private expedited command, the announcement
// is a plain store and a scanner makes every running thread of the process
// execute the fence for it before it reads the announcements (the asymmetric
// fence of liburcu's memb flavour and folly's hazard pointers): scans are
// rare, operations are not. epoch.cpp gives the argument.
#pragma once

#include "record_alloc.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memlayout::trees {

class EpochGuard {
public:
  EpochGuard();  // enter: announce the current epoch
  ~EpochGuard(); // leave; may free records retired two epochs ago
  EpochGuard(const EpochGuard &) = delete;
  EpochGuard &operator=(const EpochGuard &) = delete;
};

// Frees p (of kind k, from `alloc`) once no thread can still hold it. Call
// inside an EpochGuard, after p is unreachable from the tree. Two epochs
// must pass; `one_more_epoch` for a structure whose readers can reach a
// record through another record removed before it (log-int: its fix 2).
void retire(const RecordAllocator &alloc, RecordAllocator::Kind k, void *p,
            bool one_more_epoch = false);

// Frees everything retired so far. Quiescent only (no guard held anywhere):
// tree destructors and tests call it.
void reclaim_all();

// Records retired and not yet freed, all threads (for tests and the harness).
size_t retired_pending();

// Retires between a thread's attempts to advance the epoch in this process
// (64 with fences, 1 024 with membarrier): a thread holds up to about three
// times as many records unreclaimed, the buckets of the last three epochs.
size_t epoch_retires_per_scan();

// How operations announce themselves in this process: "membarrier" (a plain
// store; scanners fence for them) or "fence" (a sequentially consistent
// store: no membarrier(2), ThreadSanitizer, which cannot see membarrier's
// ordering, or MEMLAYOUT_EPOCH_FENCE=1 in the environment). Fixed by the
// first thread to register or ask.
const char *epoch_announcement();

// ---- The guard's fast path, inline into every operation ---------------------
namespace epoch_detail {

struct Retired {
  const RecordAllocator *alloc;
  RecordAllocator::Kind kind;
  void *p;
};

struct LimboBucket {
  uint64_t epoch = 0; // the global epoch its records were retired in
  std::vector<Retired> records;
};

// Announcement word: epoch << 1 | inside-an-operation bit.
inline constexpr uint64_t kActive = 1;
// Operations between attempts by a thread that has records waiting: with
// fences, and with membarrier, whose call interrupts every other running
// thread of the process (2-3 us of each one's time on a VM).
inline constexpr unsigned kOpsPerAdvance = 256;
inline constexpr unsigned kOpsPerMembarrierAdvance = 4096;

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

extern std::atomic<uint64_t> g_epoch;
// The process announces with plain stores (membarrier registered): decided
// once, before any thread registers, and never changed afterwards.
extern bool g_plain_announcement;
// __thread, not thread_local: an extern thread_local is reached through a
// wrapper call.
extern __thread ThreadRecord *t_record;

ThreadRecord *register_thread();
void free_expired(ThreadRecord *rec, uint64_t epoch);
void periodic_advance(ThreadRecord *rec);

inline unsigned ops_per_advance() {
  return g_plain_announcement ? kOpsPerMembarrierAdvance : kOpsPerAdvance;
}

} // namespace epoch_detail

inline EpochGuard::EpochGuard() {
  using namespace epoch_detail;
  ThreadRecord *rec = t_record;
  if (!rec) [[unlikely]]
    rec = register_thread();
  if (rec->depth++ != 0)
    return;
  uint64_t e = g_epoch.load(std::memory_order_acquire);
  rec->entered_epoch = e;
  if (g_plain_announcement) [[likely]] {
    rec->announced.store(e << 1 | kActive, std::memory_order_relaxed);
    // The tree's loads stay after the store in program order; a scanner's
    // membarrier orders them for the processor.
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    rec->announced.store(e << 1 | kActive, std::memory_order_seq_cst);
  }
  if (e != rec->seen_epoch) [[unlikely]]
    free_expired(rec, e);
}

inline EpochGuard::~EpochGuard() {
  using namespace epoch_detail;
  ThreadRecord *rec = t_record;
  if (--rec->depth != 0)
    return;
  rec->announced.store(rec->entered_epoch << 1, std::memory_order_release);
  if (++rec->ops_since_advance >= ops_per_advance()) [[unlikely]]
    periodic_advance(rec);
}

} // namespace memlayout::trees
