// Per-thread event logs: the allocation hot path.
//
// Each thread stages its events as fixed-width words in its own buffer
// (one word for a free, two for an allocation): no encoding, no lock, no
// atomic read-modify-write, one plain store publishing progress for
// exit-time flushing. When the stage fills, the thread encodes it in one
// pass into the trace format's compact varints (ldpreload/trace_format.h)
// and appends each full block to the trace, zstd-compressed where that
// pays. A tight loop over a stage that stays in L1 costs a fraction of
// encoding each event between the program's own instructions.
#pragma once

#include "options.h"
#include "spinlock.h"
#include "switch_watch.h"
#include "trace_format.h"
#include "unwind.h"
#include "unwind_state.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

inline constexpr size_t kStackCacheSlots = 256;

struct StackCacheSlot {
  uint64_t hash;
  uint32_t id;
};
struct StringCacheSlot {
  const char *ptr;
  uint64_t hash;
  uint32_t id;
};

// A staged record: word 0 holds the event's head byte (trace_format.h) in
// bits 56-63 and its pointer, if any, below; then by the head's kind
//   kAlloc  size | stack_id << 32 (usable as predicted, not an aligned api)
//   kFree   nothing
//   kStaged word 0 bits 0-7: the event's own head, 8-11: fields that follow,
//           12-19: which of them are pointers (delta-coded against the
//           previous pointer); a kTick's one field is the absolute TSC
inline constexpr uint8_t kStagedKind = 6; // a kind the trace format leaves unused
inline constexpr unsigned kStageWords = 512;
inline constexpr unsigned kMaxStagedWords = 8; // the longest record, a tick before it included

// The recorder's per-thread caches of ids, used when the unwinder's stack
// cache has no answer and for tags: apart from ThreadLog, so that the
// fields every event touches and the stage share a page.
struct ThreadCaches {
  StackCacheSlot stack_cache[kStackCacheSlots];
  StringCacheSlot string_cache[64];
};

// One mapping per thread: this, then the stage, the caches and the block.
struct ThreadLog {
  // The owning thread's, on every event. stage_pos is read by the thread
  // that flushes everybody at exit while the owner may still run: it is
  // published only once the record before it is complete.
  std::atomic<uint64_t *> stage_pos;
  uint64_t *stage_limit; // encode the stage when stage_pos reaches it
  uint32_t tick_countdown;
  uint32_t tick_period; // events between TSC samples now (stage_tick adapts it)
  // Zero once the thread was switched out since its last sample
  // (switch_watch.h): its next event samples the clock.
  uint64_t *switch_word;
  uint64_t sampled_tsc; // the last sample staged by the countdown
  uint32_t tid;
  uint64_t *stage;
  // The encoder's, under flush_lock: the block being filled.
  uint8_t *pos;
  uint8_t *limit;
  uint8_t *data;
  size_t capacity;    // of the current block: grows up to block_kib (grow_block)
  uint64_t block_tsc; // when the current block began
  uintptr_t prev_ptr;
  uint64_t last_tsc;
  uint32_t events; // in the current block
  uint64_t allocs, frees, bytes_allocated, total_events;
  SpinLock flush_lock;
  bool taken_over;       // flushed by another thread at exit; owner's data discarded
  uint8_t compress_skip; // blocks to store raw before trying zstd again
  uint64_t unwatched;    // switch_word where the thread has no rseq area: never zero
  ThreadLog *next;
  ThreadCaches *caches;
};

// The calling thread's recorder state (initial-exec TLS: no allocation, no
// lazy TLS resolution on the hot path).
struct ThreadState {
  ThreadLog *log;
  // Inside memlayout: nested allocations pass through. Set by enter_busy,
  // pin_busy or the entry points' begin, which note the owning frame.
  uint8_t busy;
  uint8_t exit_rounds; // TLS destructor rounds seen
  uint8_t retired;     // past its last TLS destructor: no more recording
  uint8_t unwatched;   // the program registers its rseq area itself: no switch watch
  uint8_t left_behind; // busy_left_behind found the mark abandoned (not on a signal stack)
  // The stack pointer of the function that set busy (UINTPTR_MAX: no frame
  // owns it). Everything memlayout calls runs below it; an entry point at or
  // above it finds a mark left behind by a jump out of a signal handler that
  // interrupted memlayout (busy_left_behind).
  uintptr_t busy_sp;
};
extern __thread ThreadState tl_state __attribute__((tls_model("initial-exec")));

enum class State : uint8_t { kUninitialized, kInitializing, kRecording, kFinished, kDisabled };
extern std::atomic<State> g_state;

// The depth at which allocations ask the unwinder's stack cache for their
// stack id first (unwind_memo), or 0 where it has none for the options.
// Set with the options, before recording starts.
extern uint32_t g_memo_depth;

// Slow path of every entry point: the thread's first event.
ThreadLog *attach_thread(ThreadState &ts);

// Encodes the staged events and writes every block they fill.
void stage_flush(ThreadLog *log);
// The same, then writes the block in progress (exit, fork, snapshots).
void flush_log(ThreadLog *log);
uint32_t stack_id(ThreadLog *log, const UnwindStart &start);
uint32_t string_id(ThreadLog *log, const char *s);

// Records from entry points; the caller holds ts.busy.
void record_alloc(ThreadState &ts, trace::Api api, void *p, size_t size, size_t align,
                  const UnwindStart &start, size_t usable);
void record_free(ThreadState &ts, trace::Api api, void *p);
void record_realloc(ThreadState &ts, trace::Api api, void *old_p, void *p, size_t size,
                    const UnwindStart &start);
void record_mark(ThreadState &ts, const char *name);
// `of_allocation`: recorded right after p's allocation, whose time it keeps
// (a pool's name on its object: the report must never see one without it).
void record_tag(ThreadState &ts, const void *p, const char *name, bool of_allocation = false);
void record_ext(ThreadState &ts, trace::ExtKind kind, uint64_t value);
// Every object live in [begin, begin + length) ends: a pool destroyed.
void record_free_range(ThreadState &ts, uintptr_t begin, size_t length);
void count_lost_event();
// An event of a thread whose log is gone (past its last TLS destructor):
// written at once where the thread retired its log, else lost.
void record_late_alloc(ThreadState &ts, trace::Api api, void *p, size_t size, size_t align,
                       size_t usable);
void record_late_free(ThreadState &ts, trace::Api api, void *p);

// Writes every thread's complete events, the process is ending: the calling
// thread's log stays usable, other threads' logs are taken over (whatever
// they record afterwards is dropped).
void flush_all_threads();
// The same from a signal handler: only what can be had without waiting for a
// lock the interrupted code may hold.
void flush_all_threads_from_signal();

struct Totals {
  uint64_t events, allocs, frees, bytes_allocated, lost;
};
Totals totals(bool from_signal = false);

// Thread exit: flushes and, on the last destructor round, retires the log.
void thread_exit(ThreadState &ts);

void recorder_prepare_fork();
void recorder_parent_after_fork();
void recorder_child_after_fork();

} // namespace memlayout::preload

// ---- Hot path, inline into every entry point --------------------------------
#include "own_heap.h"
#include "real_alloc.h"
#include "size_class.h"
#include "sys.h"

#define ML_HOT __attribute__((always_inline))

namespace memlayout::preload {

// The countdown's TSC sample; also sets how many events until the next.
void stage_tick(ThreadLog *log);
// Events that do not fit the fixed-width forms (record_alloc).
void stage_alloc_full(ThreadLog *log, trace::Api api, void *p, size_t size, size_t align,
                      uint32_t sid, size_t usable);

// The program is about to register the thread's rseq area itself: the
// thread stops watching for switches (switch_watch.h).
void stop_switch_watch(ThreadState &ts);

// After the thread waited: its next event samples the TSC (stage_tick).
inline void sample_clock_at_next_event(ThreadState &ts) {
  if (ThreadLog *log = ts.log)
    log->tick_countdown = 1;
}

// The calling function's stack pointer: read in its own frame.
ML_HOT inline uintptr_t stack_pointer() {
  uintptr_t sp;
  asm volatile("mov %%rsp, %0" : "=r"(sp));
  return sp;
}

// Marks the thread inside memlayout for the rest of the calling function; a
// nested mark leaves the outermost one's frame the owner.
ML_HOT inline void enter_busy(ThreadState &ts) {
  if (!ts.busy)
    ts.busy_sp = stack_pointer();
  ts.busy = 1;
}

// A mark that outlives the calling function (fork's prepare handler until
// the parent's and child's, the process's end): no frame owns it.
inline void pin_busy(ThreadState &ts) {
  ts.busy_sp = UINTPTR_MAX;
  ts.busy = 1;
}

// Whether the busy mark was left behind by code that never came back to
// clear it: a program's signal handler that interrupted memlayout (or the
// allocator it called) and siglongjmp'ed out, to a frame at or above the
// mark's owner. `sp`: the entry point's stack pointer. A handler running on
// the thread's alternate signal stack is not judged by address (that stack
// is anywhere). The mark stays: the code jumped out of may have held a lock
// of the recorder's, which nothing will release, so the thread's events
// from then on are counted lost rather than recorded (the summary and the
// report say how many).
bool busy_left_behind(ThreadState &ts, uintptr_t sp);

ML_HOT inline uint64_t *stage_begin(ThreadLog *log) {
  if (ML_UNLIKELY(--log->tick_countdown == 0) ||
      ML_UNLIKELY(switch_watch::switched(log->switch_word)))
    stage_tick(log);
  return log->stage_pos.load(std::memory_order_relaxed);
}

ML_HOT inline void stage_commit(ThreadLog *log, uint64_t *w) {
  log->stage_pos.store(w, std::memory_order_release);
  if (ML_UNLIKELY(w >= log->stage_limit))
    stage_flush(log);
}

ML_HOT inline uint64_t staged_word0(trace::EventKind kind, trace::Api api, const void *p) {
  return reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(trace::event_head(kind, api)) << 56;
}

ML_HOT inline size_t usable_size_of(void *p, size_t size, trace::Api api) {
  if (ML_UNLIKELY(own_heap::contains(p)))
    return own_heap::usable(p);
  switch (g_usable_model) {
  case trace::UsableModel::kGlibc:
    return glibc_usable_from_header(p);
  case trace::UsableModel::kJemalloc:
    // Aligned requests may be served from a larger class: ask for those.
    if (!trace::api_is_aligned(api))
      return jemalloc_size_class(size);
    [[fallthrough]];
  default:
    return g_real.usable_size ? g_real.usable_size(p) : size;
  }
}

// `usable` 0: from the allocator's layout (usable_size_of). Allocations the
// rules routed elsewhere (pools, padding) pass theirs.
ML_HOT inline void record_alloc(ThreadState &ts, trace::Api api, void *p, size_t size, size_t align,
                                const UnwindStart &start, size_t usable = 0) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (ML_UNLIKELY(!log))
    return record_late_alloc(ts, api, p, size, align, usable);
  // A stack the unwinder's cache verified: the id stored with it last time.
  const uint32_t *known =
      ML_LIKELY(g_memo_depth != 0) ? unwind_state::stack_memo(start, g_memo_depth) : nullptr;
  uint32_t sid = ML_LIKELY(known != nullptr) ? *known : stack_id(log, start);
  if (!usable)
    usable = usable_size_of(p, size, api);
  if (ML_UNLIKELY(trace::api_is_aligned(api) || size >> 32 ||
                  reinterpret_cast<uintptr_t>(p) >> 56 ||
                  usable != trace::predicted_usable(g_usable_model, size)))
    return stage_alloc_full(log, api, p, size, align, sid, usable);
  uint64_t *w = stage_begin(log);
  w[0] = staged_word0(trace::EventKind::kAlloc, api, p);
  w[1] = size | static_cast<uint64_t>(sid) << 32;
  stage_commit(log, w + 2);
}

// Called before the real free, while the block is still ours: a thread that
// gets the same address next cannot have recorded its allocation earlier.
ML_HOT inline void record_free(ThreadState &ts, trace::Api api, void *p) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (ML_UNLIKELY(!log))
    return record_late_free(ts, api, p);
  uint64_t *w = stage_begin(log);
  w[0] = staged_word0(trace::EventKind::kFree, api, p); // user pointers are below 2^56
  stage_commit(log, w + 1);
}

} // namespace memlayout::preload
