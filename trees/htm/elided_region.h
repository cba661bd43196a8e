// A code region run as a transaction, with the literature's retry policy:
// after an abort, wait until the fallback lock is free (else every thread
// ends up on the lock: the "lemming effect"), retry, and take the lock after
// more aborts of one kind than the policy tolerates (Eunomia, DBX: 128
// conflict, 16 capacity, 3 other). Every transaction reads the lock word
// first, so taking the lock aborts the transactions in flight.
//
//   FallbackLock lock;
//   ElidedRegion region("tree.op", lock, runtime, &sink);
//   bool found = region.run(key, [&](Tx &tx) { return search(tx, key); },
//                           [&] { refill_spares(); });
#pragma once

#include "abort_sink.h"
#include "htm_config.h"
#include "htm_stats.h"
#include "rtm.h"
#include "thread_index.h"
#include "transaction.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace memlayout::trees::htm {

// The backend and policy a tree's regions run with, resolved once.
struct Runtime {
  Backend backend = Backend::kEmulate; // kRtm, kEmulate or kLock
  RetryPolicy retries;
  uint64_t descheduled_ns = 0;
  L1Model l1;
};

// kAuto becomes kRtm when this CPU has usable RTM, else kEmulate; kRtm on a
// CPU without it throws std::runtime_error saying why. Configures the
// emulator's L1 model when it is chosen. kLock stays: regions take the lock.
Runtime resolve_runtime(const HtmConfig &config);

// The lock of the fallback path, alone on its line.
class FallbackLock {
public:
  bool held() const { return __atomic_load_n(&word_, __ATOMIC_ACQUIRE) != 0; }
  bool held_in(const Tx &tx) const { return tx.load(&word_) != 0; }
  void wait_until_free() const {
    for (unsigned attempt = 0; held(); ++attempt)
      back_off(attempt);
  }
  void acquire() {
    for (unsigned attempt = 0;; ++attempt) {
      if (!held() && plain_cas(&word_, 0u, 1u, Requester::kFallbackLock))
        return;
      back_off(attempt);
    }
  }
  // No transaction holds the word while the lock is held (each that read it
  // saw it taken and aborted): a plain store is enough.
  void release() { __atomic_store_n(&word_, 0u, __ATOMIC_RELEASE); }

private:
  static void back_off(unsigned attempt);
  alignas(64) uint32_t word_ = 0;
  char pad_[60] = {};
};

class ElidedRegion {
public:
  ElidedRegion(const std::string &name, FallbackLock &lock, const Runtime &rt, AbortSink *sink);

  // Runs body(Tx &) atomically and returns its result. `refill` runs outside
  // any transaction when the body aborted for want of spare records.
  template <class Body, class Refill> auto run(uint64_t key, Body &&body, Refill &&refill) {
    using R = std::invoke_result_t<Body &, Tx &>;
    PaddedCounts &slot = counts_[thread_index()];
    Counts &c = slot.c;
    uint32_t &conflicts = slot.last_conflicts;
    uint32_t capacity = 0, other = 0;
    conflicts = 0;
    for (; rt_.backend != Backend::kLock;) {
      lock_.wait_until_free();
      AbortInfo info;
      if (rt_.backend == Backend::kEmulate) {
        TxEmulator &emu = TxEmulator::instance();
        try {
          emu.begin(key, true, rt_.descheduled_ns);
          Tx tx(Mode::kEmulated);
          if (lock_.held_in(tx))
            emu.abort_explicit(kAbortLockHeld);
          if constexpr (std::is_void_v<R>) {
            body(tx);
            emu.commit();
            completed(c);
            return;
          } else {
            R r = body(tx);
            emu.commit();
            completed(c);
            return r;
          }
        } catch (const TxAborted &) {
          info = emu.last_abort();
        }
      } else {
        unsigned status = rtm_begin();
        if (status == kRtmStarted) {
          Tx tx(Mode::kRtm);
          if (lock_.held_in(tx))
            rtm_abort_lock_held();
          if constexpr (std::is_void_v<R>) {
            body(tx);
            rtm_end();
            completed(c);
            return;
          } else {
            R r = body(tx);
            rtm_end();
            completed(c);
            return r;
          }
        }
        info = rtm_abort_info(status);
      }
      after_abort(info, c);
      if (info.cause == AbortCause::kExplicit) {
        if (info.explicit_code == kAbortNeedRecords)
          refill();
        // Lock held: the wait at the top of the loop is the answer; that
        // abort says nothing about this transaction.
        if (info.explicit_code == kAbortNeedRecords || info.explicit_code == kAbortLockHeld)
          continue;
      }
      bool give_up = info.cause == AbortCause::kConflict   ? ++conflicts > rt_.retries.conflict
                     : info.cause == AbortCause::kCapacity ? ++capacity > rt_.retries.capacity
                                                           : ++other > rt_.retries.other;
      if (give_up)
        break;
    }
    lock_.acquire();
    ++c.fallbacks;
    AbortSink::count_completion(interned_);
    struct Release {
      FallbackLock &l;
      ~Release() { l.release(); }
    } release{lock_};
    Tx tx(Mode::kDirect);
    return body(tx);
  }
  template <class Body> auto run(uint64_t key, Body &&body) {
    return run(key, std::forward<Body>(body), [] {});
  }

  const std::string &name() const { return name_; }
  // Conflict aborts of the calling thread's last run (contention detectors).
  uint32_t last_run_conflicts() const { return counts_[thread_index()].last_conflicts; }
  // Quiescent: the counts summed over threads; zeroed.
  HtmCounts counts() const;
  void reset_counts();

private:
  using Counts = HtmCounts;
  struct alignas(64) PaddedCounts {
    Counts c;
    uint32_t last_conflicts = 0;
  };
  void after_abort(const AbortInfo &info, Counts &c);
  void completed(Counts &c) {
    ++c.commits;
    AbortSink::count_completion(interned_);
  }

  std::string name_;
  const char *interned_;
  FallbackLock &lock_;
  Runtime rt_;
  AbortSink *sink_;
  std::unique_ptr<PaddedCounts[]> counts_;
};

} // namespace memlayout::trees::htm
