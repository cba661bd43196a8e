// The spin locks of the lock-based trees' records (occ-avl, log-int, citrus)
// and the back-off every spinning wait in trees/ uses.
//
// A record layout derives from one lock kind and so gets its `Lock` type and
// the static init_lock / lock / try_lock / unlock the tree calls:
//   struct FooBaselineLayout : PthreadSpinLock { struct Node { ... Lock lock; }; };
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace memlayout::trees {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// A waiting thread gives the CPU away now and then: the holder may have been
// preempted (the tests run more threads than this machine has cores).
inline void back_off(unsigned attempt) {
  if (attempt % 64 == 63)
    std::this_thread::yield();
  else
    cpu_relax();
}

// The published builds' lock: glibc's pthread spin lock, 4 bytes. Only the
// pthread calls touch it: glibc's x86-64 lock word is 1 when free and 0 when
// held, so its representation is not ours to read. Waiting goes through
// trylock and back_off rather than pthread_spin_lock, which never yields.
struct PthreadSpinLock {
  using Lock = pthread_spinlock_t;
  static void init_lock(Lock &l) { pthread_spin_init(&l, PTHREAD_PROCESS_PRIVATE); }
  static bool try_lock(Lock &l) { return pthread_spin_trylock(&l) == 0; }
  static void lock(Lock &l) {
    for (unsigned attempt = 0; !try_lock(l); ++attempt)
      back_off(attempt);
  }
  static void unlock(Lock &l) { pthread_spin_unlock(&l); }
};

// A test-and-test-and-set lock in a word of its own, 0 when free and 1 when
// held. The study's fixed layouts' lock is 4 bytes (WordSpinLock); one byte
// (ByteSpinLock) where the 3 more would take a record past its size class or
// its search fields' line.
template <class Word> struct TasSpinLock {
  using Lock = std::atomic<Word>;
  static void init_lock(Lock &l) { l.store(0, std::memory_order_relaxed); }
  static bool try_lock(Lock &l) {
    return l.load(std::memory_order_relaxed) == 0 && l.exchange(1, std::memory_order_acquire) == 0;
  }
  static void lock(Lock &l) {
    for (unsigned attempt = 0; !try_lock(l); ++attempt)
      back_off(attempt);
  }
  static void unlock(Lock &l) { l.store(0, std::memory_order_release); }
};
using WordSpinLock = TasSpinLock<uint32_t>;
using ByteSpinLock = TasSpinLock<uint8_t>;

// Holds a node's `lock` field for its scope; L is the tree's record layout.
template <class L> class NodeLockGuard {
public:
  explicit NodeLockGuard(typename L::Node *n) : node_(n) { L::lock(n->lock); }
  ~NodeLockGuard() { L::unlock(node_->lock); }
  NodeLockGuard(const NodeLockGuard &) = delete;
  NodeLockGuard &operator=(const NodeLockGuard &) = delete;

private:
  typename L::Node *node_;
};

} // namespace memlayout::trees
