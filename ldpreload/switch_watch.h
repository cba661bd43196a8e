// Whether the calling thread was switched out since it last looked, for the
// price of one load: through restartable sequences (rseq), which glibc
// registers for every thread.
//
// A thread's events carry its last TSC sample, taken every so many events.
// A thread switched out between a sample and its next events (preempted, or
// waiting on a lock or a condition variable) stamps them with a time from
// before the wait, milliseconds early with more threads than CPUs, and the
// reader then orders an address's free and its next allocation by other
// threads the wrong way round. Knowing the thread was switched out, its next
// event samples the clock instead.
//
// The kernel, returning to a thread after any context switch (preemption,
// a blocking system call, migration) or before a signal handler, clears the
// thread's rseq_cs pointer unless the thread is inside the critical section
// it describes. So a pointer to a descriptor of code that never runs stays
// set exactly until the thread is next switched out. The kernel validates the
// descriptor each time it looks (a bad one kills the thread with SIGSEGV):
// its abort address follows glibc's signature, RSEQ_SIG.
#pragma once

#include <cstdint>

namespace memlayout::preload::switch_watch {

// The calling thread's word: zero once the thread was switched out since the
// last arm(). nullptr where glibc registered no rseq area for the thread
// (glibc before 2.35, GLIBC_TUNABLES=glibc.pthread.rseq=0, a kernel or a
// seccomp filter without rseq), or the program registered it again with a
// signature of its own: the caller then watches a word of its own that
// never reads zero, and samples by its countdown alone. One system call.
uint64_t *thread_word();

inline bool switched(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_RELAXED) == 0; }

// Starts watching again: switched() reads false until the next switch.
void arm(uint64_t *word);

// Takes the recorder's pointer out of the thread's rseq area, before the
// program registers the area again itself (the `syscall` interposer): a
// registration with a signature of its own would make the kernel kill the
// thread over the recorder's descriptor. The thread then samples by its
// count of events alone.
void disarm(uint64_t *word);

} // namespace memlayout::preload::switch_watch
