#include "recorder.h"

#include "lifecycle.h"
#include "process_info.h"
#include "stack_table.h"
#include "trace_writer.h"

#include <algorithm>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

namespace memlayout::preload {

__thread ThreadState tl_state __attribute__((tls_model("initial-exec")));
ML_HOT_DATA std::atomic<State> g_state{State::kUninitialized};
ML_HOT_DATA uint32_t g_memo_depth = 0;

namespace {

using trace::put_varint;

// Whether this CPU's PDEP is fast: then fields are encoded with
// put_varint_pdep, the same bytes for a fraction of the work.
const bool g_fast_pdep = sys::cpu_has_fast_pdep();

constexpr size_t kBlockSlack = 4096; // > the largest single event
constexpr uint64_t kPointerBits = (uint64_t{1} << 56) - 1;
SpinLock g_registry_lock;
ThreadLog *g_logs = nullptr;
std::atomic<uint64_t> g_lost{0};
// Totals of threads that already exited.
std::atomic<uint64_t> g_retired_events{0}, g_retired_allocs{0}, g_retired_frees{0},
    g_retired_bytes{0};
constexpr uint64_t kFirstSnapshotRss = 16 << 20;
std::atomic<uint64_t> g_next_snapshot_rss{kFirstSnapshotRss};

// The mapping a log lives in, with room for blocks of `block_bytes`.
size_t log_bytes_for(size_t block_bytes) {
  return sizeof(ThreadLog) + kStageWords * sizeof(uint64_t) + sizeof(ThreadCaches) + block_bytes +
         kBlockSlack;
}
size_t log_bytes() { return log_bytes_for(g_options.block_kib * size_t{1024}); }

// A new block starts at the time of the last TSC sample encoded: the events
// staged after it, which it will hold first, happened no earlier.
void begin_block(ThreadLog *log) {
  uint8_t *w = log->data;
  uint64_t tsc = sys::rdtsc();
  w = put_varint(w, log->last_tsc);
  w = put_varint(w, tsc);
  w = put_varint(w, sys::monotonic_ns());
  log->block_tsc = tsc;
  log->prev_ptr = 0;
  log->events = 0;
  log->pos = w;
}

// A thread starts with blocks of kFirstBlockBytes and doubles them, up to
// block_kib, each time one fills within kFastBlockTicks. Each write costs
// the kernel a fixed part (the file's lock, its times, a journal handle):
// on the AMD VM a churning program spends ~0.08x less of its time with
// 256 KiB blocks, on Intel the same (docs/performance.md). A thread that
// allocates now and then keeps small blocks, and only the pages it touched.
constexpr size_t kFirstBlockBytes = 64 << 10;
constexpr uint64_t kFastBlockTicks = uint64_t{1} << 24; // ~4-8 ms at 2-4 GHz

void grow_block(ThreadLog *log) {
  size_t largest = g_options.block_kib * size_t{1024};
  if (log->capacity < largest && sys::rdtsc() - log->block_tsc < kFastBlockTicks) {
    log->capacity = std::min(log->capacity * 2, largest);
    log->limit = log->data + log->capacity;
  }
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
//
// At most once a millisecond of the process, not once per block: resident
// memory grows far less than a quarter in a millisecond.
std::atomic<uint64_t> g_rss_checked_tsc{0};

void maybe_snapshot() {
  if (!sys::due(g_rss_checked_tsc, sys::kMillisecondTicks))
    return;
  // The high-water mark bounds resident memory from above and costs one
  // system call instead of a /proc file's open, read and close.
  rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0 &&
      static_cast<uint64_t>(usage.ru_maxrss) * 1024 <
          g_next_snapshot_rss.load(std::memory_order_relaxed))
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

// The summary's counts of a log about to go.
void retire_totals(const ThreadLog *log) {
  g_retired_events.fetch_add(log->total_events, std::memory_order_relaxed);
  g_retired_allocs.fetch_add(log->allocs, std::memory_order_relaxed);
  g_retired_frees.fetch_add(log->frees, std::memory_order_relaxed);
  g_retired_bytes.fetch_add(log->bytes_allocated, std::memory_order_relaxed);
}

void unregister(ThreadLog *log) {
  LockGuard g(g_registry_lock);
  for (ThreadLog **p = &g_logs; *p; p = &(*p)->next)
    if (*p == log) {
      *p = log->next;
      break;
    }
  retire_totals(log);
}

// Compression costs the allocating thread ~10 ns per event of a block: it
// pays where it saves most of the bytes (real programs repeat themselves:
// 10-20x), not on high-entropy streams (random frees over a large heap save
// a fifth at best, while writing that fifth costs the kernel far less than
// compressing it). A thread whose block shrank by less than a third stores
// the next kRawBlocks blocks as they are, then tries again.
constexpr uint8_t kRawBlocks = 63;

void write_block(ThreadLog *log, size_t bytes, uint32_t events, bool from_signal = false) {
  if (!events)
    return;
  if (from_signal ? !ensure_trace_open_from_signal() : !ensure_trace_open())
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
  if (compress && stored * 3 > bytes * 2)
    log->compress_skip = kRawBlocks;
}

} // namespace

namespace {

template <bool kPdep> inline uint8_t *put(uint8_t *w, uint64_t v) {
  return kPdep ? trace::put_varint_pdep(w, v) : trace::put_varint_branchless(w, v);
}

// Frees and plain allocations, the bulk of every stage, from w until another
// kind of record, the stage's end or the block's limit; returns where it
// stopped. Kept apart from the rest so that its loop holds everything in
// registers: with the rarer records in the same loop, the compiler kept the
// event count in memory, a load-add-store chain through every event.
template <bool kPdep>
inline const uint64_t *encode_frees_and_allocs(const uint64_t *w, const uint64_t *end,
                                               uint8_t *&out, const uint8_t *limit, uintptr_t &prev,
                                               uint64_t &allocs, uint64_t &bytes) {
  uint8_t *o = out;
  uintptr_t last = prev;
  uint64_t n_allocs = 0, n_bytes = 0;
  while (w < end && o < limit) {
    uint64_t w0 = w[0];
    auto head = static_cast<uint8_t>(w0 >> 56);
    uintptr_t p = w0 & kPointerBits;
    auto kind = static_cast<trace::EventKind>(head & 7);
    if (kind == trace::EventKind::kFree) {
      *o++ = head;
      o = put<kPdep>(o, trace::zigzag(static_cast<int64_t>(p - last)));
      last = p;
      w += 1;
      continue;
    }
    if (kind != trace::EventKind::kAlloc)
      break;
    uint64_t w1 = w[1];
    uint64_t size = static_cast<uint32_t>(w1);
    *o++ = head;
    o = put<kPdep>(o, trace::zigzag(static_cast<int64_t>(p - last)));
    last = p;
    o = put<kPdep>(o, size << 1);
    o = put<kPdep>(o, w1 >> 32);
    ++n_allocs;
    n_bytes += size;
    w += 2;
  }
  out = o;
  prev = last;
  allocs += n_allocs;
  bytes += n_bytes;
  return w;
}

// Under flush_lock: encodes staged records [w, end) into the trace format,
// writing each block that fills. True when a block was written. One copy
// per varint encoder, so the loop tests the CPU once.
template <bool kPdep>
bool encode_with(ThreadLog *log, const uint64_t *w, const uint64_t *end, bool from_signal) {
  bool wrote = false;
  uint8_t *out = log->pos;
  uintptr_t prev = log->prev_ptr;
  uint32_t events = log->events;
  uint64_t allocs = 0, frees = 0, bytes = 0, ticks = 0, staged = 0;
  while (w < end) {
    if (ML_UNLIKELY(out >= log->limit)) {
      log->events = events;
      write_block(log, static_cast<size_t>(out - log->data), events, from_signal);
      wrote = true;
      grow_block(log);
      begin_block(log);
      out = log->pos;
      prev = 0;
      events = 0;
    }
    {
      // A free is one word and an allocation two: the words passed and the
      // allocations among them give the count of records.
      uint64_t run_allocs = 0;
      const uint64_t *from = w;
      w = encode_frees_and_allocs<kPdep>(w, end, out, log->limit, prev, run_allocs, bytes);
      auto records = static_cast<uint64_t>(w - from) - run_allocs;
      events += static_cast<uint32_t>(records);
      staged += records;
      allocs += run_allocs;
      frees += records - run_allocs;
    }
    if (w >= end || out >= log->limit)
      continue;
    // kStagedKind: the event's head, its fields, which of them are pointers.
    uint64_t w0 = w[0];
    auto own = static_cast<uint8_t>(w0);
    unsigned n = (w0 >> 8) & 15, pointers = (w0 >> 12) & 0xff;
    const uint64_t *f = w + 1;
    w += 1 + n;
    ++events;
    ++staged;
    *out++ = own;
    switch (static_cast<trace::EventKind>(own & 7)) {
    case trace::EventKind::kTick:
      out = put_varint(out, f[0] - log->last_tsc);
      log->last_tsc = f[0];
      ++ticks; // not an event of the program
      continue;
    case trace::EventKind::kAlloc:
      ++allocs;
      bytes += f[1] >> 1;
      break;
    case trace::EventKind::kRealloc:
      ++allocs;
      ++frees;
      bytes += f[2] >> 1;
      break;
    default:
      break;
    }
    for (unsigned i = 0; i < n; ++i) {
      uint64_t v = f[i];
      if (pointers >> i & 1) {
        out = put<kPdep>(out, trace::zigzag(static_cast<int64_t>(v - prev)));
        prev = v;
      } else {
        out = put<kPdep>(out, v);
      }
    }
  }
  log->pos = out;
  log->prev_ptr = prev;
  log->events = events;
  log->allocs += allocs;
  log->frees += frees;
  log->bytes_allocated += bytes;
  log->total_events += staged - ticks;
  return wrote;
}

bool encode(ThreadLog *log, const uint64_t *w, const uint64_t *end, bool from_signal) {
  return g_fast_pdep ? encode_with<true>(log, w, end, from_signal)
                     : encode_with<false>(log, w, end, from_signal);
}

// A record of `n` fields (<= 5) of which the ones in `pointers` are pointers.
// `timed`: the record may take a new clock sample first (stage_begin); a
// record that belongs to the one before it (a pool's tag on the allocation
// just recorded) keeps that one's, even where the thread was switched out
// between the two: the next record samples instead.
void stage_record(ThreadLog *log, uint8_t head, const uint64_t *fields, unsigned n,
                  unsigned pointers, bool timed = true) {
  uint64_t *w = timed ? stage_begin(log) : log->stage_pos.load(std::memory_order_relaxed);
  w[0] = uint64_t{kStagedKind} << 56 | pointers << 12 | n << 8 | head;
  memcpy(w + 1, fields, n * sizeof *fields);
  stage_commit(log, w + 1 + n);
}

// The sizes fields: usable as the allocator's classes predict, or explicit.
unsigned put_sizes(uint64_t *f, size_t size, size_t usable, trace::Api api) {
  if (usable == trace::predicted_usable(g_usable_model, size) && !trace::api_is_aligned(api)) {
    f[0] = static_cast<uint64_t>(size) << 1;
    return 1;
  }
  f[0] = static_cast<uint64_t>(size) << 1 | 1;
  f[1] = usable >= size ? usable - size : 0;
  return 2;
}

} // namespace

namespace {

void stage_tsc(ThreadLog *log, uint64_t tsc) {
  uint64_t *w = log->stage_pos.load(std::memory_order_relaxed);
  w[0] = uint64_t{kStagedKind} << 56 | 1 << 8 |
         trace::event_head(trace::EventKind::kTick, trace::Api::kMalloc);
  w[1] = tsc;
  log->stage_pos.store(w + 2, std::memory_order_release);
}

// Samples closer than this (TSC ticks: 0.5-1 us at 2-4 GHz) tell the reader
// nothing the event order does not: the period doubles, up to
// tick_period_max. Samples four times further apart shrink it to what would
// have put them this far apart, down to tick_period (1 by default): a
// program that allocates every few milliseconds gets every event stamped,
// where a fixed share of its events would carry a sample from long before.
constexpr uint64_t kTickGapTicks = 2048;

} // namespace

// Reading the TSC costs as much as a malloc on these VMs, so what a sample
// buys is time resolution, not one per so many events: a loop allocating
// every 20 ns needs one in 64 events for a microsecond's, a program
// allocating every microsecond one in each, at 2% of its time.
void stage_tick(ThreadLog *log) {
  // Armed before the clock is read: a thread switched out between reading
  // it and arming stamped its next events with the time from before the
  // switch, and nothing told it (8 ms early on 2 CPUs with 49 threads: a
  // free of another thread's block ordered before its allocation). Switched
  // out between arming and reading, it samples once more than it needed.
  switch_watch::arm(log->switch_word);
  std::atomic_signal_fence(std::memory_order_seq_cst); // the compiler keeps the order
  uint64_t now = sys::rdtsc();
  stage_tsc(log, now);
  uint32_t period = log->tick_period;
  // A sample the switch watch asked for says how long the thread waited,
  // not how fast it allocates: the period stays.
  if (log->tick_countdown == 0) {
    uint64_t gap = now - log->sampled_tsc;
    if (gap < kTickGapTicks)
      period = std::min(period * 2, g_options.tick_period_max);
    else if (gap > 4 * kTickGapTicks)
      period = std::max(static_cast<uint32_t>(period * kTickGapTicks / gap), g_options.tick_period);
  }
  log->tick_period = period;
  log->sampled_tsc = now;
  log->tick_countdown = period;
}

void stage_alloc_full(ThreadLog *log, trace::Api api, void *p, size_t size, size_t align,
                      uint32_t sid, size_t usable) {
  uint64_t f[5];
  f[0] = reinterpret_cast<uintptr_t>(p);
  unsigned n = 1 + put_sizes(f + 1, size, usable, api);
  f[n++] = sid;
  if (trace::api_is_aligned(api))
    f[n++] = align ? static_cast<uint64_t>(__builtin_ctzll(align)) : 0;
  stage_record(log, trace::event_head(trace::EventKind::kAlloc, api), f, n, 1);
}

namespace {

// A log in fresh pages of log_bytes_for(room), its first block of
// `capacity` (<= room) begun, registered nowhere; `watch`: watched for
// switches where the thread's rseq area allows (switch_watch.h).
ThreadLog *map_log(size_t room, size_t capacity, bool watch) {
  auto *log = static_cast<ThreadLog *>(sys::map_pages(log_bytes_for(room)));
  if (!log)
    return nullptr;
  new (log) ThreadLog{};
  log->stage = reinterpret_cast<uint64_t *>(log + 1);
  log->stage_pos.store(log->stage, std::memory_order_relaxed);
  log->stage_limit = log->stage + kStageWords - kMaxStagedWords;
  log->tick_period = log->tick_countdown = g_options.tick_period;
  log->caches = reinterpret_cast<ThreadCaches *>(log->stage + kStageWords);
  log->data = reinterpret_cast<uint8_t *>(log->caches + 1);
  log->capacity = capacity;
  log->limit = log->data + log->capacity;
  log->tid = sys::gettid();
  log->unwatched = 1;
  log->switch_word = watch ? switch_watch::thread_word() : nullptr;
  if (!log->switch_word)
    log->switch_word = &log->unwatched;
  switch_watch::arm(log->switch_word); // before the clock is read: stage_tick
  std::atomic_signal_fence(std::memory_order_seq_cst);
  log->sampled_tsc = log->last_tsc = sys::rdtsc();
  begin_block(log);
  return log;
}

// Events of a thread past its last TLS destructor, which retired its log:
// glibc frees the thread's TLS blocks (allocate_dtv's) after every
// destructor ran, and in a detached thread the thread does it itself. Lost,
// they left the blocks live, and the next allocations of their addresses
// by other threads paired with the wrong frees. Rare (one or two a thread),
// so each is written at once from a log mapped for it, stamped exactly.
constexpr size_t kLateBlockBytes = 4096;

template <class Stage> void record_late(ThreadState &ts, Stage &&stage) {
  if (!ts.retired || g_state.load(std::memory_order_relaxed) != State::kRecording)
    return count_lost_event();
  sys::KeepErrno keep;
  ThreadLog *log = map_log(kLateBlockBytes, kLateBlockBytes, false);
  if (!log)
    return count_lost_event();
  log->tick_period = log->tick_countdown = 1; // each event samples: no watch needed
  stage(log);
  // As flush_log, without its snapshot: a snapshot's record would be an
  // event of this thread, which has no log to take it.
  encode(log, log->stage, log->stage_pos.load(std::memory_order_relaxed), false);
  write_block(log, static_cast<size_t>(log->pos - log->data), log->events);
  retire_totals(log);
  sys::unmap_pages(log, log_bytes_for(kLateBlockBytes));
}

} // namespace

ThreadLog *attach_thread(ThreadState &ts) {
  if (ts.retired)
    return nullptr;
  sys::KeepErrno keep;
  size_t room = g_options.block_kib * size_t{1024}; // the blocks grow up to it (grow_block)
  ThreadLog *log = map_log(room, std::min(kFirstBlockBytes, room), !ts.unwatched);
  if (!log)
    return nullptr;
  unwind_thread_init(); // may allocate (pthread_getattr_np): we are busy, from our own heap
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

void stop_switch_watch(ThreadState &ts) {
  ts.unwatched = 1;
  if (ThreadLog *log = ts.log; log && log->switch_word != &log->unwatched) {
    switch_watch::disarm(log->switch_word);
    log->switch_word = &log->unwatched;
  }
}

void record_late_alloc(ThreadState &ts, trace::Api api, void *p, size_t size, size_t align,
                       size_t usable) {
  // No stack: the unwinder let go of the thread with its log.
  record_late(ts, [&](ThreadLog *log) {
    stage_alloc_full(log, api, p, size, align, 0, usable ? usable : usable_size_of(p, size, api));
  });
}

void record_late_free(ThreadState &ts, trace::Api api, void *p) {
  record_late(ts, [&](ThreadLog *log) {
    uint64_t *w = stage_begin(log);
    w[0] = staged_word0(trace::EventKind::kFree, api, p);
    stage_commit(log, w + 1);
  });
}

void stage_flush(ThreadLog *log) {
  sys::KeepErrno keep;
  bool wrote = false;
  {
    LockGuard g(log->flush_lock);
    if (!log->taken_over)
      wrote = encode(log, log->stage, log->stage_pos.load(std::memory_order_relaxed), false);
    log->stage_pos.store(log->stage, std::memory_order_relaxed);
  }
  if (wrote && g_state.load(std::memory_order_relaxed) == State::kRecording)
    maybe_snapshot();
}

void flush_log(ThreadLog *log) {
  sys::KeepErrno keep;
  {
    LockGuard g(log->flush_lock);
    if (!log->taken_over) {
      encode(log, log->stage, log->stage_pos.load(std::memory_order_relaxed), false);
      write_block(log, static_cast<size_t>(log->pos - log->data), log->events);
    }
    log->stage_pos.store(log->stage, std::memory_order_relaxed);
    begin_block(log);
  }
  if (g_state.load(std::memory_order_relaxed) == State::kRecording)
    maybe_snapshot();
}

uint32_t stack_id(ThreadLog *log, const UnwindStart &start) {
  sys::KeepErrno keep; // the unwinder may read the loader's tables, the dictionary write
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
  StackCacheSlot &slot = log->caches->stack_cache[(h ^ (h >> 23)) & (kStackCacheSlots - 1)];
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
  StringCacheSlot &slot = log->caches->string_cache[(reinterpret_cast<uintptr_t>(s) >> 3 ^ h) & 63];
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
  uint64_t f[5] = {reinterpret_cast<uintptr_t>(old_p), reinterpret_cast<uintptr_t>(p)};
  unsigned n = 2 + put_sizes(f + 2, size, usable_size_of(p, size, api), api);
  f[n++] = sid;
  stage_record(log, trace::event_head(trace::EventKind::kRealloc, api), f, n, 3);
}

void record_mark(ThreadState &ts, const char *name) {
  sys::KeepErrno keep;
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint64_t id = g_dictionary.intern_string(name);
  stage_tsc(log, sys::rdtsc()); // a mark's time matters: sample it exactly
  stage_record(log, trace::event_head(trace::EventKind::kMark, trace::Api::kMalloc), &id, 1, 0);
}

void record_tag(ThreadState &ts, const void *p, const char *name, bool of_allocation) {
  sys::KeepErrno keep;
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint64_t f[2] = {reinterpret_cast<uintptr_t>(p), string_id(log, name)};
  stage_record(log, trace::event_head(trace::EventKind::kTag, trace::Api::kMalloc), f, 2, 1,
               !of_allocation);
}

void record_ext(ThreadState &ts, trace::ExtKind kind, uint64_t value) {
  sys::KeepErrno keep;
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint64_t f[2] = {static_cast<uint64_t>(kind), value};
  stage_record(log, trace::event_head(trace::EventKind::kExt, trace::Api::kMalloc), f, 2, 0);
}

void record_free_range(ThreadState &ts, uintptr_t begin, size_t length) {
  sys::KeepErrno keep;
  ThreadLog *log = ts.log ? ts.log : attach_thread(ts);
  if (!log)
    return count_lost_event();
  uint64_t f[3] = {static_cast<uint64_t>(trace::ExtKind::kFreeRange), begin, length};
  stage_record(log, trace::event_head(trace::EventKind::kExt, trace::Api::kSegPool), f, 3, 0);
}

void count_lost_event() { g_lost.fetch_add(1, std::memory_order_relaxed); }

namespace {

// From a signal handler, a lock may be held by the interrupted code, which
// never lets it go while the handler runs, or by another thread for the
// microseconds of its own flush: those are waited for a little (a process
// killed while its threads allocated lost up to 45% of its events, counted
// in the end record and written nowhere), the handler's own thread's not.
enum class Waiting { kWait, kFromSignal, kFromSignalBriefly };

bool take(SpinLock &l, Waiting w) {
  if (w == Waiting::kWait) {
    l.lock();
    return true;
  }
  if (l.try_lock())
    return true;
  if (w != Waiting::kFromSignalBriefly)
    return false;
  const uint64_t until = sys::monotonic_ns() + 200'000'000; // a preempted holder's turn
  while (sys::monotonic_ns() < until) {
    sched_yield();
    if (l.try_lock())
      return true;
  }
  return false;
}

// Writes a log's complete events (its published stage) and takes it over.
// Where its lock cannot be had, its unwritten events are counted lost (at
// least: a staged record is one or two words).
void take_over(ThreadLog *l, Waiting w) {
  if (!take(l->flush_lock, w)) {
    uint64_t staged =
        static_cast<uint64_t>(l->stage_pos.load(std::memory_order_acquire) - l->stage);
    g_lost.fetch_add(l->events + (staged + 1) / 2, std::memory_order_relaxed);
    return;
  }
  if (!l->taken_over) {
    bool from_signal = w != Waiting::kWait;
    encode(l, l->stage, l->stage_pos.load(std::memory_order_acquire), from_signal);
    write_block(l, static_cast<size_t>(l->pos - l->data), l->events, from_signal);
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
  const Waiting others = w == Waiting::kWait ? w : Waiting::kFromSignalBriefly;
  if (!take(g_registry_lock, others))
    return;
  for (ThreadLog *l = g_logs; l; l = l->next)
    if (l != self)
      take_over(l, others);
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

bool busy_left_behind(ThreadState &ts, uintptr_t sp) {
  if (ts.busy_sp == UINTPTR_MAX || sp < ts.busy_sp)
    return false; // pinned, or called from below the owner: memlayout's own
  if (ts.left_behind)
    return true;
  sys::KeepErrno keep_errno;
  stack_t alt;
  if (sigaltstack(nullptr, &alt) != 0 || (alt.ss_flags & SS_ONSTACK))
    return false;
  ts.left_behind = 1;
  return true;
}

void thread_exit(ThreadState &ts) {
  ThreadLog *log = ts.log;
  if (!log)
    return;
  enter_busy(ts);
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
    // The parent's pending events are the parent's to write. The child's
    // events happen after the fork: its first block starts there, not at the
    // parent's last sample (which put them before the child's trace began).
    self->stage_pos.store(self->stage, std::memory_order_relaxed);
    self->last_tsc = sys::rdtsc();
    begin_block(self);
  }
  g_registry_lock.reset_after_fork();
}

} // namespace memlayout::preload
