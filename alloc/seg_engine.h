// Process-wide state of the pool engine: one lock over the pool table and the
// thread-cache registry, set up once with jemalloc, a thread-exit key and
// fork handlers.
#pragma once

namespace memlayout::seg {

// Lock order: the engine lock, then jemalloc's mutexes (mallctl is called
// under it). The extent hooks never take it.
void engine_lock();
void engine_unlock();

class EngineLock {
public:
  EngineLock() { engine_lock(); }
  ~EngineLock() { engine_unlock(); }
  EngineLock(const EngineLock &) = delete;
  EngineLock &operator=(const EngineLock &) = delete;
};

// Under the lock. Initialises jemalloc, then registers the fork handlers
// (after jemalloc's own, so they take the engine lock before jemalloc's
// mutexes) and the key whose destructor releases a thread's caches.
// False (errno set) if jemalloc cannot start.
bool engine_start_locked();

// Arms the thread-exit destructor for the calling thread (once).
void arm_thread_exit();

} // namespace memlayout::seg
