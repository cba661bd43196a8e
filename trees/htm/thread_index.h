// A small dense number for each live thread (0, 1, ...), reused after the
// thread exits: the index of its per-thread slots in the emulator, in the
// regions' statistics and in the trees' spare records.
#pragma once

#include <cstdint>

namespace memlayout::trees::htm {

// memlayout-bench takes up to 1024 workers; the main thread and test
// drivers need a few more.
inline constexpr uint32_t kMaxThreads = 1088;

// The calling thread's index, assigned on first use. Aborts the process with
// a message when more than kMaxThreads threads are alive at once.
uint32_t thread_index();

// One more than the highest index handed out so far: loops over every
// thread's slot stop there.
uint32_t thread_index_bound();

} // namespace memlayout::trees::htm
