#include "trace_builder.h"
#include "trace_reader.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include <random>

using namespace memlayout;
using namespace memlayout::inspector;
using memlayout::testing::Block;
using memlayout::testing::Bytes;
using memlayout::testing::TraceBuilder;
using trace::Api;
using trace::EventKind;

namespace {

struct Collected {
  std::vector<Event> events;
  std::vector<Item> items;
  std::vector<ModuleEntry> modules;
  std::vector<ThreadEntry> threads;
  std::vector<MemoryMap> maps;
  std::optional<EndRecord> end;
};

Collected drain(TraceReader &r) {
  Collected c;
  for (Item it; (it = r.next()) != Item::kDone;) {
    c.items.push_back(it);
    switch (it) {
    case Item::kEvent:
      c.events.push_back(r.event());
      break;
    case Item::kModules:
      c.modules.insert(c.modules.end(), r.record_modules().begin(), r.record_modules().end());
      break;
    case Item::kThreads:
      c.threads.insert(c.threads.end(), r.record_threads().begin(), r.record_threads().end());
      break;
    case Item::kMemoryMap:
      c.maps.push_back(r.memory_map());
      break;
    case Item::kEnd:
      c.end = r.end();
      break;
    default:
      break;
    }
  }
  return c;
}

Collected read_ok(const Bytes &b, TraceReader &r) {
  REQUIRE(r.open_buffer(b.data(), b.size(), "t.trace"));
  Collected c = drain(r);
  INFO(r.error().message);
  REQUIRE(r.status() == ReadStatus::kOk);
  return c;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("header fields are decoded and unknown tags skipped", "[reader]") {
  TraceBuilder t;
  t.field(999, {1, 2, 3}); // a future writer's field
  t.str(trace::HeaderTag::kHostname, "box");
  t.end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  read_ok(b, r);
  const TraceHeader &h = r.header();
  CHECK(h.version == 1);
  CHECK(h.pid == 4242u);
  CHECK(h.parent_pid == 1u);
  CHECK(h.page_size == 4096u);
  CHECK(h.start_tsc == 1000u);
  CHECK(h.start_monotonic_ns == 5000u);
  CHECK(h.allocator == "native");
  CHECK(h.executable == "/usr/bin/example");
  CHECK(h.hostname == "box");
  CHECK(h.command_line == std::vector<std::string>{"example", "--flag"});
  CHECK(h.unknown_fields == 1);
  CHECK(r.has_end());
}

TEST_CASE("every event kind and api round-trips", "[reader]") {
  Block blk(1000, 1000, 5000);
  std::vector<Event> want;
  uint64_t ptr = 0x7f0000001000;
  for (int a = 0; a < static_cast<int>(Api::kCount); ++a) {
    Api api = static_cast<Api>(a);
    Event e;
    e.kind = EventKind::kAlloc;
    e.api = api;
    e.ptr = ptr;
    e.size = 24 + a;
    e.usable = 32 + a;
    e.stack_id = 100 + a;
    unsigned lg = trace::api_is_aligned(api) ? 4 + a % 8 : 0;
    e.alignment = trace::api_is_aligned(api) ? uint64_t{1} << lg : 0;
    blk.alloc(api, e.ptr, e.size, e.usable, e.stack_id, lg);
    want.push_back(e);
    Event f;
    f.kind = EventKind::kFree;
    f.api = api;
    f.ptr = ptr;
    blk.free(api, ptr);
    want.push_back(f);
    ptr += 0x40;
  }
  blk.realloc(Api::kRealloc, 0x5000, 0x4000, 100, 112, 7);
  blk.realloc(Api::kReallocArray, 0x4000, 0x9000, 200, 208, 8);
  blk.mark(3).tag(0x9000, 4);
  blk.ext(trace::ExtKind::kFork, 777).ext(trace::ExtKind::kSnapshot, 2);
  blk.ext(trace::ExtKind::kLost, 12345);
  blk.free_range(0x7000, 0x2000).free(Api::kFree, 0x9000); // the range leaves prev_ptr be
  TraceBuilder t;
  t.events(11, blk).end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  REQUIRE(c.events.size() == want.size() + 9);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("event " << i);
    const Event &e = c.events[i];
    CHECK(e.kind == want[i].kind);
    CHECK(e.api == want[i].api);
    CHECK(e.ptr == want[i].ptr);
    CHECK(e.size == want[i].size);
    CHECK(e.usable == want[i].usable);
    CHECK(e.stack_id == want[i].stack_id);
    CHECK(e.alignment == want[i].alignment);
    CHECK(e.tid == 11);
  }
  const Event *e = &c.events[want.size()];
  CHECK(e[0].kind == EventKind::kRealloc);
  CHECK(e[0].old_ptr == 0x5000);
  CHECK(e[0].ptr == 0x4000);
  CHECK(e[0].size == 100);
  CHECK(e[0].usable == 112);
  CHECK(e[0].stack_id == 7);
  CHECK(e[1].api == Api::kReallocArray);
  CHECK(e[1].old_ptr == 0x4000);
  CHECK(e[1].ptr == 0x9000);
  CHECK(e[2].kind == EventKind::kMark);
  CHECK(e[2].string_id == 3);
  CHECK(e[3].kind == EventKind::kTag);
  CHECK(e[3].ptr == 0x9000);
  CHECK(e[3].string_id == 4);
  CHECK(std::string(event_name(e[4])) == "fork");
  CHECK(e[4].ext_value == 777);
  CHECK(std::string(event_name(e[5])) == "snapshot");
  CHECK(e[5].ext_value == 2);
  CHECK(std::string(event_name(e[6])) == "lost");
  CHECK(e[6].ext_value == 12345);
  CHECK(std::string(event_name(e[7])) == "free_range");
  CHECK(e[7].api == Api::kSegPool);
  CHECK(e[7].ptr == 0x7000);
  CHECK(e[7].size == 0x2000);
  CHECK(e[8].kind == EventKind::kFree);
  CHECK(e[8].ptr == 0x9000);
}

TEST_CASE("negative pointer moves and large varints", "[reader]") {
  Block blk(1000, 1000, 5000);
  const uint64_t big = ~uint64_t{0};
  const uint64_t largest_size = (uint64_t{1} << 63) - 1; // sizes carry a flag bit
  blk.alloc(Api::kMalloc, 0xffffffffffff0000, largest_size - 8, largest_size, big);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);   // a huge downward move
  blk.free(Api::kFree, 0xfffffffffffffff0); // and back up
  blk.free(Api::kFree, 0);
  blk.alloc(Api::kAlignedAlloc, 0x1000, 64, 64, 2, 63);
  TraceBuilder t;
  t.events(1, blk).end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  REQUIRE(c.events.size() == 5);
  CHECK(c.events[0].ptr == 0xffffffffffff0000);
  CHECK(c.events[0].size == largest_size - 8);
  CHECK(c.events[0].usable == largest_size);
  CHECK(c.events[0].stack_id == big);
  CHECK(c.events[1].ptr == 0x10);
  CHECK(c.events[2].ptr == 0xfffffffffffffff0);
  CHECK(c.events[3].ptr == 0);
  CHECK(c.events[4].alignment == uint64_t{1} << 63);
}

TEST_CASE("blocks of several threads interleave in file order", "[reader]") {
  TraceBuilder t;
  Block a1(1000, 1000, 5000), b1(1100, 1100, 5100), a2(1200, 1200, 5200);
  a1.alloc(Api::kMalloc, 0x1000, 8, 8, 1).alloc(Api::kMalloc, 0x1010, 8, 8, 1);
  b1.alloc(Api::kNew, 0x2000, 16, 16, 2);
  a2.free(Api::kFree, 0x1010).free(Api::kFree, 0x1000);
  t.events(1, a1).events(2, b1).events(1, a2).end(5000, 9000);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  REQUIRE(c.events.size() == 5);
  std::vector<uint32_t> tids;
  std::vector<uint64_t> ptrs;
  for (const Event &e : c.events) {
    tids.push_back(e.tid);
    ptrs.push_back(e.ptr);
  }
  CHECK(tids == std::vector<uint32_t>{1, 1, 2, 1, 1});
  // Each block restarts prev_ptr at 0: a reader that carried it over would be off.
  CHECK(ptrs == std::vector<uint64_t>{0x1000, 0x1010, 0x2000, 0x1010, 0x1000});
  CHECK(c.events[2].tsc == 1100);
  CHECK(c.events[3].tsc == 1200);
}

TEST_CASE("skip_events passes over events records and lists them; restart reads again",
          "[reader]") {
  TraceBuilder t;
  Block a1(1000, 1000, 5000), b1(1100, 1100, 5100);
  a1.alloc(Api::kMalloc, 0x1000, 8, 8, 1).alloc(Api::kMalloc, 0x1010, 8, 8, 1);
  b1.alloc(Api::kNew, 0x2000, 16, 16, 2);
  TraceBuilder::RegionSpec heap{0x1000, 0x3000, 3, 1, 0, {}};
  t.events(1, a1).memory_map(1, 1050, 0, {heap}).events(2, b1).end(5000, 9000);
  Bytes b = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size(), "t.trace"));
  CHECK(r.prescanned());
  std::vector<uint64_t> offsets;
  r.skip_events(&offsets);
  std::vector<Item> items;
  for (Item it; (it = r.next()) != Item::kDone;)
    items.push_back(it);
  CHECK(r.status() == ReadStatus::kOk);
  CHECK(r.has_end());
  CHECK(offsets == std::vector<uint64_t>{t.record_offset(0), t.record_offset(2)});
  CHECK(std::count(items.begin(), items.end(), Item::kEvent) == 0);
  CHECK(std::count(items.begin(), items.end(), Item::kMemoryMap) == 1);

  REQUIRE(r.restart());
  CHECK(r.prescanned());
  size_t events = 0;
  for (Item it; (it = r.next()) != Item::kDone;)
    events += it == Item::kEvent;
  CHECK(events == 3); // read again, events included: restart forgot skip_events
  CHECK(offsets.size() == 2);
}

TEST_CASE("ticks advance the event time", "[reader]") {
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1).tick(500).alloc(Api::kMalloc, 0x20, 1, 1, 1);
  blk.tick(7).tick(3).free(Api::kFree, 0x10).tick(1); // a trailing tick yields nothing
  TraceBuilder t;
  t.events(1, blk).end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  REQUIRE(c.events.size() == 3);
  CHECK(c.events[0].tsc == 1000);
  CHECK(c.events[1].tsc == 1500);
  CHECK(c.events[2].tsc == 1510);
  CHECK(c.events[2].index == 5); // positions count ticks: they locate errors
}

TEST_CASE("tables decode and resolve", "[reader]") {
  TraceBuilder t;
  t.strings({{1, "main"}, {2, "phase-2"}, {3, ""}});
  t.stacks({{1, {0x401000, 0x402000}}, {2, {}}, {3, {~uint64_t{0}}}});
  t.thread(trace::ThreadEvent::kStart, 1500, 77, 0);
  t.thread(trace::ThreadEvent::kName, 1600, 77, 1);
  t.modules({{0x555500000000, "/bin/x", "\x01\x02\xab", {{0, 0x1000, 4}, {0x1000, 0x2000, 5}}},
             {0x7f0000000000, "/lib/libc.so.6", "", {}, trace::ModuleEvent::kUnloaded, 1700}});
  t.memory_map(9, 1800, trace::kMapPfns,
               {{0x10000, 0x20000, 3, 1, 0, {{0, 2, 100}, {3, 1, 500}}},
                {0x40000, 0x50000, 1, 2, 2048, {}}});
  Block blk(1900, 1900, 5900);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(77, blk);
  t.thread(trace::ThreadEvent::kExit, 1950, 77, 0);
  t.end(3000, 7000, 3, 10);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);

  CHECK(c.items == std::vector<Item>{Item::kStrings, Item::kStacks, Item::kThreads, Item::kThreads,
                                     Item::kModules, Item::kMemoryMap, Item::kEvent, Item::kThreads,
                                     Item::kEnd});
  REQUIRE(r.string(2));
  CHECK(*r.string(2) == "phase-2");
  REQUIRE(r.string(3));
  CHECK(r.string(3)->empty());
  CHECK(r.string(4) == nullptr);
  auto s1 = r.stack(1);
  CHECK(std::vector<uint64_t>(s1.begin(), s1.end()) == std::vector<uint64_t>{0x401000, 0x402000});
  CHECK(r.has_stack(2));
  CHECK(r.stack(2).empty());
  CHECK(r.stack(3)[0] == ~uint64_t{0});
  CHECK_FALSE(r.has_stack(4));
  REQUIRE(r.thread_name(77));
  CHECK(*r.thread_name(77) == "main");

  REQUIRE(c.threads.size() == 3);
  CHECK(c.threads[1].what == trace::ThreadEvent::kName);
  CHECK(c.threads[1].tid == 77);
  CHECK(c.threads[1].tsc == 1600);
  CHECK(c.threads[2].what == trace::ThreadEvent::kExit);

  REQUIRE(c.modules.size() == 2);
  CHECK(c.modules[0].path == "/bin/x");
  CHECK(c.modules[0].load_bias == 0x555500000000);
  CHECK(c.modules[0].build_id == "\x01\x02\xab");
  REQUIRE(c.modules[0].segments.size() == 2);
  CHECK(c.modules[0].segments[1].vaddr == 0x1000);
  CHECK(c.modules[0].segments[1].memsz == 0x2000);
  CHECK(c.modules[0].segments[1].flags == 5);
  CHECK(c.modules[1].what == trace::ModuleEvent::kUnloaded);
  CHECK(c.modules[1].tsc == 1700);
  CHECK(r.modules().size() == 2); // the prescan's copy, not doubled by next()

  REQUIRE(c.maps.size() == 1);
  const MemoryMap &m = c.maps[0];
  CHECK(m.snapshot_id == 9);
  CHECK(m.tsc == 1800);
  CHECK(m.flags == trace::kMapPfns);
  REQUIRE(m.regions.size() == 2);
  CHECK(m.regions[0].start == 0x10000);
  CHECK(m.regions[0].resident_pages == 3);
  auto runs = m.runs_of(m.regions[0]);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].first_page == 0);
  CHECK(runs[0].npages == 2);
  CHECK(runs[0].pfn == 100);
  CHECK(runs[1].first_page == 5); // delta 3 after the previous run's end (2)
  CHECK(runs[1].pfn == 500);
  CHECK(m.regions[1].kind == trace::RegionKind::kAnonymous);
  CHECK(m.regions[1].anon_huge_kib == 2048);
  CHECK(m.runs_of(m.regions[1]).empty());

  REQUIRE(c.end);
  CHECK(c.end->exit_status == 3u);
  CHECK(c.end->events == 10);
  CHECK(c.end->allocs == 1);
  CHECK(c.end->write_errors == 5);
}

TEST_CASE("tables come from the prescan even when written after the events", "[reader]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 42);
  t.events(1, blk).stacks({{42, {0xabc}}}).end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size()));
  REQUIRE(r.next() == Item::kEvent);
  REQUIRE(r.stack(r.event().stack_id).size() == 1);
  CHECK(r.stack(42)[0] == 0xabc);

  TraceReader lazy;
  REQUIRE(lazy.open_buffer(b.data(), b.size(), "t", TraceReader::Options{.prescan = false}));
  REQUIRE(lazy.next() == Item::kEvent);
  CHECK_FALSE(lazy.has_stack(42));
  drain(lazy);
  CHECK(lazy.has_stack(42));
  CHECK(lazy.status() == ReadStatus::kOk);
}

TEST_CASE("uncompressed and zero-length records", "[reader]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk, /*compress=*/false);
  t.record(trace::RecordType::kStrings, 0, 0, {});
  t.record(trace::RecordType::kStacks, 0, 0, {});
  t.record(trace::RecordType::kModules, 0, 0, {});
  t.record(trace::RecordType::kThread, 0, 0, {});
  t.record(trace::RecordType::kEvents, 5, 0, {});
  t.end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  CHECK(c.events.size() == 1);
  CHECK(c.items.size() == 6); // the empty events block yields nothing
}

TEST_CASE("clock conversion uses the widest pair", "[reader][clock]") {
  // 3 ticks per ns: header (1000, 5000 ns), end 1 s later.
  const uint64_t s = 1'000'000'000;
  Block blk(1000 + 3 * 1000, 1000 + 3 * 2000, 5000 + 2000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1).tick(3 * 1'000'000);
  blk.alloc(Api::kMalloc, 0x20, 1, 1, 1);
  TraceBuilder t;
  t.events(1, blk).end(1000 + 3 * s, 5000 + s);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  CHECK(r.clock_calibrated());
  CHECK(r.ticks_per_ns() == Approx(3.0));
  CHECK(r.ns_since_start(1000) == 0);
  CHECK(r.ns_since_start(c.events[0].tsc) == 1000);
  CHECK(r.ns_since_start(c.events[1].tsc) == 1'001'000);

  SECTION("without an end record the last block's pair is used") {
    TraceBuilder u;
    Block late(1000 + 3 * s, 1000 + 6 * s, 5000 + 2 * s);
    late.alloc(Api::kMalloc, 0x30, 1, 1, 1);
    u.events(1, blk).events(1, late);
    Bytes ub = u.bytes();
    TraceReader ur;
    REQUIRE(ur.open_buffer(ub.data(), ub.size()));
    Collected uc = drain(ur);
    CHECK(ur.status() == ReadStatus::kTruncated);
    CHECK(ur.clock_calibrated());
    CHECK(ur.ticks_per_ns() == Approx(3.0));
    CHECK(ur.ns_since_start(uc.events[2].tsc) == s);
  }
  SECTION("pairs closer than 50 us fall back to 1 tick = 1 ns and say so") {
    TraceBuilder u;
    u.events(1, blk).end(1000 + 3 * 40'000, 5000 + 40'000);
    Bytes ub = u.bytes();
    TraceReader ur;
    REQUIRE(ur.open_buffer(ub.data(), ub.size()));
    Collected uc = drain(ur);
    CHECK_FALSE(ur.clock_calibrated());
    CHECK(ur.ns_since_start(uc.events[0].tsc) == 3000);
    bool said = false;
    for (const Diagnostic &d : ur.warnings())
      said |= contains(d.message, "1 TSC tick = 1 ns");
    CHECK(said);
  }
}

TEST_CASE("foreign, empty and short files are refused with a reason", "[reader][errors]") {
  TraceReader r;
  CHECK_FALSE(r.open_buffer("", 0, "empty.trace"));
  CHECK(r.status() == ReadStatus::kUnreadable);
  CHECK(contains(r.error().message, "empty.trace"));
  CHECK(contains(r.error().message, "not a memlayout trace"));

  const char elf[] = "\x7f"
                     "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0\0\0\0";
  CHECK_FALSE(r.open_buffer(elf, sizeof elf, "a.out"));
  CHECK(contains(r.error().message, "a.out: offset 0: not a memlayout trace"));
  CHECK(r.fatal());

  CHECK_FALSE(r.open("/nonexistent/x.trace"));
  CHECK(contains(r.error().message, "/nonexistent/x.trace: cannot open"));

  TraceBuilder t;
  t.version = 2;
  Bytes b = t.bytes();
  CHECK_FALSE(r.open_buffer(b.data(), b.size(), "new.trace"));
  CHECK(contains(r.error().message, "unsupported trace version 2"));

  TraceBuilder h;
  Bytes hb = h.bytes();
  hb[10] = 3; // header_bytes = 3
  hb[11] = 0;
  CHECK_FALSE(r.open_buffer(hb.data(), hb.size(), "h.trace"));
  CHECK(contains(r.error().message, "header_bytes 3 out of range"));
}

TEST_CASE("a trace without an end record is partial", "[reader][errors]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk);
  Bytes b = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size(), "k.trace"));
  Collected c = drain(r);
  CHECK(c.events.size() == 1);
  CHECK(r.partial());
  CHECK_FALSE(r.fatal());
  CHECK(contains(r.error().message, "did not finish writing the trace (killed?, or it ended by the "
                                    "exit_group system call itself"));
  CHECK(r.error().offset == b.size());
}

// The recorder stopped at a file size limit: the trace is partial as one
// without an end record is, and says why, with the limit.
TEST_CASE("a stop record names why the trace ends", "[reader][errors]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk);
  memlayout::testing::Payload stop;
  stop.u8(static_cast<uint8_t>(trace::StopCause::kFileSizeLimit)).v(102400).v(101000);
  t.record(trace::RecordType::kStop, 0, 1, stop.b, false);
  Bytes b = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size(), "s.trace"));
  REQUIRE(r.stopped()); // known from the prescan, before next()
  CHECK(r.stopped()->limit == 102400);
  CHECK(r.stopped()->offset == 101000);
  Collected c = drain(r);
  CHECK(c.events.size() == 1);
  CHECK(std::count(c.items.begin(), c.items.end(), Item::kStop) == 1);
  for (const auto &w : r.warnings()) // a record this reader knows, not one it skips
    CHECK_FALSE(contains(w.message, "unknown type"));
  CHECK(r.partial());
  CHECK_FALSE(r.fatal());
  CHECK(r.error().message ==
        "s.trace: truncated at offset " + std::to_string(b.size()) +
            ": no end record; the file size limit (RLIMIT_FSIZE, ulimit -f) of 102400 bytes "
            "stopped the recorder: what the program did after it is not in the trace");
}

TEST_CASE("payload past the end of the file reports what is missing", "[reader][errors]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk).events(2, blk);
  Bytes b = t.bytes();
  size_t second = t.record_offset(1);
  b.resize(b.size() - 3);
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size(), "cut.trace"));
  Collected c = drain(r);
  CHECK(c.events.size() == 1);
  CHECK(r.status() == ReadStatus::kTruncated);
  size_t need = b.size() + 3 - second;
  std::string want = "cut.trace: truncated at offset " + std::to_string(second) +
                     ": events record needs " + std::to_string(need) + " bytes, " +
                     std::to_string(need - 3) + " available";
  CHECK(r.error().message == want);
}

// A length damaged in the middle of a whole trace is damage, not a trace
// cut short (which reads as a process killed while recording).
TEST_CASE("a length past the end with whole records after it is damage", "[reader][errors]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk).events(2, blk).end(2000, 6000);
  Bytes b = t.bytes();
  size_t second = t.record_offset(1);
  uint32_t huge = 1 << 20;
  std::memcpy(b.data() + second + offsetof(trace::RecordHeader, payload_bytes), &huge, sizeof huge);
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size(), "bad.trace"));
  drain(r);
  CHECK(r.status() == ReadStatus::kCorrupt);
  CHECK(contains(r.error().message, "offset " + std::to_string(second)));
  CHECK(contains(r.error().message, "its length is damaged"));
}

TEST_CASE("corrupt records are named by offset", "[reader][errors]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk).events(2, blk).end(2000, 6000);
  Bytes good = t.bytes();
  size_t second = t.record_offset(1);
  TraceReader r;

  SECTION("record magic") {
    Bytes b = good;
    b[second] ^= 0xff;
    REQUIRE(r.open_buffer(b.data(), b.size(), "m.trace"));
    Collected c = drain(r);
    CHECK(c.events.size() == 1);
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(r.error().offset == second);
    CHECK(contains(r.error().message, "record magic mismatch"));
    CHECK(contains(r.error().message, "offset " + std::to_string(second)));
  }
  SECTION("zstd frame damage") {
    Bytes b = good;
    b[second + sizeof(trace::RecordHeader) + 1] ^= 0x55; // inside the frame header
    REQUIRE(r.open_buffer(b.data(), b.size(), "z.trace"));
    drain(r);
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(r.error().offset == second);
    CHECK(contains(r.error().message, "zstd"));
  }
  SECTION("raw_bytes disagrees with the frame") {
    Bytes b = good;
    b[second + 16] += 1; // raw_bytes, low byte
    REQUIRE(r.open_buffer(b.data(), b.size(), "z.trace"));
    drain(r);
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(contains(r.error().message, "raw_bytes"));
  }
  SECTION("records larger than the limit") {
    Bytes b = good;
    uint32_t huge = trace::kMaxRecordBytes + 1;
    std::memcpy(&b[second + 16], &huge, 4);
    REQUIRE(r.open_buffer(b.data(), b.size(), "z.trace"));
    drain(r);
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(contains(r.error().message, "more than the limit"));
  }
}

TEST_CASE("event decoding errors name the record and event", "[reader][errors]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1).raw({6}); // kind 6 does not exist
  t.events(1, blk);
  Bytes b = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size(), "e.trace"));
  Collected c = drain(r);
  CHECK(c.events.size() == 1);
  CHECK(r.status() == ReadStatus::kCorrupt);
  CHECK(r.error().offset == t.record_offset(0));
  CHECK(contains(r.error().message, "event 1"));
  CHECK(contains(r.error().message, "unknown event kind 6"));

  SECTION("varint overrun") {
    TraceBuilder u;
    Block ub(1000, 1000, 5000);
    ub.raw({trace::event_head(EventKind::kAlloc, Api::kMalloc), 0x80, 0x80});
    u.events(1, ub);
    Bytes bb = u.bytes();
    REQUIRE(r.open_buffer(bb.data(), bb.size(), "v.trace"));
    drain(r);
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(contains(r.error().message, "overruns"));
  }
  SECTION("unknown ext kind") {
    TraceBuilder u;
    Block ub(1000, 1000, 5000);
    ub.ext(static_cast<trace::ExtKind>(9), 1);
    u.events(1, ub);
    Bytes bb = u.bytes();
    REQUIRE(r.open_buffer(bb.data(), bb.size(), "x.trace"));
    drain(r);
    CHECK(contains(r.error().message, "unknown ext event kind 9"));
  }
}

TEST_CASE("a block whose events disagree with its header's count is damage", "[reader][errors]") {
  // Stored raw (no checksum), a damaged byte can shift the fields after it
  // into other events that still decode: then only the count tells. Here
  // the count itself is off by one, the payload intact.
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x1000, 32, 32, 1)
      .free(Api::kMalloc, 0x1010)
      .free(Api::kMalloc, 0x1020)
      .free(Api::kMalloc, 0x1030);
  TraceBuilder t;
  t.events(1, blk, false).end(2000, 6000);
  Bytes good = t.bytes();
  TraceReader r;
  REQUIRE(read_ok(good, r).events.size() == 4);
  Bytes b = good;
  size_t count_at = t.record_offset(0) + offsetof(trace::RecordHeader, count);
  REQUIRE(b[count_at] == 4);
  b[count_at] = 5;

  SECTION("read event by event") {
    // Walked before its first event: none of a damaged raw block's events
    // is handed on.
    REQUIRE(r.open_buffer(b.data(), b.size(), "c.trace"));
    Collected c = drain(r);
    CHECK(r.error().offset == t.record_offset(0));
    CHECK(c.events.empty());
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(contains(r.error().message, "its header counts 5 events, its payload holds 4"));
  }
  SECTION("compressed, the same count is found at the block's end") {
    TraceBuilder z;
    z.events(1, blk, true).end(2000, 6000);
    Bytes zb = z.bytes();
    size_t at = z.record_offset(0) + offsetof(trace::RecordHeader, count);
    REQUIRE(zb[at] == 4);
    zb[at] = 5;
    REQUIRE(r.open_buffer(zb.data(), zb.size(), "z.trace"));
    REQUIRE(r.next() == Item::kEvent);
    BlockSkim skim;
    CHECK_FALSE(r.skim_block(skim));
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(contains(r.error().message, "its header counts 5 events"));
  }
  SECTION("a count of events in an empty block") {
    TraceBuilder u;
    u.record(trace::RecordType::kEvents, 5, 2, {});
    Bytes e = u.bytes();
    REQUIRE(r.open_buffer(e.data(), e.size(), "e.trace"));
    drain(r);
    CHECK(r.status() == ReadStatus::kCorrupt);
    CHECK(contains(r.error().message, "its header counts 2 events, its payload holds 0"));
  }
}

// Every allocation's usable size is decoded by the header's model: a value
// this version does not know is refused, not read as "no model".
TEST_CASE("a usable-size model the reader does not know is refused", "[reader]") {
  TraceBuilder t;
  t.u32(trace::HeaderTag::kUsableModel, 7);
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.events(1, blk).end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  CHECK_FALSE(r.open_buffer(b.data(), b.size(), "m.trace"));
  CHECK(r.status() == ReadStatus::kUnreadable);
  CHECK(contains(r.error().message, "usable_model holds 7, not a model this version knows"));
}

// One flipped bit in a header field's tag makes it a newer writer's field,
// which is skipped: the usable model then goes missing silently, and page
// size or pointer width nonsense would skew every page figure.
TEST_CASE("header fields the figures rest on are checked", "[reader]") {
  auto open = [](TraceBuilder &t, TraceReader &r) {
    Block blk(1000, 1000, 5000);
    blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
    t.events(1, blk).end(2000, 6000);
    Bytes b = t.bytes();
    bool ok = r.open_buffer(b.data(), b.size(), "h.trace");
    if (ok)
      drain(r);
    return ok;
  };
  {
    TraceBuilder t = TraceBuilder::bare();
    t.u32(trace::HeaderTag::kPid, 1).u32(trace::HeaderTag::kPageSize, 4096);
    TraceReader r;
    REQUIRE(open(t, r));
    bool warned = false;
    for (const Diagnostic &d : r.warnings())
      warned |= contains(d.message, "no usable_model field");
    CHECK(warned);
  }
  struct Nonsense {
    trace::HeaderTag tag;
    const char *name;
    uint32_t value;
  };
  for (Nonsense n : {Nonsense{trace::HeaderTag::kPageSize, "page_size", 0},
                     {trace::HeaderTag::kPageSize, "page_size", 3},
                     {trace::HeaderTag::kPageSize, "page_size", 4095},
                     {trace::HeaderTag::kPageSize, "page_size", 6000},
                     {trace::HeaderTag::kPointerBits, "pointer_bits", 0},
                     {trace::HeaderTag::kPointerBits, "pointer_bits", 16},
                     {trace::HeaderTag::kPointerBits, "pointer_bits", 200}}) {
    std::string expected = std::string(n.name) + " holds " + std::to_string(n.value);
    INFO(expected);
    TraceBuilder t;
    t.u32(n.tag, n.value);
    TraceReader r;
    CHECK_FALSE(open(t, r));
    CHECK(contains(r.error().message, expected));
  }
  // A field that only describes the recording reads on, doubted.
  for (uint32_t depth : {0u, 65u, 4278190088u}) {
    TraceBuilder t;
    t.u32(trace::HeaderTag::kStackDepth, depth);
    TraceReader r;
    REQUIRE(open(t, r));
    bool warned = false;
    for (const Diagnostic &d : r.warnings())
      warned |= contains(d.message, "stack_depth holds " + std::to_string(depth));
    CHECK(warned);
  }
  {
    TraceBuilder t;
    t.u32(trace::HeaderTag::kStackDepth, 8);
    TraceReader r;
    REQUIRE(open(t, r));
    for (const Diagnostic &d : r.warnings())
      CHECK_FALSE(contains(d.message, "stack_depth"));
  }
}

// What no recorder writes reads on, with a warning naming the place: events
// of a thread nothing started (a damaged tid), records after the end, and an
// end record after one that ended the process.
TEST_CASE("records out of place are read with a warning", "[reader]") {
  auto warnings_of = [](TraceBuilder &t) {
    Bytes b = t.bytes();
    TraceReader r;
    REQUIRE(r.open_buffer(b.data(), b.size(), "w.trace"));
    drain(r);
    std::string all;
    for (const Diagnostic &d : r.warnings())
      all += d.message + "\n";
    return all;
  };
  auto out_of_place = [](const std::string &w) {
    return contains(w, "thread record") || contains(w, "end record");
  };
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  {
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0).events(7, blk).end(2000, 6000);
    CHECK_FALSE(out_of_place(warnings_of(t)));
  }
  {
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0).events(2147483655u, blk).end(2000, 6000);
    CHECK(contains(warnings_of(t), "events of thread 2147483655, which no thread record started"));
  }
  {
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0).events(7, blk).end(2000, 6000).events(7, blk);
    CHECK(contains(warnings_of(t), "1 record after the end record at offset"));
  }
  {
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0).events(7, blk).end(2000, 6000).end(3000, 7000);
    CHECK(contains(warnings_of(t), "a second end record, after the one at offset"));
  }
  { // a failed exec goes on recording after an end of reason exec
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0)
        .events(7, blk)
        .end(2000, 6000, 0, 0, trace::EndReason::kExec)
        .end(3000, 7000);
    CHECK_FALSE(out_of_place(warnings_of(t)));
  }
  { // ... and may then be killed: no second end at all
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0)
        .events(7, blk)
        .end(2000, 6000, 0, 0, trace::EndReason::kExec)
        .events(7, blk);
    CHECK_FALSE(out_of_place(warnings_of(t)));
  }
  { // a thread's exit record after the end (its TLS destructors ran late)
    TraceBuilder t;
    t.thread(trace::ThreadEvent::kStart, 1000, 7, 0)
        .events(7, blk)
        .end(2000, 6000)
        .thread(trace::ThreadEvent::kExit, 2100, 8, 0);
    CHECK_FALSE(out_of_place(warnings_of(t)));
  }
  { // a forked child: events of its main thread (tid = pid), no start record
    TraceBuilder t;
    t.events(4242, blk).end(2000, 6000);
    CHECK_FALSE(out_of_place(warnings_of(t)));
  }
}

TEST_CASE("unknown record types are skipped with a warning", "[reader]") {
  TraceBuilder t;
  Block blk(1000, 1000, 5000);
  blk.alloc(Api::kMalloc, 0x10, 1, 1, 1);
  t.record(static_cast<trace::RecordType>(42), 0, 3, {1, 2, 3, 4});
  t.events(1, blk).end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  Collected c = read_ok(b, r);
  CHECK(c.events.size() == 1);
  bool warned = false;
  for (const Diagnostic &d : r.warnings())
    warned |= contains(d.message, "unknown type 42") && d.offset == t.record_offset(0);
  CHECK(warned);
}

namespace {

Bytes small_trace(TraceBuilder &t) {
  Block a(1000, 1000, 5000), b(1100, 1100, 5100);
  a.alloc(Api::kMalloc, 0x1000, 8, 8, 1).tick(5).free(Api::kFree, 0x1000).mark(1);
  b.realloc(Api::kRealloc, 0x2000, 0x1800, 40, 48, 2).tag(0x1800, 1);
  t.strings({{1, "m"}}).stacks({{1, {0x400000}}, {2, {0x400010, 0x400020}}});
  t.events(1, a).thread(trace::ThreadEvent::kStart, 1050, 2, 0).events(2, b, false);
  t.modules({{0, "/bin/x", "id", {{0, 0x1000, 5}}}});
  t.memory_map(1, 1200, 0, {{0x1000, 0x3000, 3, 1, 0, {}}});
  t.end(2000, 6000);
  return t.bytes();
}

} // namespace

TEST_CASE("a trace cut at every byte is partial or refused, never more", "[reader][robust]") {
  TraceBuilder t;
  Bytes full = small_trace(t);
  TraceReader r;
  Collected whole = read_ok(full, r);
  size_t header = t.header_size;
  for (size_t n = 0; n < full.size(); ++n) {
    INFO("cut at " << n);
    TraceReader cut;
    Bytes b(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    if (!cut.open_buffer(b.data(), b.size(), "cut")) {
      CHECK(n < header);
      CHECK(cut.status() == ReadStatus::kUnreadable);
      CHECK_FALSE(cut.error().message.empty());
      continue;
    }
    CHECK(n >= header);
    Collected c = drain(cut);
    CHECK(cut.status() == ReadStatus::kTruncated);
    CHECK(contains(cut.error().message, "truncated at offset"));
    CHECK(cut.error().offset <= n);
    // What was read is a prefix of the whole trace's events.
    REQUIRE(c.events.size() <= whole.events.size());
    for (size_t i = 0; i < c.events.size(); ++i)
      CHECK(c.events[i].ptr == whole.events[i].ptr);
  }
}

TEST_CASE("random byte flips never crash and errors carry an offset", "[reader][robust]") {
  TraceBuilder t;
  Bytes full = small_trace(t);
  std::mt19937_64 rng(12345);
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = full;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k)
      b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    TraceReader r;
    if (r.open_buffer(b.data(), b.size(), "flip")) {
      size_t events = 0;
      for (Item it; (it = r.next()) != Item::kDone;) {
        events += it == Item::kEvent;
        (void)r.ns_since_start(r.event().tsc);
        REQUIRE(events < 1000); // no hang, no runaway
      }
    }
    if (r.status() != ReadStatus::kOk) {
      ++errors;
      INFO(r.error().message);
      CHECK((contains(r.error().message, "offset ") || contains(r.error().message, "flip")));
    }
  }
  CHECK(errors > 0); // flips in headers and frames must be caught
}

TEST_CASE("a rules record: the rules, what each routed, the wrapper declarations", "[reader]") {
  memlayout::testing::Payload p;
  p.v(2).str("function=create_node,pool=nodes").v(17690).v(990640);
  p.str("size=48,pad=64").v(0).v(0);
  p.v(2).u8(0).str("pool_get").u8(1).str("new_node");
  TraceBuilder t;
  t.record(trace::RecordType::kRules, 0, 1, p.b);
  t.end(2000, 6000);
  Bytes b = t.bytes();
  TraceReader r;
  read_ok(b, r);
  REQUIRE(r.rules());
  const RulesRecord &rec = *r.rules();
  REQUIRE(rec.rules.size() == 2);
  CHECK(rec.rules[0].text == "function=create_node,pool=nodes");
  CHECK(rec.rules[0].allocations == 17690);
  CHECK(rec.rules[0].bytes == 990640);
  CHECK(rec.rules[1].allocations == 0);
  REQUIRE(rec.wrappers.size() == 2);
  CHECK(rec.wrappers[0].function == "pool_get");
  CHECK_FALSE(rec.wrappers[0].not_wrapper);
  CHECK(rec.wrappers[1].not_wrapper);

  SECTION("a rule that overruns its record is corruption, with the offset") {
    memlayout::testing::Payload bad;
    bad.v(1).v(500).u8('x'); // says 500 bytes of text, has one
    TraceBuilder u;
    u.record(trace::RecordType::kRules, 0, 1, bad.b);
    Bytes ub = u.bytes();
    TraceReader ur;
    REQUIRE(ur.open_buffer(ub.data(), ub.size(), "bad.trace"));
    drain(ur);
    CHECK(ur.status() == ReadStatus::kCorrupt);
    CHECK(ur.error().message.find("rules record") != std::string::npos);
  }
}

TEST_CASE("a reader opened again forgets the trace before", "[reader]") {
  TraceBuilder whole, cut;
  Block a(1000, 1000, 5000);
  a.alloc(Api::kMalloc, 0x1000, 8, 8, 1);
  whole.events(1, a).end(5000, 9000);
  cut.events(1, a); // no end record: cut short
  Bytes w = whole.bytes(), c = cut.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(w.data(), w.size(), "whole.trace"));
  for (Item it; (it = r.next()) != Item::kDone;) {
  }
  CHECK(r.final_end().has_value());
  REQUIRE(r.open_buffer(c.data(), c.size(), "cut.trace"));
  CHECK_FALSE(r.final_end().has_value());
  CHECK_FALSE(r.rules().has_value());
  for (Item it; (it = r.next()) != Item::kDone;) {
  }
  CHECK_FALSE(r.has_end());
  CHECK_FALSE(r.final_end().has_value());
}
