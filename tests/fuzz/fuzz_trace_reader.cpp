// libFuzzer entry point for the trace decoder: any bytes must decode to
// events, a partial trace or an error with an offset; never a crash, hang or
// unbounded allocation.
#include "trace_reader.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

using memlayout::inspector::Item;
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

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  TraceReader r;
  if (r.open_buffer(data, size, "fuzz"))
    drain(r);
  TraceReader lazy; // the path without the prescan decodes tables as it goes
  if (lazy.open_buffer(data, size, "fuzz", TraceReader::Options{.prescan = false}))
    drain(lazy);
  return 0;
}
