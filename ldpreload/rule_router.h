// Routing allocations by segregation rules (`memlayout record --rules`,
// `memlayout run`): which rule, if any, an allocation falls under, decided by
// its allocation site (inspector/alloc_site.h) and size.
//
// The CLI hands over a route table (route_table_format.h) labelling the code
// of the program and its libraries: ranges whose allocations belong to sites
// that rules name, and wrapper code whose allocations are decided by the
// caller's frame. Modules the table does not list (loaded later) are labelled
// from their symbol tables by the rules' and wrappers' names.
//
// Decisions are cached per (return address, size): an allocation no rule can
// match costs one probe. One that leaves wrapper code costs an unwind of the
// frames up to its site, whose decision is cached in turn.
#pragma once

#include "seg_core.h"
#include "unwind.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

struct ThreadState;

// What to do with a matched allocation.
struct Route {
  std::atomic<seg::Pool *> pool; // made at the route's first allocation (route_pool)
  const char *name;              // the rule's pool, the objects' tag in the trace; NULL: none
  size_t pad;                    // at least this many bytes (0: the requested size)
  size_t align;                  // at least this alignment (0: none)
  uint64_t size_min;             // the rule's size range (inclusive)
  uint64_t size_max;
  unsigned index; // the rule's position
};

// Set once rules are loaded; read on every allocation.
extern bool g_routing;
// Set once any pool exists (from rules or from the seg API): frees check
// pool ownership only then.
extern std::atomic<bool> g_pools_exist;

// Reads MEMLAYOUT_RULES (the rules' text, checked by the CLI) and
// MEMLAYOUT_ROUTE_TABLE, opens the pools and labels the loaded code. Called
// once from initialize().
void router_init();
// Re-labels code after the set of loaded modules changed.
void router_modules_changed();

// A cached decision: `decision` is size << 8 | kind, kind 0 for "no rule",
// rule index + 1, kDecideByCaller (wrapper code), kUnnamedFrame (code no
// function name covers: pending, route_table_format.h), or kInWrapper | 0
// or a rule index + 1 (a tail-called function's return address in wrapper
// code). Written under a per-entry seqlock (pc 1 = being written), so a
// reader never takes one entry's decision for another's.
struct RouteCacheEntry {
  std::atomic<uintptr_t> pc;
  std::atomic<uint64_t> decision;
};
inline constexpr size_t kRouteCacheSize = 4096; // 1 << (64 - 52)
inline constexpr size_t kMaxCachedSize = size_t{1} << 40;
inline constexpr uint64_t kDecideByCaller = 0xff;
inline constexpr uint64_t kUnnamedFrame = 0xfe;
inline constexpr uint64_t kInWrapper = 0x80;
inline constexpr uint64_t kMaxRuleKind = 64; // kinds 1..64 name a rule
extern RouteCacheEntry g_route_cache[kRouteCacheSize];
extern Route g_routes[64];

inline size_t route_slot(uintptr_t pc, size_t size) {
  // Fibonacci hashing: the high bits of the product mix every bit of both.
  return ((pc + size * 0xD6E8FEB86659FD93ull) * 0x9E3779B97F4A7C15ull) >> 52;
}

// The decision for one frame's return address: kind as in RouteCacheEntry.
uint64_t frame_decision_slow(uintptr_t pc, size_t size);

inline uint64_t frame_decision(uintptr_t pc, size_t size) {
  if (__builtin_expect(size < kMaxCachedSize, 1)) {
    RouteCacheEntry &e = g_route_cache[route_slot(pc, size)];
    if (__builtin_expect(e.pc.load(std::memory_order_acquire) == pc, 1)) {
      uint64_t d = e.decision.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (__builtin_expect(e.pc.load(std::memory_order_relaxed) == pc && (d >> 8) == size, 1))
        return d & 0xff;
    }
  }
  return frame_decision_slow(pc, size);
}

// The allocation's first frame did not decide (`first`: its kind, one of
// kDecideByCaller, kUnnamedFrame, kInWrapper | k): decide by the frames
// above, as alloc_site() does.
const Route *route_by_callers(const UnwindStart &start, size_t size, uint64_t first);

// The route for an allocation of `size` bytes whose entry point returns as
// `start` says, or NULL. Once cached: one probe, two compares.
inline const Route *route_for(const UnwindStart &start, size_t size) {
  uint64_t kind = frame_decision(start.pc, size);
  if (__builtin_expect(kind == 0, 1))
    return nullptr;
  if (__builtin_expect(kind <= kMaxRuleKind, 1))
    return &g_routes[kind - 1];
  return route_by_callers(start, size, kind);
}

// Set by the lifecycle: makes sure the thread-exit destructor runs for the
// calling thread (router_thread_exit folds its counts).
extern void (*g_arm_thread_exit)();

// The route's pool, made at its first allocation, or NULL: the route has
// none, or it could not be made (its allocations then go to the program's
// allocator with the rule's pad and align; a warning says so once). Not at
// start: each pool reserves 64 GiB of address space, which a program that
// lowers its RLIMIT_AS afterwards would find spent, every allocation of its
// own failing. `ts`: the calling thread's recorder state, marked busy while
// the pool is made, so what that allocates passes through unrouted.
seg::Pool *make_route_pool(const Route &r, ThreadState &ts);
inline seg::Pool *route_pool(const Route &r, ThreadState &ts) {
  seg::Pool *p = r.pool.load(std::memory_order_acquire);
  if (__builtin_expect(p != nullptr, 1) || !r.name)
    return p;
  return make_route_pool(r, ts);
}

// Counts an allocation a rule routed (per thread, summed at exit).
void count_routed(const Route &r, size_t size);

// At process exit (run mode): appends this process's per-rule counts to the
// file MEMLAYOUT_RULE_STATS names, for the CLI's summary.
void router_write_stats();
// The rules record of a trace (record mode): the rules' text, wrapper
// declarations and per-rule counts, encoded as trace_format.h says. Returns
// its length in buf (0 when there are no rules or it does not fit).
size_t router_encode_stats(uint8_t *buf, size_t cap);
// After fork, in the child: counts start from zero.
void router_child_after_fork();
// Thread exit: folds the thread's counts into the process totals.
void router_thread_exit();

} // namespace memlayout::preload
