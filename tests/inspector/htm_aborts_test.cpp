// Aborted transactions in a trace (kHtmAborts records): decoded, resolved to
// the groups and offsets of a hand-built heap, turned into htm_* findings,
// written to JSON and read back, compared by diff.
#include "findings.h"
#include "htm_aborts.h"
#include "render.h"
#include "report_diff.h"
#include "report_json.h"
#include "trace_builder.h"
#include "trace_reader.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace memlayout;
using namespace memlayout::inspector;
using memlayout::testing::Payload;
using memlayout::testing::TraceBuilder;

namespace {

struct Entry {
  trace::HtmCause cause = trace::HtmCause::kOther;
  uint8_t flags = 0;
  uint64_t region = 1;
  uint64_t line = 0, read = 0, write = 0, other = 0;
  uint32_t set = 0, tx_lines = 0, tx_written = 0, tx_sets = 0;
  std::vector<uint64_t> lines;
};

Entry conflict(uint64_t line, uint64_t read, uint64_t other, uint8_t flags) {
  Entry e;
  e.cause = trace::HtmCause::kConflict;
  e.line = line;
  e.read = read;
  e.other = other;
  e.flags = flags;
  return e;
}
Entry capacity(uint8_t flags, uint32_t set, uint32_t tx_lines, uint32_t tx_written,
               uint32_t tx_sets, std::vector<uint64_t> lines) {
  Entry e;
  e.cause = trace::HtmCause::kCapacity;
  e.flags = flags;
  e.set = set;
  e.tx_lines = tx_lines;
  e.tx_written = tx_written;
  e.tx_sets = tx_sets;
  e.lines = std::move(lines);
  return e;
}
Entry commits(uint64_t n) {
  Entry e;
  e.cause = trace::HtmCause::kCommits;
  e.line = n;
  return e;
}

Group::Site site(const char *function, uint32_t line) {
  Group::Site s;
  s.function = function;
  s.file = "tree.cpp";
  s.line = line;
  return s;
}

void encode(Payload &p, const Entry &e) {
  p.u8(static_cast<uint8_t>(e.cause)).u8(e.flags).v(e.region);
  p.v(e.line).v(e.read).v(e.write).v(e.other).v(e.set).v(64).v(8);
  p.v(e.tx_lines).v(e.tx_written).v(e.tx_sets).v(e.lines.size());
  for (uint64_t l : e.lines)
    p.v(l);
}

std::vector<uint8_t> trace_with(const std::vector<Entry> &entries, bool compress = true) {
  TraceBuilder t;
  t.strings({{1, "tree.op"}});
  Payload p;
  for (const Entry &e : entries)
    encode(p, e);
  t.record(trace::RecordType::kHtmAborts, 77, static_cast<uint32_t>(entries.size()), p.b, compress);
  t.end(2000, 6000);
  return t.bytes();
}

// Objects: leaves (group 1) of 256 bytes at 0x10000 and 240 at 0x10100, and
// a 48-byte lock (group 2) right after the second, on its last line.
HeapSnapshot heap() {
  HeapSnapshot s;
  s.objects = {{0x10000, 256, 256, 1, 1, 0, trace::Api::kMalloc, 0},
               {0x10100, 240, 240, 1, 1, 0, trace::Api::kMalloc, 1},
               {0x101f0, 48, 48, 2, 1, 0, trace::Api::kMalloc, 2}};
  return s;
}
std::vector<Group> groups() {
  Group leaf, lock;
  leaf.id = 1;
  leaf.name = "new_leaf (tree.cpp:10)";
  leaf.site = site("new_leaf", 10);
  leaf.objects = {0, 1};
  lock.id = 2;
  lock.name = "new_lock (tree.cpp:20)";
  lock.site = site("new_lock", 20);
  lock.objects = {2};
  return {leaf, lock};
}

constexpr uint8_t kOverlap = trace::kHtmOverlap, kWrites = trace::kHtmOtherWrites;

} // namespace

TEST_CASE("htm aborts: the reader decodes conflicts, capacity aborts and commit counts", "[htm]") {
  std::vector<Entry> in = {
      conflict(0x10040, 0xff, 0xff00, kWrites),
      capacity(trace::kHtmWriteCapacity, 3, 40, 9, 20, {0x100c0, 0x200c0}),
      commits(5000),
  };
  for (bool compress : {true, false}) {
    std::vector<uint8_t> b = trace_with(in, compress);
    TraceReader r;
    REQUIRE(r.open_buffer(b.data(), b.size()));
    // The prescan gathered them before any next().
    REQUIRE(r.htm_aborts().size() == 3);
    const HtmAbort &c = r.htm_aborts()[0];
    CHECK(c.cause == trace::HtmCause::kConflict);
    CHECK(c.tid == 77);
    CHECK(c.line == 0x10040);
    CHECK(c.read_mask == 0xff);
    CHECK(c.other_mask == 0xff00);
    CHECK(c.flags == kWrites);
    CHECK(*r.string(c.region_id) == "tree.op");
    const HtmAbort &cap = r.htm_aborts()[1];
    CHECK(cap.set == 3);
    CHECK(cap.tx_lines == 40);
    CHECK(cap.l1_ways == 8);
    REQUIRE(r.htm_lines(cap).size() == 2);
    CHECK(r.htm_lines(cap)[1] == 0x200c0);
    CHECK(r.htm_aborts()[2].line == 5000);
    // next() yields the record with its own entries.
    size_t seen = 0;
    for (Item it; (it = r.next()) != Item::kDone;)
      if (it == Item::kHtmAborts)
        seen += r.record_htm_aborts().size();
    CHECK(seen == 3);
    CHECK(r.status() == ReadStatus::kOk);
  }
}

TEST_CASE("htm aborts: a malformed entry stops the reader at its record", "[htm]") {
  // More lines than a capacity entry may list.
  Entry bad = capacity(0, 0, 0, 0, 0, std::vector<uint64_t>(trace::kMaxHtmSetLines + 1, 0x1000));
  std::vector<uint8_t> b = trace_with({bad});
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size()));
  while (r.next() != Item::kDone)
    ;
  CHECK(r.status() == ReadStatus::kCorrupt);
  CHECK(r.error().message.find("htm aborts record") != std::string::npos);
}

TEST_CASE("htm aborts: conflicts and overflows resolve to groups and offsets", "[htm]") {
  std::vector<Entry> in;
  // Ten false conflicts on the first leaf's second line: this side read
  // bytes 8-15 of it (offset 72), the other wrote bytes 16-23 (offset 80).
  for (int i = 0; i < 10; ++i)
    in.push_back(conflict(0x10040, 0xff00, 0xff0000, kWrites));
  // Three true ones on the same bytes.
  for (int i = 0; i < 3; ++i)
    in.push_back(conflict(0x10040, 0xff00, 0xff00, kWrites | kOverlap));
  // A false conflict on the second leaf's last line whose other side touched
  // the lock right after it (a 256-byte leaf ends where the lock begins).
  in.push_back(conflict(0x101c0, 0xff, uint64_t{1} << 48, kWrites));
  // A line no object holds, and one by the fallback lock (ignored).
  in.push_back(conflict(0x90000, 0xff, 0xff00, kWrites));
  in.push_back(conflict(0x7000, 1, 1, kWrites | kOverlap | trace::kHtmByLock));
  // A capacity abort: the set held both leaves' first lines and the lock's.
  in.push_back(capacity(0, 0, 30, 0, 20, {0x10000, 0x10100, 0x10200}));
  in.push_back(commits(1000));
  std::vector<uint8_t> b = trace_with(in);
  TraceReader r;
  REQUIRE(r.open_buffer(b.data(), b.size()));
  auto h = analyse_htm_aborts(r, heap(), groups());
  REQUIRE(h);
  CHECK(h->transactions == 1000);
  CHECK(h->aborts == 17);
  CHECK(h->by_cause[0] == 16);
  CHECK(h->by_cause[1] == 1);
  CHECK(h->conflicts_false == 12);
  CHECK(h->conflicts_true == 4);
  CHECK(h->by_fallback_lock == 1);
  CHECK(h->unresolved == 1);
  CHECK(h->l1_sets == 64);
  CHECK(h->capacity_mean_lines == 30);
  REQUIRE(h->groups.size() == 2);
  const HtmGroupAborts &leaf = h->groups[0];
  CHECK(leaf.group == 1);
  CHECK(leaf.conflicts_false == 11);
  CHECK(leaf.conflicts_true == 3);
  REQUIRE_FALSE(leaf.false_offsets.empty());
  CHECK(leaf.false_offsets[0] == std::pair<uint64_t, uint64_t>{72, 10});
  CHECK(leaf.other_offsets[0] == std::pair<uint64_t, uint64_t>{80, 10});
  REQUIRE(leaf.sharers.size() == 1);
  CHECK(leaf.sharers[0] == std::pair<uint32_t, uint64_t>{2, 1});
  CHECK(leaf.capacity_aborts == 1);
  CHECK(leaf.capacity_lines == 2);
  CHECK(leaf.capacity_offsets[0] == std::pair<uint64_t, uint64_t>{0, 2});
  CHECK(leaf.capacity_same_page_offset == 1); // 0x10000 and 0x10100: two page offsets
  CHECK(leaf.false_offsets[1] == std::pair<uint64_t, uint64_t>{192, 1});
  const HtmGroupAborts &lock = h->groups[1];
  CHECK(lock.group == 2);
  CHECK(lock.capacity_lines == 1);
}

namespace {

Report with_htm(uint64_t false_conflicts, uint64_t transactions) {
  Report r;
  r.levels = {{1, "Data", 64, 8, 64, 32 << 10, "virtual", "bits 6-11"}};
  GroupReport g;
  g.group.id = 1;
  g.group.name = "new_leaf (tree.cpp:10)";
  g.group.site = site("new_leaf", 10);
  g.group.size_class = 272;
  g.group.requested_size = 272;
  g.objects = 1000;
  g.group.bytes = 272000;
  g.lines_per_object = 5;
  g.set_effective_fraction = {1.0, std::nullopt, std::nullopt};
  r.groups = {g};
  HtmAbortReport h;
  h.transactions = transactions;
  h.aborts = false_conflicts + 10;
  h.by_cause = {false_conflicts + 10, 0, 0, 0};
  h.conflicts_false = false_conflicts;
  h.conflicts_true = 10;
  h.l1_sets = 64;
  h.l1_ways = 8;
  HtmGroupAborts ga;
  ga.group = 1;
  ga.conflicts_false = false_conflicts;
  ga.false_offsets = {{136, false_conflicts / 2}, {144, false_conflicts / 4}};
  ga.other_offsets = {{144, false_conflicts / 2}};
  h.groups = {ga};
  r.htm = h;
  return r;
}

const Finding *find(const std::vector<Finding> &fs, const std::string &kind) {
  for (const auto &f : fs)
    if (f.kind == kind)
      return &f;
  return nullptr;
}

} // namespace

TEST_CASE("htm findings: false conflicts on a group's lines, by their cost per transaction",
          "[htm][findings]") {
  std::vector<Finding> fs = find_problems(with_htm(300, 100000)); // 3 per 1000
  const Finding *f = find(fs, "htm_false_conflict");
  REQUIRE(f);
  CHECK(f->severity == "medium");
  CHECK(f->groups == std::vector<uint32_t>{1});
  CHECK(f->metric.at("false_per_1000_transactions") == Approx(3.0));
  CHECK(f->metric.at("hot_offset") == 136);
  CHECK(f->message.find("offsets 136, 144") != std::string::npos);
  CHECK(f->fix.find("lines of their own") != std::string::npos);

  fs = find_problems(with_htm(3000, 100000)); // 30 per 1000
  REQUIRE(find(fs, "htm_false_conflict"));
  CHECK(find(fs, "htm_false_conflict")->severity == "high");

  fs = find_problems(with_htm(50, 100000)); // 0.5 per 1000: too cheap to matter
  CHECK_FALSE(find(fs, "htm_false_conflict"));
  fs = find_problems(with_htm(10, 0)); // below the minimum count
  CHECK_FALSE(find(fs, "htm_false_conflict"));
}

TEST_CASE("htm findings: capacity aborts from uneven set use ask to stagger the objects",
          "[htm][findings]") {
  Report r = with_htm(0, 10000);
  HtmAbortReport &h = *r.htm;
  h.aborts = 2000;
  h.by_cause = {0, 2000, 0, 0};
  h.capacity_read = 2000;
  h.capacity_mean_lines = 38;
  h.capacity_mean_sets = 25;
  h.groups[0].capacity_aborts = 2000;
  h.groups[0].capacity_lines = 18000;
  h.groups[0].capacity_same_page_offset = 15000;
  h.groups[0].capacity_offsets = {{0, 9000}, {192, 4000}};
  std::vector<Finding> fs = find_problems(r);
  const Finding *f = find(fs, "htm_capacity");
  REQUIRE(f);
  CHECK(f->severity == "high");
  CHECK(f->message.find("uneven set use") != std::string::npos);
  CHECK(f->message.find("one offset within their 4 KiB pages") != std::string::npos);
  CHECK(f->fix.find("stagger") != std::string::npos);
  // A footprint near the L1's size is another story.
  h.capacity_mean_lines = 400;
  h.groups[0].capacity_same_page_offset = 100;
  fs = find_problems(r);
  REQUIRE(find(fs, "htm_capacity"));
  CHECK(find(fs, "htm_capacity")->fix.find("fewer lines") != std::string::npos);
}

TEST_CASE("htm report: JSON round trip and diff", "[htm][json]") {
  Report a = with_htm(300, 100000);
  a.trace = "a.trace";
  a.at = "end";
  a.allocator = "native";
  a.htm->groups[0].sharers = {{2, 7}};
  a.htm->groups[0].capacity_offsets = {{64, 3}};
  a.htm->regions = {"tree.op"};
  a.findings = find_problems(a);
  std::ostringstream json;
  memlayout::cli::render_json(a, json);
  Report back;
  std::string error;
  REQUIRE(parse_report_json(json.str(), "a.json", back, error));
  REQUIRE(back.htm);
  CHECK(back.htm->transactions == 100000);
  CHECK(back.htm->conflicts_false == 300);
  CHECK(back.htm->l1_ways == 8);
  REQUIRE(back.htm->groups.size() == 1);
  CHECK(back.htm->groups[0].false_offsets == a.htm->groups[0].false_offsets);
  CHECK(back.htm->groups[0].sharers == a.htm->groups[0].sharers);
  CHECK(back.htm->groups[0].capacity_offsets == a.htm->groups[0].capacity_offsets);

  Report b = with_htm(20, 100000);
  b.findings = find_problems(b);
  ReportDiff d = diff_reports(back, b);
  REQUIRE(d.htm.size() == 4);
  CHECK(d.htm[1].metric == "htm_false_conflicts_per_1000");
  CHECK(*d.htm[1].a == Approx(3.0));
  CHECK(*d.htm[1].b == Approx(0.2));
  CHECK(d.htm[1].verdict == Verdict::kBetter);
  REQUIRE(d.resolved.size() == 1);
  CHECK(d.resolved[0].finding->kind == "htm_false_conflict");
  // Reports without aborts compare no HTM metrics.
  Report plain_a, plain_b;
  CHECK(diff_reports(plain_a, plain_b).htm.empty());
}
