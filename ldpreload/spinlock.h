// A test-and-test-and-set lock for the recorder's rare paths (new stacks,
// block writes, thread registration). pthread mutexes would do, but these
// locks are also taken around fork() and from exit paths where a plain
// word is simpler to reason about.
#pragma once

#include <atomic>

namespace memlayout::preload {

class SpinLock {
public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed))
        __builtin_ia32_pause();
  }
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() { flag_.store(false, std::memory_order_release); }
  // After fork() only the forking thread exists: whoever held the lock is gone.
  void reset_after_fork() { flag_.store(false, std::memory_order_relaxed); }

private:
  std::atomic<bool> flag_{false};
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
