// How a tree touches shared memory inside an elided region: every load and
// store goes through a Tx, so that under the emulator each byte range read
// and written is known (and a conflict classified), under RTM it is a plain
// load or store inside the hardware transaction, and on the fallback path
// (the lock held) a plain one. Outside regions, accesses to lines that
// transactions may hold go through the plain_* functions below, which the
// emulator sees as a store from outside a hardware transaction.
//
//   region.run(key, [&](Tx &tx) {
//     Node *n = tx.load(&root_);
//     tx.store(&n->count, tx.load(&n->count) + 1);
//   });
//
// Values are read with acquire and written with release atomics (plain moves
// on x86): a doomed transaction may read memory a committer is writing, which
// must not be a data race, and a store must carry the doom that preceded it.
#pragma once

#include "abort_info.h"
#include "tx_emulator.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace memlayout::trees::htm {

enum class Mode : uint8_t {
  kDirect,   // the fallback path: the lock is held, no transaction runs
  kRtm,      // inside a hardware transaction
  kEmulated, // inside an emulated transaction
};

template <class T>
concept Word = std::is_trivially_copyable_v<T> &&
    (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

namespace detail {
template <Word T> T load_acquire(const T *p) {
  T v;
  __atomic_load(const_cast<T *>(p), &v, __ATOMIC_ACQUIRE);
  return v;
}
template <Word T> void store_release(T *p, T v) { __atomic_store(p, &v, __ATOMIC_RELEASE); }
// Byte ranges (keys and payloads of any size) as atomic words and bytes.
void copy_in_acquire(const void *src, size_t n, void *dst);
void copy_out_release(void *dst, const void *src, size_t n);
} // namespace detail

class Tx {
public:
  explicit Tx(Mode m) : mode_(m) {}
  Mode mode() const { return mode_; }

  template <Word T> T load(const T *p) const {
    if (mode_ == Mode::kEmulated) {
      T v;
      TxEmulator::instance().read(p, sizeof(T), &v);
      return v;
    }
    return detail::load_acquire(p);
  }
  template <Word T> void store(T *p, T v) const {
    if (mode_ == Mode::kEmulated)
      TxEmulator::instance().write(p, sizeof(T), &v);
    else
      detail::store_release(p, v);
  }
  // n bytes at p into out (a key or payload of any size).
  void read(const void *p, size_t n, void *out) const {
    if (mode_ == Mode::kEmulated)
      TxEmulator::instance().read(p, n, out);
    else
      detail::copy_in_acquire(p, n, out);
  }
  void write(void *p, const void *in, size_t n) const {
    if (mode_ == Mode::kEmulated)
      TxEmulator::instance().write(p, n, in);
    else
      detail::copy_out_release(p, in, n);
  }
  // Reads n bytes for their effect on the read set (a comparison reading a
  // whole key, a lookup copying out a whole payload).
  void touch(const void *p, size_t n) const;

  // The region ran out of the spare records it was given: abort, have the
  // caller refill them outside the transaction, and retry. Only inside a
  // transaction (on the fallback path the body allocates what it needs).
  [[noreturn]] void abort_need_records() const;

private:
  Mode mode_;
};

// Whether plain accesses must go through the emulator: true once any region
// of the process runs emulated transactions.
extern std::atomic<bool> g_emulating;

// Plain (non-transactional) accesses to memory that transactions may hold.
template <Word T> T plain_load(const T *p) {
  if (!g_emulating.load(std::memory_order_relaxed))
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
  T v{};
  TxEmulator::instance().plain_access(p, sizeof(T), false, Requester::kPlain,
                                      [&] { v = __atomic_load_n(p, __ATOMIC_ACQUIRE); });
  return v;
}
template <Word T> void plain_store(T *p, T v, Requester who = Requester::kPlain) {
  if (!g_emulating.load(std::memory_order_relaxed))
    return __atomic_store_n(p, v, __ATOMIC_RELEASE);
  TxEmulator::instance().plain_access(p, sizeof(T), true, who,
                                      [&] { __atomic_store_n(p, v, __ATOMIC_RELEASE); });
}
template <Word T> bool plain_cas(T *p, T expected, T desired, Requester who = Requester::kPlain) {
  if (!g_emulating.load(std::memory_order_relaxed))
    return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
  bool done = false;
  // Only a successful CAS writes: a failed one is a read, as in the hardware.
  if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != expected)
    TxEmulator::instance().plain_access(p, sizeof(T), false, who,
                                        [&] { (void)__atomic_load_n(p, __ATOMIC_ACQUIRE); });
  else
    TxEmulator::instance().plain_access(p, sizeof(T), true, who, [&] {
      done = __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE);
    });
  return done;
}
template <Word T> T plain_fetch_add(T *p, T v) {
  if (!g_emulating.load(std::memory_order_relaxed))
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
  T old{};
  TxEmulator::instance().plain_access(p, sizeof(T), true, Requester::kPlain,
                                      [&] { old = __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); });
  return old;
}
template <Word T> T plain_fetch_and(T *p, T v) {
  if (!g_emulating.load(std::memory_order_relaxed))
    return __atomic_fetch_and(p, v, __ATOMIC_ACQ_REL);
  T old{};
  TxEmulator::instance().plain_access(p, sizeof(T), true, Requester::kPlain,
                                      [&] { old = __atomic_fetch_and(p, v, __ATOMIC_ACQ_REL); });
  return old;
}

// Announces the calling thread's operation key for the plain accesses it
// makes until the scope ends (conflicts with transactions on the same key
// are then told from those on other keys).
class OpKeyScope {
public:
  explicit OpKeyScope(uint64_t key) { TxEmulator::set_plain_key(key, true); }
  ~OpKeyScope() { TxEmulator::set_plain_key(0, false); }
  OpKeyScope(const OpKeyScope &) = delete;
  OpKeyScope &operator=(const OpKeyScope &) = delete;
};

} // namespace memlayout::trees::htm
