// ObjectSlab (inspector/heap/object_slab.h): every field comes back as put,
// whether it fits the compact record or needs the escape beside it, and
// take() returns the kept slots by address.
#include "object_slab.h"
#include "paged_array.h"

#include <catch2/catch.hpp>

#include <random>
#include <unistd.h>

using namespace memlayout;
using namespace memlayout::inspector;

namespace {

struct FakeEvent {
  uint64_t ptr, size, usable, stack_id;
  uint32_t tid;
  trace::Api api;
};

} // namespace

TEST_CASE("object slab: fields come back as put, narrow or escaped", "[object_slab]") {
  struct Case {
    FakeEvent e;
    uint64_t seq;
    uint32_t tag;
  };
  const uint64_t big = uint64_t{1} << 32;
  std::vector<Case> cases = {
      {{0x1000, 24, 32, 7, 100, trace::Api::kMalloc}, 1, 0},
      {{0x2000, big, big + 4096, 7, 101, trace::Api::kNew}, 2, 3},           // size past 32 bits
      {{0x3000, 48, 48, big * 3 + 5, 102, trace::Api::kCalloc}, 3, 4},       // stack id
      {{0x4000, 48, 48, 9, 0xfffffff0u, trace::Api::kNewArray}, 4, 5},       // tid: all 32 bits
      {{0x5000, 16, 16, 9, 103, trace::Api::kMalloc}, 5, 0xffff},            // tag: the marker
      {{0x6000, 16, 16, 9, 104, trace::Api::kMalloc}, 6, 70'000},            // tag past 16 bits
      {{0x7000, 16, 16, 9, 105, trace::Api::kMalloc}, uint64_t{1} << 41, 1}, // seq past 40
      {{0x8000, 0xffffffffu, 0xffffffffu, 0xffffffffu, 106, trace::Api::kRealloc}, 8, 0xfffe},
  };
  ObjectSlab slab;
  std::vector<bool> keep;
  // Slots are reused: an escaped object's slot taken by a narrow one and back.
  for (int round = 0; round < 3; ++round)
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case &c = cases[(k + round) % cases.size()];
      if (round == 0)
        slab.add();
      slab.put(static_cast<uint32_t>(k), c.e, c.seq, c.tag);
    }
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case &c = cases[(k + 2) % cases.size()];
    CHECK(slab.seq(static_cast<uint32_t>(k)) == c.seq);
    CHECK(slab.size_of(static_cast<uint32_t>(k)) == c.e.size);
    CHECK(slab.tag(static_cast<uint32_t>(k)) == c.tag);
  }
  // Tags changed in place, across the escape in both directions.
  slab.set_tag(0, 80'000);
  CHECK(slab.tag(0) == 80'000);
  slab.set_tag(0, 2);
  CHECK(slab.tag(0) == 2);
  slab.set_tag(0, cases[2].tag);
  keep.assign(cases.size(), true);
  keep[1] = false;
  std::vector<LiveObject> got = slab.take(keep);
  REQUIRE(got.size() == cases.size() - 1);
  size_t n = 0;
  for (const Case &c : cases) {
    if (c.e.ptr == cases[3].e.ptr) // slot 1 held cases[3]
      continue;
    const LiveObject &o = got[n++];
    INFO("object at " << std::hex << c.e.ptr);
    CHECK(o.addr == c.e.ptr);
    CHECK(o.size == c.e.size);
    CHECK(o.usable == c.e.usable);
    CHECK(o.stack_id == c.e.stack_id);
    CHECK(o.tid == c.e.tid);
    CHECK(o.api == c.e.api);
    CHECK(o.seq == c.seq);
    CHECK(o.tag_id == c.tag);
  }
  CHECK(slab.size() == 0);
}

TEST_CASE("object slab: take() of many slots sorts by address and frees its pages",
          "[object_slab]") {
  std::mt19937_64 rng(5);
  ObjectSlab slab;
  const size_t n = 100'000; // records over many pages, released as unpacked
  std::vector<bool> keep(n);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t addr = (rng() % (uint64_t{1} << 40)) * 16 + 16;
    uint32_t slot = slab.add();
    FakeEvent e{
        addr, i % 500, i % 500 + 8, i % 7, static_cast<uint32_t>(i % 3), trace::Api::kMalloc};
    slab.put(slot, e, i, 0);
    keep[i] = rng() % 3 != 0;
    kept += keep[i];
  }
  std::vector<LiveObject> got = slab.take(keep);
  REQUIRE(got.size() == kept);
  for (size_t i = 0; i < got.size(); ++i) {
    const LiveObject &o = got[i];
    REQUIRE(keep[o.seq]);
    REQUIRE(o.size == o.seq % 500);
    REQUIRE(o.usable == o.seq % 500 + 8);
    if (i > 0)
      REQUIRE(got[i - 1].addr <= o.addr);
  }
}

TEST_CASE("paged array: grows in place or moves, keeps its contents, released pages read zero",
          "[object_slab]") {
  PagedArray<uint64_t> a;
  for (uint64_t i = 0; i < 300'000; ++i) // many doublings by mremap
    a.emplace_back() = i * 3;
  REQUIRE(a.size() == 300'000);
  for (uint64_t i = 0; i < a.size(); i += 997)
    REQUIRE(a[i] == i * 3);
  size_t next = a.release(0, 100'000);
  CHECK(a[4096] == 0);              // inside a released page
  CHECK(a[100'001] == 100'001 * 3); // past the range: kept
  // `next` starts the page the range ends in, which is kept.
  CHECK(next <= 100'000);
  CHECK(100'000 - next < static_cast<size_t>(sysconf(_SC_PAGESIZE)) / sizeof(uint64_t));
  CHECK(a[next - 1] == 0);
  CHECK(a[next] == next * 3);
  CHECK(a.release(next, next + 1) == next); // less than a page: nothing
  PagedArray<uint64_t> b = std::move(a);
  CHECK(b.size() == 300'000);
  CHECK(a.size() == 0);
  b.shrink(10);
  CHECK(b.emplace_back() == 0); // a reused slot comes back zeroed
}
