// The recorder's options: one table, read once from the environment that
// `memlayout record` sets up (or a user sets by hand with LD_PRELOAD).
#pragma once

#include "trace_format.h"
#include "unwind.h"

#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

enum class AllocatorMode : uint8_t { kNative, kJemalloc };

struct Options {
  char output[4096];        // MEMLAYOUT_OUTPUT: trace path of the root process
  AllocatorMode allocator;  // MEMLAYOUT_ALLOCATOR: native | jemalloc
  UnwindMethod unwind;      // MEMLAYOUT_UNWIND: fp | cfi | dwarf
  uint32_t stack_depth;     // MEMLAYOUT_STACK_DEPTH: frames per call site, 1..64
  bool follow_children;     // MEMLAYOUT_FOLLOW_CHILDREN: keep recording across exec
  uint32_t root_pid;        // MEMLAYOUT_ROOT_PID: the process whose trace is `output`
  uint32_t tick_period;     // MEMLAYOUT_TICK_PERIOD: events per TSC sample, 1..4096
  uint32_t tick_period_max; // adaptive up to this; = tick_period when that was set
  uint32_t block_kib;       // MEMLAYOUT_BLOCK_KIB: a thread's largest block, 16..4096
  int zstd_level;           // MEMLAYOUT_ZSTD_LEVEL: -7..9
  bool page_frames;         // MEMLAYOUT_PAGEMAP: read PFNs at snapshots (0 disables)
  uint32_t exec_generation; // MEMLAYOUT_EXEC_GEN=PID:N: execs this pid went through
  bool route_only;          // MEMLAYOUT_MODE=run: apply MEMLAYOUT_RULES, record nothing
  char notes[4096];         // MEMLAYOUT_NOTES: file to append the programs started unrecorded to
};

using trace::kMaxStackDepth;

extern Options g_options;

// Reads the environment. Never allocates; on a bad value warns once on stderr
// and keeps the default, so a typo never takes the program down.
void load_options(Options *out);

// The trace path for this process: `output` for the root process's first
// image, else `output` with ".PID" (and ".N" after the Nth exec) inserted
// before its extension. Returns false if it does not fit.
bool trace_path_for(const Options &o, uint32_t pid, char *buf, size_t cap);

} // namespace memlayout::preload
