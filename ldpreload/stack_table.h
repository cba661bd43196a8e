// Interning of call stacks and strings into small integer ids, and the
// kStacks/kStrings records that define those ids in the trace.
//
// Threads look ids up in a private cache first (recorder.cpp); only the
// first sighting of a stack in a thread comes here, under one lock. Entries
// reach the file before any event block that uses them: a thread writes
// pending entries before its own block (flush_pending), and entries are
// added before the event that names them is recorded.
#pragma once

#include "spinlock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

inline uint64_t hash_frames(const uintptr_t *frames, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (size_t i = 0; i < n; ++i) {
    h ^= frames[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h | 1; // 0 marks an empty cache slot
}

class Dictionary {
public:
  uint32_t intern_stack(const uintptr_t *frames, size_t depth, uint64_t hash);
  uint32_t intern_string(const char *s);

  // Writes every entry the trace does not have yet.
  void flush_pending();
  // From a signal handler: the interrupted code may hold the lock.
  void flush_pending_if_unlocked();
  bool has_pending() const { return pending_.load(std::memory_order_acquire); }

  void prepare_fork() { lock_.lock(); }
  void parent_after_fork() { lock_.unlock(); }
  // The child's trace is a new file: define every id again there.
  void child_after_fork();

  uint32_t stacks() const { return next_id_ - 1; }

private:
  struct Entry;
  bool reserve(size_t bytes);
  Entry *find_or_add(uint8_t kind, const void *data, size_t len, uint64_t hash, bool *added);
  bool grow_table();
  void flush_locked();

  SpinLock lock_;
  std::atomic<bool> pending_{false};
  unsigned char *arena_ = nullptr; // entries, in id order
  size_t arena_used_ = 0, arena_cap_ = 0;
  size_t written_ = 0;        // arena bytes already in the trace
  uint64_t *slots_ = nullptr; // open addressing: arena offset + 1, 0 = empty
  size_t nslots_ = 0, nentries_ = 0;
  uint32_t next_id_ = 1;
  unsigned char *scratch_ = nullptr;
  size_t scratch_cap_ = 0;
};

extern Dictionary g_dictionary;

} // namespace memlayout::preload
