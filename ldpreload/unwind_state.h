// The unwinder's per-thread state and its cache of whole stacks: internal to
// unwind.cpp, except the cache's hit check (stack_memo), which the recorder
// runs inline on every allocation: a call, its spills and the checks of the
// general entry point cost as many instructions as the check itself.
#pragma once

#include "unwind.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::preload::unwind_state {

enum class StackState : uint8_t { kUninit, kBusy, kReady, kFailed };

struct StackCache;

// Every stack read is confined to [start.sp, hi): all frames of interest lie
// above the entry point's frame, and everything between a live sp and the top
// of its stack is mapped. `lo` only serves to decide whether start.sp is on
// the thread's own stack at all (not on a sigaltstack or a coroutine stack).
struct Thread {
  uintptr_t lo, hi;
  StackState state;
  bool main_stack;
  bool stack_cache_busy; // a signal handler interrupting a walk must not share its entry
  // Inside dl_iterate_phdr. Its lock is recursive, but a signal handler that
  // interrupts the lock or unlock itself and asks again deadlocks: nested
  // walks (signal handlers) must not call it meanwhile.
  bool in_loader;
  bool refused; // a rule was refused for that reason during the current walk
  // Inside the program's pthread_getattr_np, which holds the thread's lock
  // while it reallocs: learning the bounds by calling it again would wait
  // for that lock forever (Ruby's threads do this first thing).
  uint8_t in_getattr;
  StackCache *stack_cache;
  uint32_t check_countdown;         // unwinds left until the periodic module check
  uintptr_t code_lo[2], code_hi[2]; // kFramePointer's recently matched text ranges
};
// __thread, not thread_local: an extern thread_local of class type is reached
// through a TLS wrapper call.
extern __thread Thread t_thread __attribute__((tls_model("initial-exec")));

// dl_iterate_phdr's load count as last seen, and the rule cache's generation
// (bumped on unload): cached facts about addresses hold for one pair.
extern std::atomic<uint64_t> g_seen_adds;
extern std::atomic<uint32_t> g_epoch;

// Per-thread cache of whole stacks. A walk is a deterministic function of
// (start.pc, start.sp, start.fp), the values it read from the stack and the
// rules, so a stack whose recorded slots all still hold the recorded values,
// under the same rule generation, unwinds to the recorded frames. Checking
// that takes independent loads instead of a chain of dependent lookups.
// A real program allocates from hundreds of stacks (sqlite: 453); an entry
// is touched only when used, so unused ones cost address space alone.
inline constexpr unsigned kStackCacheBits = 8;
inline constexpr size_t kStackCacheEntries = size_t{1} << kStackCacheBits;
inline constexpr size_t kStackCacheFrames = 32;
inline constexpr size_t kStackCacheReads = 32; // walks that read more stay uncached

// A stack slot the walk read: its offset from sp and the value it held. In
// pairs, so that checking a short stack touches a line or two.
struct SlotRead {
  uint64_t off;
  uintptr_t val;
};

// Line-aligned, the reads starting on a line of their own: a hit on a stack
// of up to four slots reads two lines (misaligned, three).
struct alignas(64) StackEntry {
  uintptr_t pc, sp, fp;
  uintptr_t stack_hi; // the slots were in bounds for this stack (a sigaltstack may change)
  uint64_t tag;       // stack_entry_tag it was computed under; 0 = empty
  uint32_t n;         // frames
  uint32_t nreads;    // even: an odd count repeats its last read
  uint32_t memo;      // the caller's, for this stack; 0 when filled
  uint32_t unused[3];
  SlotRead reads[kStackCacheReads];
  uintptr_t frames[kStackCacheFrames];
};
static_assert(offsetof(StackEntry, reads) == 64);
static_assert(kStackCacheReads % 2 == 0);

struct StackCache {
  StackEntry entries[kStackCacheEntries];
  StackCache *next_free;
};

// What an entry's tag must be to serve a walk now: the rule generation, the
// load count and the depth asked for, with bit 63 set (0 means empty).
inline uint64_t stack_entry_tag(uint16_t epoch, uint32_t adds, size_t max_depth) {
  return uint64_t{1} << 63 | static_cast<uint64_t>(max_depth) << 48 | uint64_t{epoch} << 32 | adds;
}

inline StackEntry &stack_entry_for(StackCache *cache, const UnwindStart &start) {
  uintptr_t h = (start.pc ^ (start.sp >> 4)) * 0x9E3779B97F4A7C15ull;
  return cache->entries[h >> (64 - kStackCacheBits)];
}

// Whether every slot the entry's walk read still holds what it read, with
// sp = start.sp (the caller compared that). Branch-free over pairs.
__attribute__((always_inline)) inline bool stack_entry_slots_match(const StackEntry &e,
                                                                   uintptr_t sp) {
  uintptr_t diff = 0;
  for (uint32_t i = 0; i < e.nreads; i += 2)
    diff |= (*reinterpret_cast<const uintptr_t *>(sp + e.reads[i].off) ^ e.reads[i].val) |
            (*reinterpret_cast<const uintptr_t *>(sp + e.reads[i + 1].off) ^ e.reads[i + 1].val);
  return diff == 0;
}

// Whether the entry is the walk of this very stack: filled under `tag` from
// the same start, on the stack ending at `stack_hi`, and every slot it read
// still holds what it read.
__attribute__((always_inline)) inline bool
stack_entry_holds(const StackEntry &e, uint64_t tag, const UnwindStart &start, uintptr_t stack_hi) {
  return e.tag == tag && e.pc == start.pc && e.sp == start.sp && e.fp == start.fp &&
         e.stack_hi == stack_hi && stack_entry_slots_match(e, start.sp);
}

// unwind_memo's kCfi case (unwind.h), 2 <= max_depth <= kStackCacheFrames.
__attribute__((always_inline)) inline uint32_t *stack_memo(const UnwindStart &start,
                                                           size_t max_depth) {
  Thread &t = t_thread;
  StackCache *cache = t.stack_cache;
  if (!cache || t.stack_cache_busy || t.check_countdown <= 1 || t.state != StackState::kReady ||
      start.sp < t.lo || start.sp >= t.hi) [[unlikely]]
    return nullptr;
  --t.check_countdown;
  t.stack_cache_busy = true;
  std::atomic_signal_fence(std::memory_order_seq_cst); // visible to our own handlers
  const uint64_t tag = stack_entry_tag(
      static_cast<uint16_t>(g_epoch.load(std::memory_order_acquire)),
      static_cast<uint32_t>(g_seen_adds.load(std::memory_order_relaxed)), max_depth);
  StackEntry &e = stack_entry_for(cache, start);
  uint32_t *memo = nullptr;
  if (e.memo && stack_entry_holds(e, tag, start, t.hi))
    memo = &e.memo;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.stack_cache_busy = false;
  return memo;
}

} // namespace memlayout::preload::unwind_state

namespace memlayout::preload {

// max_depth where unwind_memo can answer for that method and depth, else 0.
inline uint32_t unwind_memo_depth(UnwindMethod method, size_t max_depth) {
  bool cached = method == UnwindMethod::kCfi && max_depth >= 2 &&
                max_depth <= unwind_state::kStackCacheFrames;
  return cached ? static_cast<uint32_t>(max_depth) : 0;
}

// The memo word unwind() would hand out for this stack when the stack cache
// knows it and the caller already stored something there (non-zero), else
// NULL: the caller then calls unwind(). Costs a few loads and compares per
// frame instead of a walk, and fills no frames.
__attribute__((always_inline)) inline uint32_t *
unwind_memo(UnwindMethod method, const UnwindStart &start, size_t max_depth) {
  if (!unwind_memo_depth(method, max_depth))
    return nullptr;
  return unwind_state::stack_memo(start, max_depth);
}

} // namespace memlayout::preload
