// The file `memlayout replay` hands its worker: a recorded allocation
// sequence, in the merged order of all threads, with the rule that routes
// each allocation. The worker executes it against the real allocator in a
// fresh process and writes back where each object landed.
#pragma once

#include <cstdint>

namespace memlayout::replay {

inline constexpr char kOpsMagic[8] = {'M', 'L', 'R', 'P', 'L', 'Y', '1', '\0'};

enum class ReplayAllocator : uint32_t { kGlibc = 0, kJemalloc = 1 };

struct OpsHeader {
  char magic[8];
  uint32_t allocator; // ReplayAllocator
  uint32_t threads;   // recorded threads, each replayed by a thread of its own
  uint32_t routes;
  // The page offset (+1; 0 = none) the recording gave the main thread's
  // first small allocation from the allocator itself. glibc's
  // pthread_create takes each new thread's DTV from the main heap, which the
  // worker starts its threads before any op and the program did later (the
  // trace has those callocs as ops): the worker pads the main heap back to
  // this offset, so lines and sets fall as they did.
  uint32_t main_first_page_offset;
  uint64_t ops;
};

inline constexpr uint32_t kNoPool = UINT32_MAX;

struct OpsRoute {
  char pool[64]; // "" = the allocator itself, padded and aligned
  uint64_t pad, align;
  uint32_t huge_pages;
  uint32_t reserved;
};

// kExit: the op's thread ends there (the recorded thread ended before the
// next op), and the worker's main thread waits for it: its caches are the
// allocator's again before any op after it runs. Never the main thread's.
enum class OpKind : uint8_t { kAlloc = 0, kFree = 1, kRealloc = 2, kExit = 3 };

inline constexpr uint8_t kNoRoute = 0xff;
inline constexpr uint64_t kNoRef = UINT64_MAX;

struct Op {
  OpKind kind;
  uint8_t route;   // index into the routes, or kNoRoute
  uint16_t thread; // 0 .. threads-1
  uint32_t reserved;
  uint64_t size;  // alloc, realloc: requested bytes
  uint64_t align; // alloc: alignment asked for (0: none)
  uint64_t ref;   // free, realloc: the op that placed the object, or kNoRef
};

// Written back, one per op (zeros for frees).
struct OpResult {
  uint64_t addr;
  uint64_t usable;
};

} // namespace memlayout::replay
