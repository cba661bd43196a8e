// libFuzzer entry point for the trace decoder: any bytes must decode to
// events, a partial trace or an error with an offset; never a crash, hang or
// unbounded allocation. The same bytes then go through the heap replay with
// and without its second thread (the index pass that skips events records
// and restarts on a bad one, the block decoder), which must agree exactly.
#include "heap_snapshot.h"
#include "trace_reader.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

using memlayout::inspector::HeapSnapshot;
using memlayout::inspector::Item;
using memlayout::inspector::LiveObject;
using memlayout::inspector::ReadStatus;
using memlayout::inspector::SnapshotPoint;
using memlayout::inspector::SnapshotSpec;
using memlayout::inspector::TraceReader;

namespace {

void drain(TraceReader &r) {
  uint64_t sum = 0;
  for (Item it; (it = r.next()) != Item::kDone;) {
    switch (it) {
    case Item::kEvent: {
      const auto &e = r.event();
      sum += e.ptr + e.size + static_cast<uint64_t>(r.ns_since_start(e.tsc));
      for (uint64_t pc : r.stack(e.stack_id))
        sum += pc;
      if (const std::string *s = r.string(e.string_id))
        sum += s->size();
      break;
    }
    case Item::kModules:
      for (const auto &m : r.record_modules())
        sum += m.path.size() + m.segments.size();
      break;
    case Item::kThreads:
      for (const auto &t : r.record_threads())
        sum += t.tid;
      break;
    case Item::kMemoryMap:
      for (const auto &g : r.memory_map().regions)
        for (const auto &run : r.memory_map().runs_of(g))
          sum += run.npages;
      break;
    default:
      break;
    }
  }
  // A stopped reader always says why, with the offset in the message.
  if (r.status() != memlayout::inspector::ReadStatus::kOk && r.error().message.empty())
    std::abort();
  volatile uint64_t sink = sum;
  (void)sink;
}

bool same_objects(const HeapSnapshot &a, const HeapSnapshot &b) {
  if (a.objects.size() != b.objects.size())
    return false;
  for (size_t i = 0; i < a.objects.size(); ++i) {
    const LiveObject &x = a.objects[i], &y = b.objects[i];
    if (x.addr != y.addr || x.size != y.size || x.usable != y.usable || x.stack_id != y.stack_id ||
        x.tid != y.tid || x.tag_id != y.tag_id || x.api != y.api || x.seq != y.seq)
      return false;
  }
  return a.partial == b.partial && a.live_bytes == b.live_bytes && a.ts_ns == b.ts_ns &&
         a.events == b.events && a.unknown_frees == b.unknown_frees &&
         a.double_allocs == b.double_allocs;
}

void snapshots_agree(const uint8_t *data, size_t size) {
  for (SnapshotPoint point : {SnapshotPoint::kPeak, SnapshotPoint::kEnd}) {
    HeapSnapshot got[2];
    bool ok[2];
    std::string error[2], reader_error[2];
    ReadStatus status[2];
    for (int two_threads = 0; two_threads < 2; ++two_threads) {
      TraceReader r;
      if (!r.open_buffer(data, size, "fuzz"))
        return;
      SnapshotSpec spec;
      spec.point = point;
      spec.decode_thread = two_threads == 1;
      ok[two_threads] = build_snapshot(r, std::span<const uint8_t>(data, size), spec,
                                       got[two_threads], error[two_threads]);
      status[two_threads] = r.status();
      reader_error[two_threads] = r.error().message;
    }
    if (ok[0] != ok[1] || error[0] != error[1] || status[0] != status[1] ||
        reader_error[0] != reader_error[1] || (ok[0] && !same_objects(got[0], got[1])))
      std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  TraceReader r;
  if (r.open_buffer(data, size, "fuzz"))
    drain(r);
  TraceReader lazy; // the path without the prescan decodes tables as it goes
  if (lazy.open_buffer(data, size, "fuzz", TraceReader::Options{.prescan = false}))
    drain(lazy);
  snapshots_agree(data, size);
  return 0;
}
