// Writes the seed corpus for fuzz_trace_reader (tests/fuzz/corpus/trace_reader)
// with the tests' trace encoder. Rerun after a format change:
//   fuzz_make_seeds tests/fuzz/corpus/trace_reader
#include "trace_builder.h"

#include <string>

using namespace memlayout;
using memlayout::testing::Block;
using memlayout::testing::TraceBuilder;
using trace::Api;

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  const std::string dir = argv[1];

  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, 0x7f0000001000, 24, 32, 1)
      .alloc(Api::kAlignedAlloc, 0x7f0000000040, 64, 64, 2, 6);
  b.realloc(Api::kRealloc, 0x7f0000001000, 0x7f0000003000, 100, 112, 1).tick(300);
  b.free(Api::kFree, 0x7f0000003000).mark(1).tag(0x7f0000000040, 2);
  b.ext(trace::ExtKind::kFork, 77).ext(trace::ExtKind::kLost, 3).ext(trace::ExtKind::kSnapshot, 1);

  TraceBuilder full;
  full.strings({{1, "mark"}, {2, "node"}}).stacks({{1, {0x401000, 0x402000}}, {2, {0x401100}}});
  full.modules({{0x555500000000, "/bin/x", "\x01\x02", {{0, 0x1000, 5}}}});
  full.thread(trace::ThreadEvent::kStart, 1000, 7, 0).thread(trace::ThreadEvent::kName, 1000, 7, 1);
  full.events(7, b).events(8, b, /*compress=*/false);
  full.memory_map(1, 1500, trace::kMapPfns, {{0x1000, 0x9000, 3, 1, 4, {{0, 2, 100}, {1, 3, 7}}}});
  full.end(1000 + 3'000'000'000ull, 5000 + 1'000'000'000ull, 0, 20);
  testing::write_file(dir + "/full", full.bytes());

  TraceBuilder killed;
  killed.stacks({{1, {0x401000}}}).events(7, b).events(9, b);
  testing::write_file(dir + "/no-end", killed.bytes());

  TraceBuilder odd;
  odd.field(4000, {1, 2, 3});
  odd.record(static_cast<trace::RecordType>(99), 0, 1, {1, 2, 3});
  odd.record(trace::RecordType::kEvents, 1, 0, {});
  odd.record(trace::RecordType::kStrings, 0, 0, {});
  odd.events(1, b).end(2000, 6000);
  testing::write_file(dir + "/unknown-parts", odd.bytes());

  testing::write_file(dir + "/header-only", TraceBuilder().bytes());
  return 0;
}
