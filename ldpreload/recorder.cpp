#include "recorder.h"

#include "lifecycle.h"
#include "process_info.h"
#include "stack_table.h"
#include "trace_writer.h"

#include <cstring>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/prctl.h>

namespace memlayout::preload {

__thread ThreadState tl_state __attribute__((tls_model("initial-exec")));
bool g_fast_pdep = sys::cpu_has_fast_pdep();
std::atomic<State> g_state{State::kUninitialized};

namespace {

using trace::put_varint;

constexpr size_t kBlockSlack = 4096; // > the largest single event
SpinLock g_registry_lock;
ThreadLog *g_logs = nullptr;
std::atomic<uint64_t> g_lost{0};
// Totals of threads that already exited.
std::atomic<uint64_t> g_retired_events{0}, g_retired_allocs{0}, g_retired_frees{0},
    g_retired_bytes{0};
constexpr uint64_t kFirstSnapshotRss = 16 << 20;
std::atomic<uint64_t> g_next_snapshot_rss{kFirstSnapshotRss};

size_t log_bytes() { return sizeof(ThreadLog) + g_options.block_kib * size_t{1024} + kBlockSlack; }

void begin_block(ThreadLog *log) {
  uint8_t *w = log->data;
  uint64_t tsc = sys::rdtsc();
  uint64_t mono = sys::monotonic_ns();
  w = put_varint(w, tsc);
  w = put_varint(w, tsc);
  w = put_varint(w, mono);
  log->last_tsc = tsc;
  log->prev_ptr = 0;
  log->events = 0;
  log->tick_countdown = g_options.tick_period;
  log->pos = w;
  log->committed.store(static_cast<uint64_t>(w - log->data) << 32, std::memory_order_release);
}

void write_thread_record(trace::ThreadEvent what, uint32_t tid) {
  char name[17] = {};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  uint32_t name_id = name[0] ? g_dictionary.intern_string(name) : 0;
  g_dictionary.flush_pending();
  uint8_t buf[64], *w = buf;
  *w++ = static_cast<uint8_t>(what);
  w = put_varint(w, sys::rdtsc());
  w = put_varint(w, tid);
  w = put_varint(w, name_id);
  g_writer.write_record(trace::RecordType::kThread, tid, 1, buf, static_cast<size_t>(w - buf),
                        false);
}

// Takes a memory-map snapshot each time resident memory has grown a quarter
// past the last one, so the page frames around the peak are known without
// knowing when the peak is. Resident size rather than live bytes: it costs
// one small read per block instead of a malloc_usable_size per free.
void maybe_snapshot() {
  // The high-water mark bounds resident memory from above and costs one
  // system call instead of a /proc file's open, read and close.
  rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0 &&
      static_cast<uint64_t>(usage.ru_maxrss) * 1024 < g_next_snapshot_rss.load(std::memory_order_relaxed))
    return;
  char text[128];
  if (sys::read_file("/proc/self/statm", text, sizeof text) <= 0)
    return;
  const char *p = text;
  while (*p && *p != ' ')
    ++p;
  uint64_t pages = 0;
  for (++p; *p >= '0' && *p <= '9'; ++p)
    pages = pages * 10 + static_cast<uint64_t>(*p - '0');
  uint64_t rss = pages * sys::page_size();
  uint64_t next = g_next_snapshot_rss.load(std::memory_order_relaxed);
  if (rss < next || !g_next_snapshot_rss.compare_exchange_strong(next, rss + rss / 4))
    return;
  if (uint32_t id = record_memory_map())
    record_ext(tl_state, trace::ExtKind::kSnapshot, id);
}

void unregister(ThreadLog *log) {
  LockGuard g(g_registry_lock);
  for (ThreadLog **p = &g_logs; *p; p = &(*p)->next)
    if (*p == log) {
      *p = log->next;
      break;
    }
  g_retired_events.fetch_add(log->total_events, std::memory_order_relaxed);
  g_retired_allocs.fetch_add(log->allocs, std::memory_order_relaxed);
  g_retired_frees.fetch_add(log->frees, std::memory_order_relaxed);
  g_retired_bytes.fetch_add(log->bytes_allocated, std::memory_order_relaxed);
}

// Compression that saves less than a fifth of a block is not worth its CPU on
// the allocating thread (high-entropy streams: random frees over a large
// heap): such a thread stores the next kRawBlocks blocks as they are, then
// tries again.
constexpr uint8_t kRawBlocks = 15;

void write_block(ThreadLog *log, size_t bytes, uint32_t events, bool from_signal = false) {
  if (!events)
    return;
  if (from_signal ? !g_writer.is_open() : !ensure_trace_open())
    return;
  if (from_signal)
    g_dictionary.flush_pending_if_unlocked();
  else
    g_dictionary.flush_pending();
  bool compress = log->compress_skip == 0;
  if (!compress)
    --log->compress_skip;
  size_t stored = g_writer.write_record(trace::RecordType::kEvents, log->tid, events, log->data,
                                        bytes, compress);
  if (compress && stored * 5 > bytes * 4)
    log->compress_skip = kRawBlocks;
}

} // namespace

void write_tick(ThreadLog *log) {
  uint64_t tsc = sys::rdtsc();
  uint8_t *w = log->pos;
  *w++ = trace::event_head(trace::EventKind::kTick, trace::Api::kMalloc);
  w = put_varint(w, tsc - log->last_tsc);
  log->last_tsc = tsc;
  log->tick_countdown = g_options.tick_period;
  log->pos = w;
  ++log->events;
}

ThreadLog *attach_thread(ThreadState &ts) {
  if (ts.retired)
    return nullptr;
  auto *log = static_cast<ThreadLog *>(sys::map_pages(log_bytes()));
  if (!log)
    return nullptr;
  new (log) ThreadLog{};
  log->data = reinterpret_cast<uint8_t *>(log + 1);
  log->capacity = g_options.block_kib * size_t{1024};
  log->limit = log->data + log->capacity;
  log->tid = sys::gettid();
  unwind_thread_init(); // may allocate (pthread_getattr_np): we are busy, it passes through
  begin_block(log);
  {
    LockGuard g(g_registry_lock);
    log->next = g_logs;
    g_logs = log;
  }
  ts.log = log;
  arm_thread_exit(log);
  if (ensure_trace_open())
    write_thread_record(trace::ThreadEvent::kStart, log->tid);
  return log;
}

void flush_log(ThreadLog *log) {
  {
    LockGuard g(log->flush_lock);
    if (!log->taken_over)
      write_block(log, static_cast<size_t>(log->pos - log->data), log->events);
    begin_block(log);
  }
  if (g_state.load(std::memory_order_relaxed) == State::kRecording)
    maybe_snapshot();
}

uint32_t stack_id(ThreadLog *log, const UnwindStart &start) {
  if (uint32_t *known = unwind_memo(g_options.unwind, start, g_options.stack_depth))
    return *known; // the stack cache verified this very stack: same id as last time
  uintptr_t frames[kMaxStackDepth];
  size_t n = 1;
  frames[0] = start.pc;
  uint32_t *memo = nullptr;
  if (g_options.stack_depth > 1) {
    n = unwind(g_options.unwind, start, frames, g_options.stack_depth, &memo);
    if (memo && *memo)
      return *memo; // the unwinder verified this very stack: same id as last time
  }
  uint64_t h = hash_frames(frames, n);
  StackCacheSlot &slot = log->stack_cache[(h ^ (h >> 23)) & (kStackCacheSlots - 1)];
  uint32_t id = slot.hash == h ? slot.id : g_dictionary.intern_stack(frames, n, h);
  slot.hash = h;
  slot.id = id;
  if (memo)
    *memo = id;
  return id;
}

uint32_t string_id(ThreadLog *log, const char *s) {
  // Names are usually literals: cache by address, confirmed by a content hash
  // so a reused buffer with new text gets its own id.
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; s[i] && i < 4096; ++i)
    h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ull;
  StringCacheSlot &slot = log->string_cache[(reinterpret_cast<uintptr_t>(s) >> 3 ^ h) & 63];
  if (slot.ptr == s && slot.hash == h)
    return slot.id;
  uint32_t id = g_dictionary.intern_string(s);
  slot = {s, h, id};
  return id;
}

void record_realloc(ThreadState &ts, trace::Api api, void *old_p, void *p, size_t size,
                    const UnwindStart &start) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint32_t sid = stack_id(log, start);
  size_t usable = usable_size_of(p, size, api);
  uint8_t *w = begin_event(log);
  *w++ = trace::event_head(trace::EventKind::kRealloc, api);
  w = put_pointer(log, w, old_p);
  w = put_pointer(log, w, p);
  w = put_sizes(w, size, usable, api);
  w = put_varint(w, sid);
  ++log->allocs;
  ++log->frees;
  log->bytes_allocated += size;
  commit_event(log, w);
}

void record_mark(ThreadState &ts, const char *name) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint32_t id = g_dictionary.intern_string(name);
  write_tick(log); // a mark's time matters: sample it exactly
  uint8_t *w = log->pos;
  *w++ = trace::event_head(trace::EventKind::kMark, trace::Api::kMalloc);
  w = put_varint(w, id);
  commit_event(log, w);
}

void record_tag(ThreadState &ts, const void *p, const char *name) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint32_t id = string_id(log, name);
  uint8_t *w = begin_event(log);
  *w++ = trace::event_head(trace::EventKind::kTag, trace::Api::kMalloc);
  w = put_pointer(log, w, p);
  w = put_varint(w, id);
  commit_event(log, w);
}

void record_ext(ThreadState &ts, trace::ExtKind kind, uint64_t value) {
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint8_t *w = begin_event(log);
  *w++ = trace::event_head(trace::EventKind::kExt, trace::Api::kMalloc);
  w = put_varint(w, static_cast<uint64_t>(kind));
  w = put_varint(w, value);
  commit_event(log, w);
}

void count_lost_event() { g_lost.fetch_add(1, std::memory_order_relaxed); }

namespace {

enum class Waiting { kWait, kFromSignal };

bool take(SpinLock &l, Waiting w) {
  if (w == Waiting::kFromSignal)
    return l.try_lock();
  l.lock();
  return true;
}

// Writes a log's complete events (its committed prefix) and takes it over.
void take_over(ThreadLog *l, Waiting w) {
  if (!take(l->flush_lock, w))
    return;
  if (!l->taken_over) {
    uint64_t c = l->committed.load(std::memory_order_acquire);
    write_block(l, static_cast<size_t>(c >> 32), static_cast<uint32_t>(c),
                w == Waiting::kFromSignal);
    l->taken_over = true;
  }
  l->flush_lock.unlock();
}

void flush_everything(Waiting w) {
  ThreadLog *self = tl_state.log;
  if (self && w == Waiting::kWait)
    flush_log(self);
  else if (self)
    take_over(self, w); // interrupted mid-event perhaps: committed events only
  if (!take(g_registry_lock, w))
    return;
  for (ThreadLog *l = g_logs; l; l = l->next)
    if (l != self)
      take_over(l, w);
  g_registry_lock.unlock();
}

} // namespace

void flush_all_threads() { flush_everything(Waiting::kWait); }
void flush_all_threads_from_signal() { flush_everything(Waiting::kFromSignal); }

Totals totals(bool from_signal) {
  Totals t{g_retired_events.load(), g_retired_allocs.load(), g_retired_frees.load(),
           g_retired_bytes.load(), g_lost.load()};
  if (!take(g_registry_lock, from_signal ? Waiting::kFromSignal : Waiting::kWait))
    return t;
  for (ThreadLog *l = g_logs; l; l = l->next) {
    t.events += l->total_events;
    t.allocs += l->allocs;
    t.frees += l->frees;
    t.bytes_allocated += l->bytes_allocated;
  }
  g_registry_lock.unlock();
  return t;
}

void thread_exit(ThreadState &ts) {
  ThreadLog *log = ts.log;
  if (!log)
    return;
  ts.busy = 1;
  // Destructors of other keys may still allocate after ours: stay armed for
  // a couple more rounds (glibc runs up to four while values are re-set).
  if (++ts.exit_rounds < 3) {
    flush_log(log);
    arm_thread_exit(log);
    ts.busy = 0;
    return;
  }
  flush_log(log);
  write_thread_record(trace::ThreadEvent::kExit, log->tid);
  unregister(log);
  ts.log = nullptr;
  ts.retired = 1;
  unwind_thread_exit();
  {
    // The exit-time flusher may hold this log's lock; wait it out.
    LockGuard g(log->flush_lock);
  }
  sys::unmap_pages(log, log_bytes());
  ts.busy = 0;
}

void recorder_prepare_fork() { g_registry_lock.lock(); }
void recorder_parent_after_fork() { g_registry_lock.unlock(); }

void recorder_child_after_fork() {
  ThreadLog *self = tl_state.log;
  for (ThreadLog *l = g_logs, *next; l; l = next) {
    next = l->next;
    if (l != self)
      sys::unmap_pages(l, log_bytes()); // its thread does not exist here
  }
  g_logs = self;
  g_retired_events = g_retired_allocs = g_retired_frees = g_retired_bytes = 0;
  g_lost = 0;
  g_next_snapshot_rss = kFirstSnapshotRss;
  if (self) {
    self->next = nullptr;
    self->tid = sys::gettid();
    self->flush_lock.reset_after_fork();
    self->taken_over = false;
    self->allocs = self->frees = self->bytes_allocated = self->total_events = 0;
    begin_block(self); // the parent's pending events are the parent's to write
  }
  g_registry_lock.reset_after_fork();
}

} // namespace memlayout::preload
