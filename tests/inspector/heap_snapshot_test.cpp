#include "heap_snapshot.h"
#include "trace_builder.h"
#include "trace_reader.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <unistd.h>

using namespace memlayout;
using namespace memlayout::inspector;
using memlayout::testing::Block;
using memlayout::testing::Bytes;
using memlayout::testing::TraceBuilder;
using trace::Api;
using trace::EventKind;

namespace {

constexpr uint64_t kA = 0x10000, kB = 0x20000, kC = 0x30000, kD = 0x40000;

// Snapshot of an in-memory trace; fails the test on an error.
HeapSnapshot snap(const Bytes &bytes, SnapshotSpec spec = {}) {
  TraceReader r;
  REQUIRE(r.open_buffer(bytes.data(), bytes.size(), "t.trace"));
  HeapSnapshot s;
  std::string error;
  INFO(error);
  REQUIRE(build_snapshot(r, bytes, spec, s, error));
  return s;
}

SnapshotSpec at_end() { return {SnapshotPoint::kEnd, "", {}}; }
SnapshotSpec at_mark(std::string m) { return {SnapshotPoint::kMark, std::move(m), {}}; }

std::vector<uint64_t> addrs(const HeapSnapshot &s) {
  std::vector<uint64_t> a;
  for (const LiveObject &o : s.objects)
    a.push_back(o.addr);
  return a;
}

const LiveObject *find(const HeapSnapshot &s, uint64_t addr) {
  for (const LiveObject &o : s.objects)
    if (o.addr == addr)
      return &o;
  return nullptr;
}

// One thread: A(100) B(200) | mark phase1 | free A, C(500) -> peak 700 at
// tsc 1300 | free C, D(50) | mark phase2 at tsc 1600.
Bytes phases() {
  TraceBuilder t;
  t.strings({{1, "phase1"}, {2, "phase2"}, {3, "unused"}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 100, 112, 1).tick(100).alloc(Api::kMalloc, kB, 200, 208, 2);
  b.tick(100).mark(1).free(Api::kFree, kA).tick(100).alloc(Api::kNew, kC, 500, 512, 3);
  b.tick(100).free(Api::kDelete, kC).tick(100).alloc(Api::kMalloc, kD, 50, 56, 4);
  b.tick(100).mark(2);
  t.events(7, b);
  t.end(2000, 6000);
  return t.bytes();
}

} // namespace

TEST_CASE("peak, end and mark snapshots of one thread", "[snapshot]") {
  Bytes bytes = phases();

  HeapSnapshot peak = snap(bytes);
  CHECK(addrs(peak) == std::vector<uint64_t>{kB, kC});
  CHECK(peak.live_bytes == 700);
  CHECK(peak.live_usable_bytes == 720);
  CHECK(peak.ts_ns == 300); // tsc 1300, 1 tick = 1 ns from the start tsc 1000
  CHECK_FALSE(peak.partial);
  REQUIRE(find(peak, kC));
  CHECK(find(peak, kC)->api == Api::kNew);
  CHECK(find(peak, kC)->stack_id == 3);
  CHECK(find(peak, kC)->tid == 7);
  CHECK(find(peak, kC)->size == 500);
  CHECK(find(peak, kC)->usable == 512);
  CHECK(find(peak, kB)->seq < find(peak, kC)->seq);

  HeapSnapshot end = snap(bytes, at_end());
  CHECK(addrs(end) == std::vector<uint64_t>{kB, kD});
  CHECK(end.live_bytes == 250);
  CHECK(end.events == 6);

  HeapSnapshot m1 = snap(bytes, at_mark("phase1"));
  CHECK(addrs(m1) == std::vector<uint64_t>{kA, kB});
  CHECK(m1.ts_ns == 200);
  CHECK(m1.events == 2);
  HeapSnapshot m2 = snap(bytes, at_mark("phase2"));
  CHECK(addrs(m2) == std::vector<uint64_t>{kB, kD});

  TraceReader r;
  REQUIRE(r.open_buffer(bytes.data(), bytes.size(), "t.trace"));
  HeapSnapshot s;
  std::string error;
  CHECK_FALSE(build_snapshot(r, bytes, at_mark("phase3"), s, error));
  CHECK(error == "no mark named phase3 in t.trace; marks in it: phase1, phase2");
}

TEST_CASE("peak ties keep the first moment", "[snapshot]") {
  TraceBuilder t;
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 100, 112, 1).tick(10).free(Api::kFree, kA);
  b.tick(10).alloc(Api::kMalloc, kB, 100, 112, 2);
  t.events(1, b).end(2000, 6000);
  HeapSnapshot s = snap(t.bytes());
  CHECK(addrs(s) == std::vector<uint64_t>{kA});
}

TEST_CASE("a free by one thread goes before another's reuse of the address at the same stamp",
          "[snapshot]") {
  // T2's block lies first in the file, so at tsc 200 it is merged first; but
  // T1 frees A at that stamp and T2 gets A back: the free really came first.
  uint64_t t2_alloc_tsc = GENERATE(200, 150); // equal, and inverted by a stale sample
  TraceBuilder t;
  Block t2(t2_alloc_tsc, 0, 0);
  t2.alloc(Api::kMalloc, kA, 64, 72, 2).tick(300).free(Api::kFree, kA);
  Block t1(100, 0, 0);
  t1.alloc(Api::kMalloc, kA, 32, 40, 1).tick(100).free(Api::kFree, kA);
  t.events(22, t2).events(11, t1).end(2000, 6000);
  Bytes bytes = t.bytes();

  HeapSnapshot peak = snap(bytes);
  REQUIRE(peak.objects.size() == 1);
  CHECK(peak.objects[0].size == 64);
  CHECK(peak.objects[0].tid == 22);
  CHECK(peak.live_bytes == 64);
  CHECK(peak.double_allocs == 0);
  CHECK(peak.unknown_frees == 0);

  HeapSnapshot end = snap(bytes, at_end());
  CHECK(end.objects.empty());
  CHECK(end.live_bytes == 0);
  CHECK(end.double_allocs == 0);
  CHECK(end.unknown_frees == 0);
}

TEST_CASE("a thread preempted between its sample and its allocation: the free it follows is "
          "found up to its next sample",
          "[snapshot]") {
  // 1 tick per 3 ns (the end's clock pair): the 1 ms causality window is
  // 333 334 ticks. T2's allocation carries its last sample, 200, though it
  // came after T1's free (stamped 1 000 000: T2 waited in between); T2's next
  // sample, 1 000 010, bounds when the allocation happened.
  TraceBuilder t;
  Block t1(100, 0, 0);
  t1.alloc(Api::kMalloc, kA, 32, 40, 1).tick(999'900).free(Api::kFree, kA);
  Block t2(200, 0, 0);
  t2.alloc(Api::kMalloc, kA, 64, 72, 2).tick(999'810).free(Api::kFree, kA);
  t.events(11, t1).events(22, t2).end(3'000'000, 9'000'000);
  Bytes bytes = t.bytes();
  for (HeapSnapshot s : {snap(bytes), snap(bytes, at_end())}) {
    CHECK(s.double_allocs == 0);
    CHECK(s.unknown_frees == 0);
  }
  HeapSnapshot peak = snap(bytes);
  REQUIRE(peak.objects.size() == 1);
  CHECK(peak.objects[0].tid == 22);
  CHECK(snap(bytes, at_end()).objects.empty());
}

TEST_CASE("a free stamped before its allocation by another thread still frees it", "[snapshot]") {
  // T1 allocates A at 1000 (a fresh sample); T2 frees it later, but carries
  // its last sample, 900: merged first, the free finds nothing. The object
  // must not live on: it is freed on arrival, and the free is not unknown.
  // Twice, so the address goes round again.
  TraceBuilder t;
  Block t1(1000, 0, 0);
  t1.alloc(Api::kMalloc, kA, 64, 72, 1).tick(1000).alloc(Api::kMalloc, kA, 48, 56, 2);
  t1.tick(1000).alloc(Api::kMalloc, kB, 32, 40, 3);
  Block t2(900, 0, 0);
  t2.free(Api::kFree, kA).tick(1000).free(Api::kFree, kA);
  t.events(11, t1).events(22, t2).end(2'000'000, 6'000'000);
  HeapSnapshot end = snap(t.bytes(), at_end());
  CHECK(addrs(end) == std::vector<uint64_t>{kB});
  CHECK(end.unknown_frees == 0);
  CHECK(end.double_allocs == 0);

  // The same thread's free before its own allocation is in order: a free of
  // memory from before the trace, and the allocation lives.
  TraceBuilder u;
  Block one(900, 0, 0);
  one.free(Api::kFree, kA).tick(100).alloc(Api::kMalloc, kA, 64, 72, 1);
  u.events(11, one).end(2'000'000, 6'000'000);
  HeapSnapshot same = snap(u.bytes(), at_end());
  CHECK(addrs(same) == std::vector<uint64_t>{kA});
  CHECK(same.unknown_frees == 1);
}

TEST_CASE("a free stamped long before its allocation by another thread frees it up to the "
          "freeing thread's next sample",
          "[snapshot]") {
  // 1 tick per 3 ns: the 1 ms window is 333 334 ticks. T2 frees A with its
  // last sample, 200, though the free came after T1's allocation at
  // 1 000 000 (T2 waited between its sample and the free, as threads do with
  // more of them than CPUs); T2's next sample, 1 000 100, bounds the free.
  TraceBuilder t;
  Block t1(1'000'000, 0, 0);
  t1.alloc(Api::kMalloc, kA, 64, 72, 1).tick(1'000).alloc(Api::kMalloc, kB, 32, 40, 2);
  Block t2(200, 0, 0);
  t2.free(Api::kFree, kA).tick(999'900).alloc(Api::kMalloc, kC, 16, 24, 3);
  t.events(11, t1).events(22, t2).end(3'000'000, 9'000'000);
  HeapSnapshot end = snap(t.bytes(), at_end());
  CHECK(addrs(end) == std::vector<uint64_t>{kB, kC});
  CHECK(end.unknown_frees == 0);
  CHECK(end.double_allocs == 0);
}

TEST_CASE("a reused address with no pending free drops the old object once", "[snapshot]") {
  TraceBuilder t;
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 100, 112, 1).alloc(Api::kMalloc, kA, 30, 40, 2);
  t.events(1, b).end(2000, 6000);
  HeapSnapshot s = snap(t.bytes(), at_end());
  REQUIRE(s.objects.size() == 1);
  CHECK(s.objects[0].size == 30);
  CHECK(s.live_bytes == 30);
  CHECK(s.double_allocs == 1);
}

TEST_CASE("realloc chains move, resize and keep the tag", "[snapshot]") {
  TraceBuilder t;
  t.strings({{5, "buffer"}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 10, 24, 1).tag(kA, 5);
  b.realloc(Api::kRealloc, kA, kB, 20, 24, 2);     // moved
  b.realloc(Api::kRealloc, kB, kB, 30, 40, 3);     // in place
  b.realloc(Api::kRealloc, kB, kC, 40, 40, 4);     // moved again
  b.realloc(Api::kRealloc, kD, kD + 64, 8, 24, 5); // unknown old pointer
  b.realloc(Api::kRealloc, kD + 64, 0, 0, 0, 6);   // realloc(p, 0) frees
  t.events(3, b).end(2000, 6000);
  HeapSnapshot s = snap(t.bytes(), at_end());
  REQUIRE(addrs(s) == std::vector<uint64_t>{kC});
  const LiveObject &o = s.objects[0];
  CHECK(o.size == 40);
  CHECK(o.usable == 40);
  CHECK(o.stack_id == 4);
  CHECK(o.api == Api::kRealloc);
  CHECK(o.tag_id == 5);
  CHECK(s.live_bytes == 40);
  CHECK(s.unknown_frees == 1);
}

TEST_CASE("tags name the live object at their address", "[snapshot]") {
  TraceBuilder t;
  t.strings({{1, "node"}, {2, "edge"}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 48, 56, 1).tag(kA, 1).alloc(Api::kMalloc, kB, 48, 56, 1);
  b.tag(kD, 2); // nothing lives there: ignored
  b.free(Api::kFree, kB).alloc(Api::kMalloc, kB, 48, 56, 1);
  b.tag(kB, 2).free(Api::kFree, kB).alloc(Api::kMalloc, kB, 48, 56, 1); // a new object: untagged
  t.events(1, b).end(2000, 6000);
  HeapSnapshot s = snap(t.bytes(), at_end());
  REQUIRE(s.objects.size() == 2);
  CHECK(find(s, kA)->tag_id == 1);
  CHECK(find(s, kB)->tag_id == 0);
}

TEST_CASE("the peak's own object keeps the tag its thread gives it next", "[snapshot]") {
  // allocate, then tag: the tag's event comes after the peak's allocation
  TraceBuilder t;
  t.strings({{1, "node"}, {2, "edge"}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 100, 112, 1).tag(kA, 2).alloc(Api::kMalloc, kB, 200, 208, 1);
  b.tag(kB, 1).free(Api::kFree, kA).tag(kB, 2); // a later retag is not the peak's
  t.events(1, b).end(2000, 6000);
  for (bool observed : {false, true}) { // one replay rolled back; a replay to the peak
    INFO((observed ? "replayed to the peak" : "rolled back"));
    SnapshotSpec spec;
    if (observed)
      spec.observer = [](const AppliedEvent &) {};
    HeapSnapshot s = snap(t.bytes(), spec);
    REQUIRE(s.objects.size() == 2);
    CHECK(find(s, kA)->tag_id == 2);
    CHECK(find(s, kB)->tag_id == 1);
  }
}

TEST_CASE("frees of unknown addresses are counted, not subtracted", "[snapshot]") {
  TraceBuilder t;
  Block b(1000, 1000, 5000);
  b.free(Api::kFree, kD).alloc(Api::kMalloc, kA, 100, 112, 1).free(Api::kFree, kB);
  b.free(Api::kFree, kA).free(Api::kFree, kA); // a double free counts too
  t.events(1, b).end(2000, 6000);
  HeapSnapshot s = snap(t.bytes(), at_end());
  CHECK(s.objects.empty());
  CHECK(s.live_bytes == 0);
  CHECK(s.unknown_frees == 3);
}

TEST_CASE("a truncated trace gives its prefix's snapshot, marked partial", "[snapshot]") {
  TraceBuilder t;
  Block b1(1000, 1000, 5000);
  b1.alloc(Api::kMalloc, kA, 100, 112, 1).alloc(Api::kMalloc, kB, 100, 112, 1);
  Block b2(2000, 2000, 6000);
  b2.free(Api::kFree, kA).alloc(Api::kMalloc, kC, 100, 112, 1);
  t.events(1, b1).events(1, b2).end(3000, 7000);
  Bytes full = t.bytes();
  Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(t.record_offset(1) + 30));

  HeapSnapshot s = snap(cut, at_end());
  CHECK(s.partial);
  CHECK(addrs(s) == std::vector<uint64_t>{kA, kB});

  HeapSnapshot whole = snap(full, at_end());
  CHECK_FALSE(whole.partial);
  CHECK(addrs(whole) == std::vector<uint64_t>{kB, kC});
}

TEST_CASE("the memory map taken first at or after the point, else the last before", "[snapshot]") {
  TraceBuilder t;
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 100, 112, 1).tick(500).alloc(Api::kMalloc, kB, 100, 112, 1);
  b.tick(500).free(Api::kFree, kB).tick(3000).free(Api::kFree, kA);
  // Peak at tsc 1500, end at tsc 5000.
  TraceBuilder::RegionSpec heap{0x10000, 0x50000, 3, 1, 0, {}};
  t.memory_map(1, 900, 0, {heap});
  t.events(1, b);
  t.memory_map(3, 2500, 0, {heap}); // in the file before map 2, taken after it
  t.memory_map(2, 1600, 0, {heap});
  t.memory_map(4, 4000, 0, {heap});
  t.end(6000, 10000);
  Bytes bytes = t.bytes();

  HeapSnapshot peak = snap(bytes);
  REQUIRE(peak.memory_map);
  CHECK(peak.memory_map->snapshot_id == 2);
  CHECK(peak.memory_map->regions.size() == 1);

  HeapSnapshot end = snap(bytes, at_end());
  REQUIRE(end.memory_map);
  CHECK(end.memory_map->snapshot_id == 4);

  TraceBuilder none;
  none.events(1, b).end(6000, 10000);
  CHECK_FALSE(snap(none.bytes()).memory_map);
}

TEST_CASE("threads merge by time even when a block lies late in the file", "[snapshot]") {
  // Real order: A@1000, B@2000 (peak A+B = 1100), free A@3000, C@3000,
  // free B@4000. In file order T2's block comes last, which would put the
  // peak at C+B.
  TraceBuilder t;
  Block t1a(1000, 0, 0);
  t1a.alloc(Api::kMalloc, kA, 100, 112, 1);
  Block t1b(3000, 0, 0);
  t1b.free(Api::kFree, kA).alloc(Api::kMalloc, kC, 10, 24, 1);
  Block t2(2000, 0, 0);
  t2.alloc(Api::kMalloc, kB, 1000, 1008, 2).tick(2000).free(Api::kFree, kB);
  t.events(1, t1a).events(1, t1b).events(2, t2).end(6000, 10000);
  Bytes bytes = t.bytes();

  HeapSnapshot peak = snap(bytes);
  CHECK(addrs(peak) == std::vector<uint64_t>{kA, kB});
  CHECK(peak.live_bytes == 1100);
  CHECK(peak.ts_ns == 1000);
  CHECK(find(peak, kB)->tid == 2);
  CHECK(find(peak, kA)->seq < find(peak, kB)->seq);

  HeapSnapshot end = snap(bytes, at_end());
  CHECK(addrs(end) == std::vector<uint64_t>{kC});
}

TEST_CASE("a trace on disk is re-read from its file", "[snapshot]") {
  Bytes bytes = phases();
  std::string path = "/tmp/memlayout_snapshot_test." + std::to_string(::getpid()) + ".trace";
  memlayout::testing::write_file(path, bytes);
  TraceReader r;
  REQUIRE(r.open(path));
  HeapSnapshot s;
  std::string error;
  bool ok = build_snapshot(r, SnapshotSpec{}, s, error);
  std::remove(path.c_str());
  REQUIRE(ok);
  CHECK(addrs(s) == std::vector<uint64_t>{kB, kC});
}

TEST_CASE("a trace that cannot be read is an error", "[snapshot]") {
  Bytes junk(64, 'x');
  TraceReader r;
  CHECK_FALSE(r.open_buffer(junk.data(), junk.size(), "junk"));
  HeapSnapshot s;
  std::string error;
  CHECK_FALSE(build_snapshot(r, junk, SnapshotSpec{}, s, error));
  CHECK(error.find("junk") != std::string::npos);
}

TEST_CASE("containers grow past the index's live bound when unknown frees mislead it",
          "[snapshot]") {
  // Each thread frees 3000 addresses it never allocated, allocates 4000 and
  // frees 1000 of them (thread 2 after thread 1): its block's net count says
  // at most 1000 live, so the index bounds the live count at 2000 while 7000
  // are live at the peak. The replay's containers must grow.
  TraceBuilder t;
  t.strings({{1, "mid"}});
  for (uint32_t tid : {1u, 2u}) {
    uint64_t base = tid * 0x10000000ull;
    Block b(1000 * tid, 1000 * tid, 5000);
    for (uint64_t i = 0; i < 3000; ++i)
      b.free(Api::kFree, base + 0x8000000 + i * 64);
    for (uint64_t i = 0; i < 4000; ++i)
      b.alloc(Api::kMalloc, base + i * 64, 32, 32, 1);
    if (tid == 2)
      b.mark(1);
    for (uint64_t i = 0; i < 1000; ++i)
      b.free(Api::kFree, base + i * 64);
    t.events(tid, b);
  }
  t.end(9000, 9000);
  Bytes bytes = t.bytes();
  HeapSnapshot peak = snap(bytes);
  CHECK(peak.objects.size() == 7000);
  CHECK(peak.live_bytes == 7000 * 32);
  CHECK(peak.unknown_frees == 6000);
  HeapSnapshot mid = snap(bytes, at_mark("mid"));
  CHECK(mid.objects.size() == 7000);
  HeapSnapshot end = snap(bytes, at_end());
  CHECK(end.objects.size() == 6000);
  CHECK(std::is_sorted(end.objects.begin(), end.objects.end(),
                       [](const LiveObject &a, const LiveObject &b) { return a.addr < b.addr; }));
}

TEST_CASE("a trace with lost events is sized by an exact first replay", "[snapshot]") {
  // Frees were lost: A is allocated again without one. The index's bound
  // would count it twice; the snapshot is the same either way.
  TraceBuilder t;
  t.strings({{1, "m"}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 10, 16, 1).ext(trace::ExtKind::kLost, 1);
  b.alloc(Api::kMalloc, kA, 20, 32, 1).alloc(Api::kMalloc, kB, 30, 32, 1).mark(1);
  b.free(Api::kFree, kB);
  t.events(1, b);
  t.end(2000, 6000);
  Bytes bytes = t.bytes();
  HeapSnapshot end = snap(bytes, at_end());
  CHECK(addrs(end) == std::vector<uint64_t>{kA});
  CHECK(end.double_allocs == 1);
  CHECK(find(end, kA)->size == 20);
  HeapSnapshot m = snap(bytes, at_mark("m"));
  CHECK(addrs(m) == std::vector<uint64_t>{kA, kB});
  HeapSnapshot peak = snap(bytes);
  CHECK(addrs(peak) == std::vector<uint64_t>{kA, kB});
  CHECK(peak.live_bytes == 50);
}

namespace {

// A multi-threaded heap with the recorder's habits: each thread's block goes
// into the file when it fills (so blocks lie out of time order), stamps are
// sampled every few events (so a thread's stamp lags its real time), and an
// address one thread frees soon comes back from another thread's
// allocation. In each of two rounds the heap grows (to `live` objects, then
// a quarter more), churns, then frees nine in ten: each peak is followed by
// many frees of objects that were live at it.
struct HeapScript {
  unsigned threads = 3;
  uint64_t live = 300;
  uint64_t churn = 3000;
  bool tags = true;
  uint64_t seed = 1;
};

Bytes scripted_heap(const HeapScript &h) {
  std::mt19937_64 rng(h.seed);
  TraceBuilder t;
  t.strings({{1, "red"}, {2, "green"}, {3, "blue"}});
  struct Thread {
    uint32_t tid;
    uint64_t stamp;
    Block block;
    uint32_t events = 0, flush_at = 0;
  };
  uint64_t now = 1000, fresh = 0x100000;
  std::vector<Thread> threads;
  for (unsigned i = 0; i < h.threads; ++i)
    threads.push_back({100 + i, now, Block(now, now, now), 0, 40});
  std::vector<uint64_t> live, freed; // addresses; freed: most recent last
  auto take_addr = [&] {
    if (!freed.empty() && rng() % 10 < 7) {
      uint64_t a = freed.back();
      freed.pop_back();
      return a;
    }
    return fresh += 64;
  };
  auto drop = [&](size_t k) {
    uint64_t a = live[k];
    live[k] = live.back();
    live.pop_back();
    freed.push_back(a);
    return a;
  };
  enum class Phase { kGrow, kChurn, kDrain };
  for (uint64_t target : {h.live, h.live + h.live / 4})
    for (auto [phase, churned] = std::pair{Phase::kGrow, uint64_t{0}};;) {
      if (phase == Phase::kGrow && live.size() >= target)
        phase = Phase::kChurn;
      if (phase == Phase::kChurn && churned++ == h.churn)
        phase = Phase::kDrain;
      if (phase == Phase::kDrain && live.size() <= target / 10)
        break;
      Thread &th = threads[rng() % threads.size()];
      now += 1 + rng() % 4;
      if (++th.events % 4 == 0) { // a stale stamp until the next sample
        th.block.tick(now - th.stamp);
        th.stamp = now;
      }
      uint64_t size = 8 + rng() % 500;
      if (uint64_t big = rng() % 2000; big < 2) // past what compact encodings of sizes hold
        size = big == 0 ? uint64_t{5} << 30 : uint64_t{20} << 20;
      uint64_t usable = (size + 15) & ~uint64_t{15};
      uint64_t stack = 1 + rng() % 5;
      if (rng() % 100 == 0) // past the 32 bits a compact record holds
        stack += uint64_t{1} << 33;
      bool grow = phase == Phase::kGrow, drain = phase == Phase::kDrain;
      unsigned r = static_cast<unsigned>(rng() % 100);
      if (grow || (!drain && r < 45) || live.empty()) {
        uint64_t a = take_addr();
        th.block.alloc(Api::kMalloc, a, size, usable, stack);
        live.push_back(a);
      } else if (drain || r < 85) {
        th.block.free(Api::kFree, drop(rng() % live.size()));
      } else if (r < 93) {
        size_t k = rng() % live.size();
        uint64_t old = live[k];
        uint64_t a = rng() % 3 == 0 ? old : take_addr();
        if (a != old) {
          drop(k);
          live.push_back(a);
        }
        th.block.realloc(Api::kRealloc, old, a, size, usable, stack);
      } else if (h.tags && r < 97) {
        // Now and then a string id past the 16 bits a compact record holds.
        th.block.tag(live[rng() % live.size()], rng() % 40 == 0 ? 70'000 : 1 + rng() % 3);
      } else {
        th.block.free(Api::kFree, 0x7000000000 + rng() % 64 * 64); // never allocated
      }
      if (th.events >= th.flush_at) {
        t.events(th.tid, th.block);
        th.block = Block(th.stamp, th.stamp, th.stamp);
        th.events = 0;
        th.flush_at = 20 + static_cast<uint32_t>(rng() % 60);
      }
    }
  std::shuffle(threads.begin(), threads.end(), rng);
  for (Thread &th : threads)
    t.events(th.tid, th.block);
  t.end(now + 1, now + 1);
  return t.bytes();
}

// With an observer the peak is found by one replay and rebuilt by a second
// that stops there: the reference for every other way of finding it.
SnapshotSpec observed_peak() {
  SnapshotSpec s;
  s.observer = [](const AppliedEvent &) {};
  return s;
}

void check_same_snapshot(const HeapSnapshot &got, const HeapSnapshot &want) {
  REQUIRE(got.objects.size() == want.objects.size());
  size_t differ = 0;
  for (size_t i = 0; i < got.objects.size(); ++i) {
    const LiveObject &a = got.objects[i], &b = want.objects[i];
    differ += a.addr != b.addr || a.size != b.size || a.usable != b.usable ||
              a.stack_id != b.stack_id || a.tid != b.tid || a.tag_id != b.tag_id ||
              a.api != b.api || a.seq != b.seq;
  }
  CHECK(differ == 0);
  CHECK(got.live_bytes == want.live_bytes);
  CHECK(got.live_usable_bytes == want.live_usable_bytes);
  CHECK(got.ts_ns == want.ts_ns);
  CHECK(got.events == want.events);
  CHECK(got.unknown_frees == want.unknown_frees);
  CHECK(got.double_allocs == want.double_allocs);
}

} // namespace

TEST_CASE("one replay rolls back to the peak: the same snapshot as replaying to it", "[snapshot]") {
  HeapScript h;
  h.seed = GENERATE(range(1, 9));
  h.tags = h.seed % 2 == 0;
  h.threads = 2 + h.seed % 3;
  INFO("seed " << h.seed);
  Bytes bytes = scripted_heap(h);
  HeapSnapshot want = snap(bytes, observed_peak());
  REQUIRE(want.objects.size() > h.live / 2);
  check_same_snapshot(snap(bytes), want);
}

TEST_CASE("most of the peak's objects freed after it: one replay keeps them all", "[snapshot]") {
  // 200 000 objects live at the first peak and 180 000 of them freed after
  // it; a second, higher peak recycles what was kept for the first.
  HeapScript h;
  h.threads = 2;
  h.live = 200'000;
  h.churn = 20'000;
  h.tags = GENERATE(false, true);
  Bytes bytes = scripted_heap(h);
  HeapSnapshot want = snap(bytes, observed_peak());
  REQUIRE(want.objects.size() > 200'000); // the second peak
  check_same_snapshot(snap(bytes), want);
}

TEST_CASE("more tags changed after the peak than the rollback journals: the same snapshot",
          "[snapshot]") {
  // 100 objects, then 70 000 tags of them (more than the journal keeps:
  // the most of 64 Ki entries and the objects live at the peak), then half
  // freed: the rollback gives up and a replay to the peak rebuilds it.
  TraceBuilder t;
  t.strings({{1, "red"}, {2, "green"}});
  Block b(1000, 1000, 1000);
  for (uint64_t i = 0; i < 100; ++i)
    b.alloc(Api::kMalloc, 0x10000 + i * 64, 48, 48, 1);
  for (uint64_t i = 0; i < 70'000; ++i)
    b.tag(0x10000 + i % 100 * 64, 1 + i % 2);
  for (uint64_t i = 0; i < 50; ++i)
    b.free(Api::kFree, 0x10000 + i * 128);
  t.events(7, b);
  t.end(2000, 2000);
  Bytes bytes = t.bytes();
  HeapSnapshot want = snap(bytes, observed_peak());
  REQUIRE(want.objects.size() == 100);
  for (const LiveObject &o : want.objects)
    REQUIRE(o.tag_id == 0); // untagged at the peak
  check_same_snapshot(snap(bytes), want);
}

TEST_CASE("decoding on a second thread: the same merged order and snapshot as on one",
          "[snapshot]") {
  HeapScript h;
  h.seed = GENERATE(range(11, 17));
  h.threads = 2 + h.seed % 4;
  h.tags = h.seed % 2 == 1;
  INFO("seed " << h.seed);
  Bytes bytes = scripted_heap(h);
  struct Applied {
    EventKind kind;
    uint64_t seq, ptr, old_ptr;
    bool operator==(const Applied &) const = default;
  };
  auto run = [&](SnapshotSpec spec, bool decode_thread, std::vector<Applied> &order) {
    spec.decode_thread = decode_thread;
    spec.observer = [&](const AppliedEvent &e) {
      order.push_back({e.kind, e.seq, e.ptr, e.old_ptr});
    };
    return snap(bytes, spec);
  };
  for (SnapshotSpec spec : {SnapshotSpec{}, at_end()}) {
    std::vector<Applied> one, two;
    HeapSnapshot a = run(spec, false, one), b = run(spec, true, two);
    REQUIRE(one.size() > 300);
    CHECK(one == two);
    check_same_snapshot(b, a);
    // And without an observer: the peak's one replay, the end's.
    SnapshotSpec plain = spec;
    plain.decode_thread = true;
    check_same_snapshot(snap(bytes, plain), a);
  }
}

TEST_CASE("the observer is given an aligned allocation's alignment, not its address's",
          "[snapshot]") {
  // replay re-runs allocations at the alignment the program asked for: 32
  // for a block that landed on a 64 KiB boundary, not 64 KiB.
  TraceBuilder t;
  Block b(1000, 1000, 5000);
  b.alloc(Api::kPosixMemalign, 0x10000, 96, 96, 1, 5)
      .alloc(Api::kAlignedAlloc, 0x20000, 4096, 4096, 1, 12)
      .alloc(Api::kMalloc, 0x30000, 64, 72, 1);
  t.events(1, b, false).end(2000, 6000);
  std::vector<uint64_t> alignments;
  SnapshotSpec spec = at_end();
  spec.observer = [&](const AppliedEvent &e) { alignments.push_back(e.alignment); };
  snap(t.bytes(), spec);
  CHECK(alignments == std::vector<uint64_t>{32, 4096, 0});
}

TEST_CASE("a destroyed pool's range ends every object live in it, and only those", "[snapshot]") {
  // kB and kB + 0x100 are in the pool's range [kB, kC); kA, kC are not.
  TraceBuilder t;
  t.strings({{1, "mark"}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, kA, 100, 112, 1)
      .alloc(Api::kSegPool, kB, 64, 64, 2)
      .alloc(Api::kSegPool, kB + 0x100, 64, 64, 2)
      .alloc(Api::kMalloc, kC, 32, 32, 3)
      .tick(10)
      .free_range(kB, kC - kB)
      .tick(10)
      .mark(1)
      .alloc(Api::kSegPool, kB + 0x100, 48, 48, 2); // the range reused: a new object
  t.events(1, b).end(2000, 6000);
  Bytes bytes = t.bytes();

  HeapSnapshot m = snap(bytes, at_mark("mark"));
  CHECK(addrs(m) == std::vector<uint64_t>{kA, kC});
  CHECK(m.live_bytes == 132);
  HeapSnapshot end = snap(bytes, at_end());
  CHECK(addrs(end) == std::vector<uint64_t>{kA, kB + 0x100, kC});
  CHECK(end.double_allocs == 0);
  HeapSnapshot peak = snap(bytes);
  CHECK(peak.live_bytes == 260); // before the destruction

  // The observer sees a free per object ended, in address order.
  std::vector<std::pair<EventKind, uint64_t>> seen;
  SnapshotSpec spec = at_end();
  spec.observer = [&](const AppliedEvent &e) {
    if (e.kind == EventKind::kFree)
      seen.emplace_back(e.kind, e.ptr);
  };
  snap(bytes, spec);
  CHECK(seen == std::vector<std::pair<EventKind, uint64_t>>{{EventKind::kFree, kB},
                                                            {EventKind::kFree, kB + 0x100}});
}

TEST_CASE("a malformed block: the index on two threads stops where the one on one does",
          "[snapshot]") {
  TraceBuilder t;
  Block b1(1000, 1000, 5000);
  b1.alloc(Api::kMalloc, kA, 100, 112, 1).alloc(Api::kMalloc, kB, 100, 112, 1);
  Block b2(2000, 2000, 6000);
  b2.free(Api::kFree, kA).alloc(Api::kMalloc, kC, 100, 112, 1);
  Block b3(2500, 2500, 6500);
  b3.alloc(Api::kMalloc, kD, 100, 112, 1);
  t.events(1, b1, false).events(2, b2, false).events(1, b3, false).end(3000, 7000);
  Bytes bytes = t.bytes();
  // b2's last byte (the last stack id) becomes a varint running past its payload.
  bytes[t.record_offset(2) - 1] = 0x80;
  bool prescan = GENERATE(true, false);
  std::vector<std::string> errors;
  std::vector<std::vector<uint64_t>> heaps;
  for (bool two_threads : {false, true}) {
    TraceReader r;
    TraceReader::Options opts;
    opts.prescan = prescan;
    REQUIRE(r.open_buffer(bytes.data(), bytes.size(), "t.trace", opts));
    SnapshotSpec spec = at_end();
    spec.decode_thread = two_threads;
    HeapSnapshot s;
    std::string error;
    REQUIRE(build_snapshot(r, bytes, spec, s, error));
    CHECK(s.partial);
    CHECK(r.status() == ReadStatus::kCorrupt);
    errors.push_back(r.error().message);
    heaps.push_back(addrs(s));
  }
  CHECK(errors[0] == errors[1]);
  CHECK(errors[0].find("offset") != std::string::npos);
  CHECK(heaps[0] == heaps[1]);
  // b2 is stored raw and damaged: none of its events is used (the reader
  // walks such a block before handing on its first); b3 is past the damage.
  CHECK(heaps[0] == std::vector<uint64_t>{kA, kB});
}
