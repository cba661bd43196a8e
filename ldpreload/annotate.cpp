// The recorder side of <memlayout/memlayout.h>: programs find these by name at
// run time, so they work unmodified when not recorded.
#include "lifecycle.h"
#include "process_info.h"
#include "recorder.h"
#include "stack_table.h"
#include "trace_writer.h"

#include <memlayout/memlayout.h>

using namespace memlayout::preload;

ML_EXPORT void memlayout_mark_impl(const char *name) {
  ThreadState &ts = tl_state;
  if (!name || ts.busy || !initialize())
    return;
  enter_busy(ts);
  record_mark(ts, name);
  // `report --at mark:NAME` wants the page frames of this moment.
  if (uint32_t id = record_memory_map())
    record_ext(ts, memlayout::trace::ExtKind::kSnapshot, id);
  ts.busy = 0;
}

ML_EXPORT void memlayout_tag_impl(const void *ptr, const char *type_name) {
  ThreadState &ts = tl_state;
  if (!ptr || !type_name || ts.busy || !initialize())
    return;
  enter_busy(ts);
  record_tag(ts, ptr, type_name);
  ts.busy = 0;
}

// Aborted transactions: encoded as kHtmAborts records (trace_format.h), a
// record per batch, or per 16 KiB of entries.
ML_EXPORT void memlayout_htm_aborts_impl(const struct memlayout_htm_abort *a, size_t n) {
  using namespace memlayout::trace;
  // The header's flags are the trace's, bit for bit.
  static_assert(int{MEMLAYOUT_HTM_OVERLAP} == kHtmOverlap &&
                int{MEMLAYOUT_HTM_OTHER_WRITES} == kHtmOtherWrites &&
                int{MEMLAYOUT_HTM_SAME_KEY} == kHtmSameKey &&
                int{MEMLAYOUT_HTM_KEYS_KNOWN} == kHtmKeysKnown &&
                int{MEMLAYOUT_HTM_BY_PLAIN} == kHtmByPlain &&
                int{MEMLAYOUT_HTM_BY_LOCK} == kHtmByLock &&
                int{MEMLAYOUT_HTM_WRITE_CAPACITY} == kHtmWriteCapacity);
  static_assert(int{MEMLAYOUT_HTM_CAPACITY} == static_cast<int>(HtmCause::kCapacity) &&
                int{MEMLAYOUT_HTM_COMMITS} == static_cast<int>(HtmCause::kCommits));
  ThreadState &ts = tl_state;
  if (!a || !n || ts.busy || !initialize() || !ensure_trace_open())
    return;
  enter_busy(ts);
  constexpr size_t kFlushAt = 16 << 10;
  constexpr size_t kEntryMax = 2 + 13 * kMaxVarintBytes + kMaxHtmSetLines * kMaxVarintBytes;
  uint8_t buf[kFlushAt + kEntryMax];
  uint8_t *w = buf;
  uint32_t count = 0;
  uint32_t tid = ts.log ? ts.log->tid : static_cast<uint32_t>(sys::gettid());
  auto flush = [&] {
    if (!count)
      return;
    g_dictionary.flush_pending(); // the region names before the entries naming them
    g_writer.write_record(RecordType::kHtmAborts, tid, count, buf, static_cast<size_t>(w - buf));
    w = buf;
    count = 0;
  };
  for (size_t i = 0; i < n; ++i) {
    const memlayout_htm_abort &e = a[i];
    uint32_t nlines = e.lines ? e.nlines : 0;
    if (nlines > kMaxHtmSetLines)
      nlines = kMaxHtmSetLines;
    *w++ = e.cause;
    *w++ = e.flags;
    w = put_varint(w, e.region ? g_dictionary.intern_string(e.region) : 0);
    for (uint64_t v : {e.line, e.read_mask, e.write_mask, e.other_mask, uint64_t{e.set},
                       uint64_t{e.l1_sets}, uint64_t{e.l1_ways}, uint64_t{e.tx_lines},
                       uint64_t{e.tx_written_lines}, uint64_t{e.tx_sets}, uint64_t{nlines}})
      w = put_varint(w, v);
    for (uint32_t l = 0; l < nlines; ++l)
      w = put_varint(w, e.lines[l]);
    ++count;
    if (static_cast<size_t>(w - buf) >= kFlushAt)
      flush();
  }
  flush();
  ts.busy = 0;
}
