// A virtual parallel machine for the emulator: the threads that join run one
// transactional access at a time, in turn, round-robin, as if each had a
// core of its own and every core made one access per step. Conflicts then
// arise as they would between threads running in parallel at equal speed,
// whatever the real machine's cores and load (a 2-core VM shared with other
// jobs gives threads little real overlap). Slow — each step hands the turn
// to another thread — but it is the classification that matters.
//
// Step points: each emulated access, begin and commit, each plain access,
// and every spin of a wait (htm::pause): a thread waiting for a lock passes
// its turn, so the holder can progress. Code between step points (including
// a whole fallback-path execution) runs while its thread holds the turn.
#pragma once

namespace memlayout::trees::htm {

// Joins the calling thread for its lifetime (waits until `together` threads
// have joined, then for its first turn); leaves when destroyed.
class LockstepScope {
public:
  explicit LockstepScope(unsigned together = 1);
  ~LockstepScope();
  LockstepScope(const LockstepScope &) = delete;
  LockstepScope &operator=(const LockstepScope &) = delete;
};

// Passes the turn to the next thread and waits for it to come back; nothing
// when the calling thread has not joined.
void lockstep_step();
bool lockstep_joined();

// One spin of a wait inside the HTM layer and the HTM trees: passes the turn
// in lockstep, else backs off as every spinning wait in trees/ does.
void pause(unsigned attempt);

} // namespace memlayout::trees::htm
