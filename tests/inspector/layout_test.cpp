#include "colocation.h"
#include "line_layout.h"
#include "page_spread.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace memlayout::inspector;

namespace {

// A synthetic heap: objects placed by hand into groups, turned into the
// address-sorted snapshot and groups the analyses read.
class Heap {
public:
  uint32_t group() { return groups_++; }

  void add(uint32_t group, uint64_t addr, uint64_t size, uint32_t tid = 1, uint64_t usable = 0) {
    placed_.push_back({addr, size, usable ? usable : size, tid, group});
  }

  void build() {
    std::sort(placed_.begin(), placed_.end(),
              [](const Placed &a, const Placed &b) { return a.addr < b.addr; });
    snap.objects.clear();
    groups.assign(groups_, Group{});
    for (uint32_t g = 0; g < groups_; ++g)
      groups[g].id = 100 + g; // ids differ from positions on purpose
    for (const Placed &p : placed_) {
      LiveObject o;
      o.addr = p.addr;
      o.size = p.size;
      o.usable = p.usable;
      o.tid = p.tid;
      Group &g = groups[p.group];
      g.objects.push_back(static_cast<uint32_t>(snap.objects.size()));
      if (std::find(g.threads.begin(), g.threads.end(), p.tid) == g.threads.end())
        g.threads.push_back(p.tid);
      g.bytes += p.size;
      snap.objects.push_back(o);
    }
  }

  HeapSnapshot snap;
  std::vector<Group> groups;

private:
  struct Placed {
    uint64_t addr, size, usable;
    uint32_t tid, group;
  };
  std::vector<Placed> placed_;
  uint32_t groups_ = 0;
};

constexpr uint64_t kBase = 0x7f0000000000; // 2 MiB-aligned

const PairColocation *find_pair(const Colocation &c, uint32_t a, uint32_t b) {
  for (const PairColocation &p : c.pairs)
    if (p.a == a && p.b == b)
      return &p;
  return nullptr;
}

uint64_t value(const Colocation &c, uint32_t a, uint32_t b, ColocationMetric m) {
  const PairColocation *p = find_pair(c, a, b);
  return p ? metric_value(*p, m) : 0;
}

} // namespace

// ---------------------------------------------------------------- line layout

TEST_CASE("48-byte objects from a 48-byte class: offsets 0/48/32/16, half span two lines",
          "[line_layout]") {
  Heap h;
  const uint32_t g = h.group();
  for (uint64_t i = 0; i < 256; ++i)
    h.add(g, kBase + 48 * i, 48);
  h.build();

  const LineLayout whole = analyse_line_layout(h.snap, h.groups[g]);
  CHECK(whole.objects == 256);
  CHECK(whole.straddle_fraction == Approx(0.5));
  CHECK(whole.straddling == 128);
  CHECK(whole.lines_per_object == Approx(1.5));
  CHECK(whole.min_lines_per_object == Approx(1.0));
  const std::vector<uint64_t> quarters = offset_buckets(whole.offset_histogram, 16);
  CHECK(quarters == std::vector<uint64_t>{64, 64, 64, 64});
  CHECK(whole.offset_histogram[0] == 64);
  CHECK(whole.offset_histogram[8] == 0);
  // The objects at 48 and at 32 cross a boundary, those at 0 and 16 do not.
  CHECK(whole.straddling_by_offset[48] == 64);
  CHECK(whole.straddling_by_offset[32] == 64);
  CHECK(whole.straddling_by_offset[0] == 0);
  CHECK(whole.straddling_by_offset[16] == 0);
  REQUIRE(whole.strides.size() == 1);
  CHECK(whole.strides[0].bytes == 48);
  CHECK(whole.strides[0].share == Approx(1.0));

  SECTION("a 24-byte hot prefix: one in four straddles (only the object at offset 48)") {
    LineLayoutOptions o;
    o.hot = {0, 24};
    const LineLayout hot = analyse_line_layout(h.snap, h.groups[g], o);
    CHECK(hot.hot.bytes == 24);
    CHECK(hot.straddle_fraction == Approx(0.25));
    CHECK(hot.straddling_by_offset[48] == 64);
    CHECK(hot.straddling_by_offset[32] == 0);
  }
  SECTION("a hot part 16 bytes in (make_shared's T): measured from there") {
    // Bytes 16-48 of objects at line offsets 0, 48, 32, 16 start at 16, 0,
    // 48, 32: only the one at 48 (the object at 32) crosses a line.
    LineLayoutOptions o;
    o.hot = {16, 32};
    const LineLayout hot = analyse_line_layout(h.snap, h.groups[g], o);
    CHECK(hot.straddle_fraction == Approx(0.25));
    CHECK(hot.straddling_by_offset[48] == 64);
    CHECK(hot.offset_histogram[16] == 64);
    CHECK(hot.offset_histogram[0] == 64);
    CHECK(hot.straddling_by_offset[0] == 0);
  }
  SECTION("a hot prefix longer than the object is the whole object") {
    LineLayoutOptions o;
    o.hot = {0, 1000};
    CHECK(analyse_line_layout(h.snap, h.groups[g], o).straddle_fraction == Approx(0.5));
  }
}

TEST_CASE("64-byte line-aligned objects never straddle", "[line_layout]") {
  Heap h;
  const uint32_t g = h.group();
  for (uint64_t i = 0; i < 100; ++i)
    h.add(g, kBase + 64 * i, 64);
  h.build();
  const LineLayout l = analyse_line_layout(h.snap, h.groups[g]);
  CHECK(l.straddling == 0);
  CHECK(l.straddle_fraction == 0.0);
  CHECK(l.lines_per_object == Approx(1.0));
  CHECK(l.offset_histogram[0] == 100);
}

TEST_CASE("64-byte objects 16-aligned at random offsets straddle 75% of the time",
          "[line_layout]") {
  Heap h;
  const uint32_t g = h.group();
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i < 20000; ++i)
    h.add(g, kBase + 128 * i + 16 * (rng() % 4), 64);
  h.build();
  const LineLayout l = analyse_line_layout(h.snap, h.groups[g]);
  CHECK(l.straddle_fraction == Approx(0.75).margin(0.02));
  CHECK(l.lines_per_object == Approx(1.75).margin(0.02));
  // Straddlers start anywhere but at offset 0.
  CHECK(l.straddling_by_offset[0] == 0);
  CHECK(l.straddling == l.objects - l.offset_histogram[0]);
}

TEST_CASE("objects larger than a line straddle only beyond their minimum", "[line_layout]") {
  Heap h;
  const uint32_t g = h.group();
  h.add(g, kBase, 100);             // 2 lines, needs 2
  h.add(g, kBase + 4096 + 32, 100); // 3 lines ([32, 132)), needs 2
  h.add(g, kBase + 8192 + 60, 8);   // 2 lines, needs 1
  h.add(g, kBase + 12288, 0);       // malloc(0): its start line
  h.build();
  const LineLayout l = analyse_line_layout(h.snap, h.groups[g]);
  CHECK(l.straddling == 2);
  CHECK(l.lines_per_object == Approx((2 + 3 + 2 + 1) / 4.0));
  CHECK(l.min_lines_per_object == Approx((2 + 2 + 1 + 1) / 4.0));

  SECTION("with 128-byte lines the 100-byte object at 32 fits one") {
    LineLayoutOptions o;
    o.line_size = 128;
    const LineLayout wide = analyse_line_layout(h.snap, h.groups[g], o);
    CHECK(wide.offset_histogram.size() == 128);
    CHECK(wide.straddling == 1); // only [32, 132) crosses a 128-byte boundary
  }
}

TEST_CASE("dominant strides: int-lf nodes 128 bytes apart 90% of the time", "[line_layout]") {
  Heap h;
  const uint32_t nodes = h.group();
  uint64_t addr = kBase;
  for (int i = 0; i < 1001; ++i) {
    h.add(nodes, addr, 64);
    addr += (i % 10 == 9) ? 4096 : 128; // a new slab now and then
  }
  h.build();
  const LineLayout l = analyse_line_layout(h.snap, h.groups[nodes]);
  REQUIRE(l.strides.size() == 2);
  CHECK(l.strides[0].bytes == 128);
  CHECK(l.strides[0].count == 900);
  CHECK(l.strides[0].share == Approx(0.9));
  CHECK(l.strides[1].bytes == 4096);
  CHECK(l.strides[1].share == Approx(0.1));
}

TEST_CASE("strides: at most the top three, equal counts shorter first", "[line_layout]") {
  Heap h;
  const uint32_t g = h.group();
  const uint64_t gaps[] = {64, 64, 64, 256, 256, 32, 32, 512, 512, 1024};
  uint64_t addr = kBase;
  h.add(g, addr, 16);
  for (uint64_t gap : gaps)
    h.add(g, addr += gap, 16);
  h.build();
  const LineLayout l = analyse_line_layout(h.snap, h.groups[g]);
  REQUIRE(l.strides.size() == 3);
  CHECK(l.strides[0].bytes == 64);
  CHECK(l.strides[1].bytes == 32);
  CHECK(l.strides[2].bytes == 256);
  CHECK(l.strides[0].share == Approx(0.3));
}

TEST_CASE("line layout of an empty group and of an unsorted index list", "[line_layout]") {
  Heap h;
  const uint32_t g = h.group();
  h.build();
  const LineLayout empty = analyse_line_layout(h.snap, h.groups[g]);
  CHECK(empty.objects == 0);
  CHECK(empty.straddle_fraction == 0.0);
  CHECK(empty.strides.empty());

  Heap u;
  const uint32_t ug = u.group();
  for (uint64_t i = 0; i < 4; ++i)
    u.add(ug, kBase + 256 * i, 64);
  u.build();
  Group reversed = u.groups[ug];
  std::reverse(reversed.objects.begin(), reversed.objects.end());
  const LineLayout l = analyse_line_layout(u.snap, reversed);
  REQUIRE(l.strides.size() == 1);
  CHECK(l.strides[0].bytes == 256);
}

// ----------------------------------------------------------------- colocation

TEST_CASE("edge-ext-lf: 75% of leaves share a line with their parent", "[colocation]") {
  Heap h;
  const uint32_t parents = h.group(), leaves = h.group();
  for (uint64_t k = 0; k < 400; ++k) {
    const uint64_t block = kBase + 256 * k;
    h.add(parents, block, 32);
    // Three of four leaves right behind their parent; the fourth alone on a line.
    h.add(leaves, k % 4 == 3 ? block + 128 : block + 32, 32);
  }
  h.build();
  const Colocation c = analyse_colocation(h.snap, h.groups);
  REQUIRE(c.group_ids == std::vector<uint32_t>{100, 101});
  CHECK(c.group_objects == std::vector<uint64_t>{400, 400});
  CHECK(value(c, leaves, parents, ColocationMetric::kSameLine) == 300);
  CHECK(value(c, parents, leaves, ColocationMetric::kSameLine) == 300);
  CHECK(value(c, leaves, leaves, ColocationMetric::kSameLine) == 0);
  CHECK(value(c, parents, parents, ColocationMetric::kSameLine) == 0);
  // The lone leaf at +128 is on line 2 of the block, the buddy of line 3,
  // which is empty: no adjacent-line neighbour for anyone.
  CHECK(value(c, leaves, parents, ColocationMetric::kAdjacentLine) == 0);
  CHECK(value(c, leaves, parents, ColocationMetric::kSamePage) == 400);
  CHECK(value(c, leaves, leaves, ColocationMetric::kSamePage) == 400);

  const std::vector<double> m = colocation_matrix(c, ColocationMetric::kSameLine);
  REQUIRE(m.size() == 4);
  CHECK(m[leaves * 2 + parents] == Approx(0.75));
  CHECK(m[leaves * 2 + leaves] == 0.0);

  const std::vector<PairColocation> top = top_pairs(c, ColocationMetric::kSameLine, 5);
  REQUIRE(top.size() == 2);
  CHECK(top[0].a == parents); // equal counts and shares: positions decide
  CHECK(top[1].a == leaves);
  CHECK(c.cross_thread_lines == 0);
  CHECK(c.false_sharing_lines == 0);
}

TEST_CASE("int-lf: every node's adjacent line holds a descriptor", "[colocation]") {
  for (uint64_t shift : {uint64_t{0}, uint64_t{64}}) {
    Heap h;
    const uint32_t nodes = h.group(), descs = h.group();
    for (uint64_t i = 0; i < 500; ++i) {
      h.add(nodes, kBase + shift + 128 * i, 64);
      h.add(descs, kBase + shift + 128 * i + 64, 64);
    }
    h.build();
    const Colocation c = analyse_colocation(h.snap, h.groups);
    INFO("shift " << shift);
    // Shifted by a line, the first node's buddy and the last descriptor's are
    // outside the heap: empty.
    const uint64_t expect = shift ? 499 : 500;
    CHECK(value(c, nodes, descs, ColocationMetric::kAdjacentLine) == expect);
    CHECK(value(c, descs, nodes, ColocationMetric::kAdjacentLine) == expect);
    CHECK(value(c, nodes, descs, ColocationMetric::kSameLine) == 0);
    CHECK(value(c, nodes, nodes, ColocationMetric::kAdjacentLine) == 0);
    CHECK(colocation_matrix(c, ColocationMetric::kAdjacentLine)[nodes * 2 + descs] ==
          Approx(expect / 500.0));
  }
}

TEST_CASE("a 128-byte object covering its whole pair has no adjacent line", "[colocation]") {
  Heap h;
  const uint32_t big = h.group(), small = h.group();
  h.add(big, kBase, 128);        // lines 0 and 1: pair 0 entirely
  h.add(small, kBase + 128, 64); // line 2
  h.add(big, kBase + 256, 128);  // lines 4 and 5
  h.add(small, kBase + 384, 64); // line 6
  h.add(big, kBase + 448, 128);  // lines 7 and 8: buddies 6 and 9
  h.build();
  const Colocation c = analyse_colocation(h.snap, h.groups);
  // Only the last big object has a line whose buddy is not its own: line 7 -> 6.
  CHECK(value(c, big, small, ColocationMetric::kAdjacentLine) == 1);
  CHECK(value(c, small, big, ColocationMetric::kAdjacentLine) == 1);
  CHECK(value(c, big, small, ColocationMetric::kSameLine) == 0);
}

TEST_CASE("48-byte row locks allocated back to back by two threads share every line",
          "[colocation]") {
  Heap h;
  const uint32_t locks = h.group();
  const uint64_t n = 1000;
  for (uint64_t i = 0; i < n; ++i)
    h.add(locks, kBase + 48 * i, 48, i % 2 ? 2 : 1);
  h.build();
  const uint64_t lines = 48 * n / 64;
  const Colocation c = analyse_colocation(h.snap, h.groups);
  CHECK(c.cross_thread_lines == lines);
  CHECK(c.false_sharing_lines == lines);
  CHECK(c.cross_thread_pairs == lines / 2);
  CHECK(value(c, locks, locks, ColocationMetric::kCrossThreadLines) == lines);
  CHECK(value(c, locks, locks, ColocationMetric::kFalseSharingLines) == lines);
  CHECK(value(c, locks, locks, ColocationMetric::kSameLine) == n);
  CHECK(c.group_lines[locks] == lines);
  CHECK(c.group_cross_thread_lines[locks] == lines);
  CHECK(c.group_false_sharing_lines[locks] == lines);
  CHECK(top_pairs(c, ColocationMetric::kFalseSharingLines, 3).empty()); // only self
  CHECK(top_pairs(c, ColocationMetric::kFalseSharingLines, 3, true).size() == 1);

  SECTION("one thread: no sharing across threads") {
    Heap one;
    const uint32_t g = one.group();
    for (uint64_t i = 0; i < n; ++i)
      one.add(g, kBase + 48 * i, 48, 7);
    one.build();
    const Colocation c1 = analyse_colocation(one.snap, one.groups);
    CHECK(c1.cross_thread_lines == 0);
    CHECK(c1.false_sharing_lines == 0);
    CHECK(value(c1, g, g, ColocationMetric::kCrossThreadLines) == 0);
  }
  SECTION("large records of different threads share lines without being candidates") {
    Heap big;
    const uint32_t a = big.group(), b = big.group();
    for (uint64_t i = 0; i < 100; ++i)
      big.add(i % 2 ? a : b, kBase + 200 * i, 200, i % 2 ? 1 : 2);
    big.build();
    const Colocation cb = analyse_colocation(big.snap, big.groups);
    CHECK(cb.cross_thread_lines > 0);
    CHECK(cb.false_sharing_lines == 0);
    CHECK(value(cb, a, b, ColocationMetric::kCrossThreadLines) == cb.cross_thread_lines);
    CHECK(value(cb, b, a, ColocationMetric::kCrossThreadLines) == cb.cross_thread_lines);
  }
}

TEST_CASE("objects in no group are left out of co-location", "[colocation]") {
  Heap h;
  const uint32_t g = h.group(), other = h.group();
  h.add(g, kBase, 16);
  h.add(other, kBase + 16, 16, 2);
  h.build();
  std::vector<Group> only = {h.groups[g]};
  const Colocation c = analyse_colocation(h.snap, only);
  CHECK(c.pairs.empty());
  CHECK(c.cross_thread_lines == 0);
}

TEST_CASE("a large object meets its neighbours only at its ends, once per group", "[colocation]") {
  Heap h;
  const uint32_t big = h.group(), small = h.group();
  h.add(small, kBase + 32, 32);
  h.add(big, kBase + 64 + 32, 10000); // lines 1..157, pages 0..2
  h.add(small, kBase + 64 + 32 + 10000, 16);
  h.build();
  const Colocation c = analyse_colocation(h.snap, h.groups);
  CHECK(value(c, big, small, ColocationMetric::kSameLine) == 1); // the one behind it
  CHECK(value(c, small, big, ColocationMetric::kSameLine) == 1);
  CHECK(value(c, big, small, ColocationMetric::kAdjacentLine) == 1); // line 1's buddy 0
  CHECK(value(c, big, small, ColocationMetric::kSamePage) == 1);     // both ends, once
  CHECK(value(c, small, big, ColocationMetric::kSamePage) == 2);
  CHECK(value(c, small, small, ColocationMetric::kSamePage) == 0); // pages 0 and 2
  CHECK(c.group_lines[big] == 157);
  CHECK(c.group_lines[small] == 2);
  CHECK(c.overlapping_objects == 0);
}

namespace {

// The definitions, object pair by object pair: O(n^2) and obviously right.
struct Reference {
  std::map<std::pair<uint32_t, uint32_t>, PairColocation> pairs;
  uint64_t cross_lines = 0, cross_pairs = 0, fs_lines = 0;
  std::vector<uint64_t> group_lines, group_cross, group_fs;
};

Reference brute_force(const Heap &h, const ColocationOptions &o) {
  const auto &objs = h.snap.objects;
  std::vector<uint32_t> group_of(objs.size());
  for (uint32_t g = 0; g < h.groups.size(); ++g)
    for (uint32_t i : h.groups[g].objects)
      group_of[i] = g;
  auto first = [&](uint32_t i, uint64_t unit) { return objs[i].addr / unit; };
  auto last = [&](uint32_t i, uint64_t unit) {
    return (objs[i].addr + std::max<uint64_t>(objs[i].size, 1) - 1) / unit;
  };
  auto touches = [&](uint32_t j, uint64_t unit_index, uint64_t unit) {
    return first(j, unit) <= unit_index && unit_index <= last(j, unit);
  };
  Reference r;
  r.group_lines.assign(h.groups.size(), 0);
  r.group_cross.assign(h.groups.size(), 0);
  r.group_fs.assign(h.groups.size(), 0);
  for (uint32_t i = 0; i < objs.size(); ++i) {
    std::set<uint32_t> line, adj, page;
    for (uint32_t j = 0; j < objs.size(); ++j) {
      if (j == i)
        continue;
      const uint32_t b = group_of[j];
      if (first(j, o.line_size) <= last(i, o.line_size) &&
          first(i, o.line_size) <= last(j, o.line_size))
        line.insert(b);
      if (first(j, o.page_size) <= last(i, o.page_size) &&
          first(i, o.page_size) <= last(j, o.page_size))
        page.insert(b);
      for (uint64_t l = first(i, o.line_size); l <= last(i, o.line_size); ++l) {
        const uint64_t buddy = l ^ 1;
        const bool own = buddy >= first(i, o.line_size) && buddy <= last(i, o.line_size);
        if (!own && touches(j, buddy, o.line_size))
          adj.insert(b);
      }
    }
    const uint32_t a = group_of[i];
    for (uint32_t b : line)
      ++r.pairs[{a, b}].same_line;
    for (uint32_t b : adj)
      ++r.pairs[{a, b}].adjacent_line;
    for (uint32_t b : page)
      ++r.pairs[{a, b}].same_page;
  }
  // Threads, per line and per 128-byte pair.
  for (uint64_t unit : {uint64_t{o.line_size}, uint64_t{o.line_size} * 2}) {
    std::map<uint64_t, std::vector<uint32_t>> cells;
    for (uint32_t i = 0; i < objs.size(); ++i)
      for (uint64_t k = first(i, unit); k <= last(i, unit); ++k)
        cells[k].push_back(i);
    for (const auto &[key, members] : cells) {
      std::set<std::pair<uint32_t, uint32_t>> cross, fs;
      std::set<uint32_t> present, group_cross, group_fs;
      for (uint32_t x : members)
        present.insert(group_of[x]);
      bool any_cross = false, any_fs = false;
      for (uint32_t x : members)
        for (uint32_t y : members) {
          if (objs[x].tid == objs[y].tid)
            continue;
          any_cross = true;
          cross.insert({group_of[x], group_of[y]});
          group_cross.insert(group_of[x]);
          if (objs[x].size <= o.small_object_bytes || objs[y].size <= o.small_object_bytes) {
            any_fs = true;
            fs.insert({group_of[x], group_of[y]});
            group_fs.insert(group_of[x]);
          }
        }
      if (unit == o.line_size) {
        r.cross_lines += any_cross;
        r.fs_lines += any_fs;
        for (const auto &p : cross)
          ++r.pairs[p].cross_thread_lines;
        for (const auto &p : fs)
          ++r.pairs[p].false_sharing_lines;
        for (uint32_t g : present)
          ++r.group_lines[g];
        for (uint32_t g : group_cross)
          ++r.group_cross[g];
        for (uint32_t g : group_fs)
          ++r.group_fs[g];
      } else {
        r.cross_pairs += any_cross;
        for (const auto &p : cross)
          ++r.pairs[p].cross_thread_pairs;
      }
    }
  }
  return r;
}

} // namespace

TEST_CASE("the sweep agrees with the pairwise definitions on random heaps", "[colocation]") {
  const uint64_t sizes[] = {1, 8, 16, 24, 40, 48, 64, 72, 100, 128, 200, 300, 5000};
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    Heap h;
    const uint32_t ngroups = 1 + seed % 5;
    for (uint32_t g = 0; g < ngroups; ++g)
      h.group();
    uint64_t addr = kBase + 8 * (rng() % 64);
    for (int i = 0; i < 600; ++i) {
      const uint64_t size = sizes[rng() % std::size(sizes)];
      h.add(static_cast<uint32_t>(rng() % ngroups), addr, size,
            1 + static_cast<uint32_t>(rng() % 3));
      addr += size + 8 * (rng() % 3) + (rng() % 20 == 0 ? 4096 : 0);
      addr = (addr + 7) & ~uint64_t{7};
    }
    h.build();
    ColocationOptions o;
    const Colocation c = analyse_colocation(h.snap, h.groups, o);
    const Reference r = brute_force(h, o);
    INFO("seed " << seed);
    CHECK(c.overlapping_objects == 0);
    CHECK(c.cross_thread_lines == r.cross_lines);
    CHECK(c.cross_thread_pairs == r.cross_pairs);
    CHECK(c.false_sharing_lines == r.fs_lines);
    CHECK(c.group_lines == r.group_lines);
    CHECK(c.group_cross_thread_lines == r.group_cross);
    CHECK(c.group_false_sharing_lines == r.group_fs);
    size_t nonzero = 0;
    for (const auto &[key, want] : r.pairs) {
      const PairColocation *got = find_pair(c, key.first, key.second);
      REQUIRE(got != nullptr);
      INFO("pair " << key.first << "," << key.second);
      CHECK(got->same_line == want.same_line);
      CHECK(got->adjacent_line == want.adjacent_line);
      CHECK(got->same_page == want.same_page);
      CHECK(got->cross_thread_lines == want.cross_thread_lines);
      CHECK(got->cross_thread_pairs == want.cross_thread_pairs);
      CHECK(got->false_sharing_lines == want.false_sharing_lines);
      ++nonzero;
    }
    CHECK(c.pairs.size() == nonzero);
  }
}

TEST_CASE("overlapping objects are counted and do not break the sweep", "[colocation]") {
  Heap h;
  const uint32_t g = h.group();
  h.add(g, kBase, 256);
  h.add(g, kBase + 64, 32, 2); // inside the first
  h.add(g, kBase + 300, 16);
  h.build();
  const Colocation c = analyse_colocation(h.snap, h.groups);
  CHECK(c.overlapping_objects == 1);
}

// --------------------------------------------------------------- page spread

TEST_CASE("a contiguous segregated group needs no more pages than its bytes", "[page_spread]") {
  Heap h;
  const uint32_t g = h.group();
  for (uint64_t i = 0; i < 1024; ++i)
    h.add(g, kBase + 64 * i, 60, 1, 64);
  h.build();
  const PageSpread s = analyse_page_spread(h.snap, h.groups[g]);
  CHECK(s.objects == 1024);
  CHECK(s.bytes == 65536); // usable sizes
  CHECK(s.pages == 16);
  CHECK(s.pages_min == 16);
  CHECK(s.spread == Approx(1.0));
  CHECK(s.page_runs == 1);
  CHECK(s.longest_run == 16);
  CHECK(s.regions == 1);
  CHECK(s.regions_min == 1);
  CHECK(s.mean_fill == Approx(1.0));
  CHECK(s.fill_histogram[9] == 16);
}

TEST_CASE("interleaved 1:3 with another group, a group spreads over 4x the pages",
          "[page_spread]") {
  Heap h;
  const uint32_t nodes = h.group(), app = h.group();
  for (uint64_t i = 0; i < 4096; ++i)
    h.add(i % 4 == 0 ? nodes : app, kBase + 64 * i, 64);
  h.build();
  const PageSpread s = analyse_page_spread(h.snap, h.groups[nodes]);
  CHECK(s.objects == 1024);
  CHECK(s.pages_min == 16);
  CHECK(s.pages == 64);
  CHECK(s.spread == Approx(4.0));
  CHECK(s.page_runs == 1); // spread thin, but over consecutive pages
  CHECK(s.mean_fill == Approx(0.25));
  CHECK(s.fill_histogram[2] == 64); // every page a quarter full
}

TEST_CASE("objects at 8 KiB strides touch one page each, none consecutive", "[page_spread]") {
  Heap h;
  const uint32_t g = h.group();
  const uint64_t n = 600; // crosses 2 MiB regions: 256 pages of 8 KiB stride per region
  for (uint64_t i = 0; i < n; ++i)
    h.add(g, kBase + 8192 * i + 128, 64);
  h.build();
  const PageSpread s = analyse_page_spread(h.snap, h.groups[g]);
  CHECK(s.pages == n);
  CHECK(s.pages_min == (64 * n + 4095) / 4096);
  CHECK(s.page_runs == n);
  CHECK(s.longest_run == 1);
  CHECK(s.regions == 3);
  CHECK(s.regions_min == 1);
  CHECK(s.mean_fill == Approx(64.0 / 4096));
  CHECK(s.fill_histogram[0] == n);

  const ChunkMap m = chunk_map(h.snap, h.groups[g]);
  REQUIRE(m.regions.size() == 3);
  CHECK(m.pages_per_region == 512);
  CHECK(m.words_per_region == 8);
  CHECK(m.regions[0] == kBase);
  CHECK(m.regions[1] == kBase + (2u << 20));
  CHECK(m.bits.size() == 24);
  CHECK(m.holds(0, 0));
  CHECK(!m.holds(0, 1));
  CHECK(m.holds(0, 2));
  CHECK(m.holds(1, 0)); // object 256 at region 1, page 0
  uint64_t set = 0;
  for (uint64_t w : m.bits)
    set += static_cast<uint64_t>(__builtin_popcountll(w));
  CHECK(set == n);

  // A plot's first two regions: the same bits, nothing after them walked.
  const ChunkMap first = chunk_map(h.snap, h.groups[g], {}, 2);
  REQUIRE(first.regions.size() == 2);
  CHECK(std::equal(first.bits.begin(), first.bits.end(), m.bits.begin()));
}

TEST_CASE("objects asked aligned to a page need a page each, packed or not", "[page_spread]") {
  // posix_memalign(4096, 256): each object on a page of its own is as packed
  // as the program lets them be; the same layout from malloc is 16x spread.
  Heap h;
  const uint32_t g = h.group();
  const uint64_t n = 256;
  for (uint64_t i = 0; i < n; ++i)
    h.add(g, kBase + 4096 * i, 256);
  h.build();
  CHECK(analyse_page_spread(h.snap, h.groups[g]).pages_min == n * 256 / 4096);
  h.groups[g].aligned_api = true;
  const PageSpread s = analyse_page_spread(h.snap, h.groups[g]);
  CHECK(s.pages == n);
  CHECK(s.pages_min == n);
  // Asked aligned to 512 (every address a multiple of it): eight to a page at best.
  Heap k;
  const uint32_t a = k.group();
  for (uint64_t i = 0; i < n; ++i)
    k.add(a, kBase + 4096 * i + 512 * (i % 2), 256);
  k.build();
  k.groups[a].aligned_api = true;
  CHECK(analyse_page_spread(k.snap, k.groups[a]).pages_min == n * 512 / 4096);
}

TEST_CASE("objects asked aligned pack by what they asked and not by their chunks",
          "[page_spread]") {
  // aligned_alloc(64, 64) from glibc: 72 usable bytes, here one object per
  // 192 bytes. Packed at their alignment they take 64 each: 1000 of them 16
  // pages, not the 32 that rounding the usable size up gives.
  Heap h;
  const uint32_t g = h.group();
  for (uint64_t i = 0; i < 1000; ++i)
    h.add(g, kBase + 192 * i, 64, 1, 72);
  h.build();
  h.groups[g].aligned_api = true;
  const PageSpread s = analyse_page_spread(h.snap, h.groups[g]);
  CHECK(s.pages_min == 16);
  CHECK(s.pages == 47);
}

TEST_CASE("page spread: objects across page boundaries and large objects", "[page_spread]") {
  Heap h;
  const uint32_t g = h.group();
  h.add(g, kBase + 4096 - 32, 64);          // pages 0 and 1
  h.add(g, kBase + 3 * 4096, 5 * 4096 + 8); // pages 3..8, interior 4..7 full
  h.add(g, kBase + 8 * 4096 + 16, 16);      // page 8 again
  h.build();
  const PageSpread s = analyse_page_spread(h.snap, h.groups[g]);
  CHECK(s.pages == 8); // 0, 1, 3, 4, 5, 6, 7, 8
  CHECK(s.page_runs == 2);
  CHECK(s.longest_run == 6);
  CHECK(s.bytes == 64 + 5 * 4096 + 8 + 16);
  CHECK(s.pages_min == 6);
  uint64_t counted = 0;
  for (uint64_t n : s.fill_histogram)
    counted += n;
  CHECK(counted == s.pages);
  CHECK(s.fill_histogram[9] == 5); // pages 3..7

  const ChunkMap m = chunk_map(h.snap, h.groups[g]);
  REQUIRE(m.regions.size() == 1);
  for (uint32_t p : {0u, 1u, 3u, 4u, 5u, 6u, 7u, 8u})
    CHECK(m.holds(0, p));
  CHECK(!m.holds(0, 2));
  CHECK(!m.holds(0, 9));
}

TEST_CASE("page spread of an empty group", "[page_spread]") {
  Heap h;
  const uint32_t g = h.group();
  h.build();
  const PageSpread s = analyse_page_spread(h.snap, h.groups[g]);
  CHECK(s.pages == 0);
  CHECK(s.pages_min == 0);
  CHECK(s.spread == 0.0);
  CHECK(chunk_map(h.snap, h.groups[g]).regions.empty());
}
