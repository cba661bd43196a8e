// Per-thread event logs: the allocation hot path.
//
// Each thread appends compact, delta-coded events to its own mmap'd block
// without locks or atomics (one plain store publishes progress for exit-time
// flushing). A full block is zstd-compressed and appended to the trace by the
// thread that filled it. See ldpreload/trace_format.h for the encoding.
#pragma once

#include "options.h"
#include "spinlock.h"
#include "trace_format.h"
#include "unwind.h"

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

struct ThreadLog {
  // Written only by the owning thread.
  uint8_t *pos;
  uint8_t *limit;
  uintptr_t prev_ptr;
  uint64_t last_tsc;
  uint32_t tick_countdown;
  uint32_t events; // in the current block
  uint64_t allocs, frees, bytes_allocated, total_events;
  uint8_t *data;
  size_t capacity;
  uint32_t tid;
  // offset << 32 | events of the current block that are complete: read by the
  // thread that flushes everybody at exit while the owner may still run.
  std::atomic<uint64_t> committed;
  SpinLock flush_lock;
  bool taken_over;       // flushed by another thread at exit; owner's data discarded
  uint8_t compress_skip; // blocks to store raw before trying zstd again
  ThreadLog *next;
  StackCacheSlot stack_cache[kStackCacheSlots];
  StringCacheSlot string_cache[64];
};

// The calling thread's recorder state (initial-exec TLS: no allocation, no
// lazy TLS resolution on the hot path).
struct ThreadState {
  ThreadLog *log;
  uint8_t busy;        // inside memlayout: nested allocations pass through
  uint8_t exit_rounds; // TLS destructor rounds seen
  uint8_t retired;     // past its last TLS destructor: no more recording
};
extern __thread ThreadState tl_state __attribute__((tls_model("initial-exec")));

enum class State : uint8_t { kUninitialized, kInitializing, kRecording, kFinished, kDisabled };
extern std::atomic<State> g_state;

// Slow path of every entry point: the thread's first event.
ThreadLog *attach_thread(ThreadState &ts);

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
void record_tag(ThreadState &ts, const void *p, const char *name);
void record_ext(ThreadState &ts, trace::ExtKind kind, uint64_t value);
void count_lost_event();

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
#include "real_alloc.h"
#include "size_class.h"
#include "sys.h"

#define ML_HOT __attribute__((always_inline))

namespace memlayout::preload {

void write_tick(ThreadLog *log);

// Whether this CPU's PDEP is fast (set once at load): then event fields are
// encoded with put_varint_pdep, the same bytes for a fraction of the work.
extern bool g_fast_pdep;

ML_HOT inline uint8_t *put_field(uint8_t *w, uint64_t v) {
  return ML_LIKELY(g_fast_pdep) ? trace::put_varint_pdep(w, v)
                                : trace::put_varint_branchless(w, v);
}

ML_HOT inline uint8_t *begin_event(ThreadLog *log) {
  if (ML_UNLIKELY(--log->tick_countdown == 0))
    write_tick(log);
  return log->pos;
}

ML_HOT inline void commit_event(ThreadLog *log, uint8_t *w) {
  log->pos = w;
  ++log->events;
  ++log->total_events;
  log->committed.store((static_cast<uint64_t>(w - log->data) << 32) | log->events,
                       std::memory_order_release);
  if (ML_UNLIKELY(w >= log->limit))
    flush_log(log);
}

ML_HOT inline uint8_t *put_pointer(ThreadLog *log, uint8_t *w, const void *p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  w = put_field(w, trace::zigzag(static_cast<int64_t>(a - log->prev_ptr)));
  log->prev_ptr = a;
  return w;
}

ML_HOT inline size_t usable_size_of(void *p, size_t size, trace::Api api) {
  if (ML_UNLIKELY(is_bootstrap(p)))
    return bootstrap_usable(p);
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

// Sizes against the trace's usable model: one varint when the allocator gave
// what its size classes say.
ML_HOT inline uint8_t *put_sizes(uint8_t *w, size_t size, size_t usable, trace::Api api) {
  if (ML_LIKELY(usable == trace::predicted_usable(g_usable_model, size) &&
                !trace::api_is_aligned(api)))
    return put_field(w, static_cast<uint64_t>(size) << 1);
  w = put_field(w, static_cast<uint64_t>(size) << 1 | 1);
  return put_field(w, usable >= size ? usable - size : 0);
}

// `usable` 0: from the allocator's layout (usable_size_of). Allocations the
// rules routed elsewhere (pools, padding) pass theirs.
ML_HOT inline void record_alloc(ThreadState &ts, trace::Api api, void *p, size_t size, size_t align,
                                const UnwindStart &start, size_t usable = 0) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (ML_UNLIKELY(!log))
    return count_lost_event();
  uint32_t sid = stack_id(log, start);
  if (!usable)
    usable = usable_size_of(p, size, api);
  uint8_t *w = begin_event(log);
  *w++ = trace::event_head(trace::EventKind::kAlloc, api);
  w = put_pointer(log, w, p);
  w = put_sizes(w, size, usable, api);
  w = put_field(w, sid);
  if (trace::api_is_aligned(api))
    w = trace::put_varint(w, align ? static_cast<uint64_t>(__builtin_ctzll(align)) : 0);
  ++log->allocs;
  log->bytes_allocated += size;
  commit_event(log, w);
}

// Called before the real free, while the block is still ours: a thread that
// gets the same address next cannot have recorded its allocation earlier.
ML_HOT inline void record_free(ThreadState &ts, trace::Api api, void *p) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (ML_UNLIKELY(!log))
    return count_lost_event();
  uint8_t *w = begin_event(log);
  *w++ = trace::event_head(trace::EventKind::kFree, api);
  w = put_pointer(log, w, p);
  ++log->frees;
  commit_event(log, w);
}

} // namespace memlayout::preload
