// The recorder's lock for its rare paths (new stacks, block writes, thread
// registration, its own mappings): a word with a short spin, then a futex.
// pthread mutexes would do, but these locks are also taken around fork()
// and from exit paths, where a plain word is simpler to reason about.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memlayout::preload {

// One step of waiting for a word another thread will change (not a lock:
// those are SpinLocks): a few pauses, then the CPU given away, since with
// more threads than cores that thread may be preempted. Raw system calls,
// not nanosleep(): that is a cancellation point, and a thread cancelled
// here may hold recorder locks. Keeps errno.
inline void wait_a_little(unsigned &spins) {
  if (spins < 128) {
    ++spins;
    __builtin_ia32_pause();
    return;
  }
  int saved = errno;
  if (spins < 160) {
    ++spins;
    syscall(SYS_sched_yield);
  } else {
    timespec pause = {0, 20 * 1000};
    syscall(SYS_nanosleep, &pause, nullptr);
  }
  errno = saved;
}

// Waiters sleep in the kernel once a short spin fails: with hundreds of
// threads on two cores the holder is often preempted, and waiters that
// poll, even with sleeps, take the CPU it needs (500 threads flushing at
// exit took seconds to minutes). Raw futex calls: no cancellation points.
class SpinLock {
public:
  void lock() {
    uint32_t c = 0;
    if (state_.compare_exchange_strong(c, 1, std::memory_order_acquire))
      return;
    for (int i = 0; i < 128; ++i) {
      __builtin_ia32_pause();
      c = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_strong(c, 1, std::memory_order_acquire))
        return;
    }
    // 2: held, and someone may sleep on it (unlock must wake).
    c = state_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
      futex(FUTEX_WAIT_PRIVATE, 2);
      c = state_.exchange(2, std::memory_order_acquire);
    }
  }
  bool try_lock() {
    uint32_t c = 0;
    return state_.compare_exchange_strong(c, 1, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2)
      futex(FUTEX_WAKE_PRIVATE, 1);
  }
  // After fork() only the forking thread exists: whoever held the lock is gone.
  void reset_after_fork() { state_.store(0, std::memory_order_relaxed); }

private:
  void futex(int op, uint32_t value) {
    int saved = errno;
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&state_), op, value, nullptr, nullptr, 0);
    errno = saved;
  }
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  std::atomic<uint32_t> state_{0};
};

class LockGuard {
public:
  explicit LockGuard(SpinLock &l) : l_(l) { l_.lock(); }
  ~LockGuard() { l_.unlock(); }
  LockGuard(const LockGuard &) = delete;
  LockGuard &operator=(const LockGuard &) = delete;

private:
  SpinLock &l_;
};

} // namespace memlayout::preload
