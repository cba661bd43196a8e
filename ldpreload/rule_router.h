// Routing allocations by segregation rules (`memlayout record --segregate`,
// `memlayout run`): which rule, if any, an allocation falls under, decided by
// its call site (return address) and size.
//
// Function rules resolve to address ranges from the ELF symbol tables of the
// loaded modules (static functions included where .symtab survives), again
// after each dlopen. The decision for a return address is cached, so the hot
// path is one hash probe plus a size compare per candidate rule.
#pragma once

#include "seg_core.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

// What to do with a matched allocation.
struct Route {
  seg::Pool *pool;   // NULL: the program's allocator with pad/align
  size_t pad;        // at least this many bytes (0: the requested size)
  size_t align;      // at least this alignment (0: none)
  const char *name;  // pool name: the objects' tag in the trace
  uint64_t size_min; // the rule's size range (inclusive)
  uint64_t size_max;
};

// Set once rules are loaded; read on every allocation.
extern bool g_routing;
// Set once any pool exists (from rules or from the seg API): frees check
// pool ownership only then.
extern std::atomic<bool> g_pools_exist;

// Reads MEMLAYOUT_RULES (the rules' text, checked by the CLI), opens the
// pools and resolves function rules. Called once from initialize().
void router_init();
// Re-resolves function rules after the set of loaded modules changed.
void router_modules_changed();

// The slow path of route_for: decides from the function ranges and the
// rules, and caches the decision.
const Route *route_slow(uintptr_t pc, size_t size);

// A cached decision: `decision` is size << 8 | (rule index + 1), 0 in the low
// byte for "no rule". Written under a per-entry seqlock (pc 1 = being
// written), so a reader never takes one entry's decision for another's.
struct RouteCacheEntry {
  std::atomic<uintptr_t> pc;
  std::atomic<uint64_t> decision;
};
inline constexpr size_t kRouteCacheSize = 4096; // 1 << (64 - 52)
inline constexpr size_t kMaxCachedSize = size_t{1} << 40;
extern RouteCacheEntry g_route_cache[kRouteCacheSize];
extern Route g_routes[64];

inline size_t route_slot(uintptr_t pc, size_t size) {
  // Fibonacci hashing: the high bits of the product mix every bit of both.
  return ((pc + size * 0xD6E8FEB86659FD93ull) * 0x9E3779B97F4A7C15ull) >> 52;
}

// The route for an allocation of `size` bytes whose entry point returns to
// pc, or NULL. Once cached: one probe, two compares.
inline const Route *route_for(uintptr_t pc, size_t size) {
  if (__builtin_expect(size < kMaxCachedSize, 1)) {
    RouteCacheEntry &e = g_route_cache[route_slot(pc, size)];
    if (__builtin_expect(e.pc.load(std::memory_order_acquire) == pc, 1)) {
      uint64_t d = e.decision.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (__builtin_expect(e.pc.load(std::memory_order_relaxed) == pc && (d >> 8) == size, 1))
        return (d & 0xff) ? &g_routes[(d & 0xff) - 1] : nullptr;
    }
  }
  return route_slow(pc, size);
}

} // namespace memlayout::preload
