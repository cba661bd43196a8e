// Findings on synthetic measurements: the study's pathologies are flagged
// with the right fix, a clean layout is not.
#include "findings.h"
#include "fix_ranking.h"
#include "pool_layout.h"
#include "rule_match.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

using namespace memlayout::inspector;

namespace {

Report base_report() {
  Report r;
  r.levels = {{1, "Data", 64, 12, 64, 48 << 10, "virtual", "bits 6-11"},
              {2, "Unified", 2048, 16, 64, 2 << 20, "physical", "bits 6-16"},
              {3, "Unified", 114688, 15, 64, 105ull << 20, "physical", "bits 6-16"}};
  return r;
}

GroupReport clean_group(uint32_t id, const char *function, uint64_t size_class) {
  GroupReport g;
  g.group.id = id;
  g.group.name = std::string(function) + " (tree.c:10)";
  g.group.site = {function, "tree.c", 10, "", {}};
  g.group.size_class = size_class;
  g.group.requested_size = size_class;
  g.objects = 100000;
  g.group.bytes = g.objects * size_class;
  g.lines_per_object = 1;
  g.set_effective_fraction = {1.0, 0.99, 0.98};
  g.lines_counted = {100000, 100000, 100000};
  g.pages_min = g.group.bytes / 4096;
  g.pages_4k = g.pages_min + 1;
  g.lines_total = 100000;
  return g;
}

// `a` on half of every cache's sets, every object next to one of `b` in the
// same class (pair_findings' neighbours), and `b` beside it.
void interleave(GroupReport &a, GroupReport &b) {
  a.set_effective_fraction = {0.5, 0.5, 0.5};
  a.neighbours = {{b.group.id, 0, a.objects, a.objects}};
  b.neighbours = {{a.group.id, 0, b.objects, b.objects}};
}

// A fix's rule, parsed (the test fails where it does not parse).
memlayout::rules::Rule parsed_rule(const std::string &text) {
  memlayout::rules::Rule rule;
  memlayout::rules::ParseError e{};
  INFO(text);
  REQUIRE(memlayout::rules::parse_rule(text.data(), text.size(), 1, &rule, &e));
  return rule;
}

const Finding *find(const std::vector<Finding> &fs, const std::string &kind) {
  // fs must outlive the pointer: keep find_problems' result in a variable.
  for (const auto &f : fs)
    if (f.kind == kind)
      return &f;
  return nullptr;
}

} // namespace

TEST_CASE("findings: a clean layout has none", "[findings]") {
  Report r = base_report();
  r.groups = {clean_group(1, "make_node", 64), clean_group(2, "make_leaf", 48)};
  r.groups[1].straddle_fraction = 0.02;
  CHECK(find_problems(r).empty());
}

TEST_CASE("findings: int-lf's node/descriptor interleaving", "[findings]") {
  Report r = base_report();
  GroupReport node = clean_group(1, "new_node", 64), desc = clean_group(2, "new_descriptor", 64);
  interleave(node, desc);
  r.groups = {node, desc};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  CHECK(f->severity == "high");
  CHECK(f->groups == std::vector<uint32_t>{1});
  CHECK(f->metric.at("set_effective_fraction_L2") == Approx(0.5));
  CHECK(f->fix.find("segregate new_node") != std::string::npos);
  CHECK(f->fix.find("--segregate function=new_node,pool=new_node") != std::string::npos);
  REQUIRE(find(fs, "size_class_sharing"));
  CHECK(find(fs, "size_class_sharing")->groups == std::vector<uint32_t>{1, 2});
  REQUIRE(find(fs, "prefetch_pollution"));
}

// A C function GCC cloned is named by its clone's symbol; the rule names the
// function, which is what `run` routes by.
TEST_CASE("findings: a clone's suffix stays out of the rule", "[findings]") {
  Report r = base_report();
  GroupReport node = clean_group(1, "make_node.constprop.0", 64);
  node.set_effective_fraction = {0.5, 0.5, 0.5};
  r.groups = {node};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule == "function=make_node,pool=make_node");
}

TEST_CASE("findings: two groups a report names alike are told apart by their ids", "[findings]") {
  // Inlined code: one line allocating a map node and its string.
  Report r = base_report();
  GroupReport node = clean_group(1, "run", 64), text = clean_group(2, "run", 64);
  node.group.site.line = text.group.site.line = 14;
  interleave(node, text);
  r.groups = {node, text};
  auto fs = find_problems(r);
  for (const char *kind : {"set_underutilization", "size_class_sharing", "prefetch_pollution"}) {
    CAPTURE(kind);
    const Finding *f = find(fs, kind);
    REQUIRE(f);
    CHECK(f->message.find("run (tree.c:10) [group 1]") != std::string::npos);
    CHECK(f->message.find("run (tree.c:10) [group 2]") != std::string::npos);
  }
  // Names that differ stay as they are.
  r.groups[1].group.name = "other (tree.c:20)";
  auto plain = find_problems(r);
  REQUIRE(find(plain, "size_class_sharing"));
  CHECK(find(plain, "size_class_sharing")->message.find("[group") == std::string::npos);
}

TEST_CASE("findings: a power-of-two stride asks for padding to an odd number of lines",
          "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "new_node", 128);
  g.set_effective_fraction = {0.5, 0.5, 0.5};
  g.strides = {{128, 0.95}};
  r.groups = {g};
  auto fs1 = find_problems(r);
  const Finding *f = find(fs1, "set_underutilization");
  REQUIRE(f);
  CHECK(f->fix.find("192 bytes") != std::string::npos);

  // The padding is one the allocator's classes keep: under jemalloc 4160
  // bytes land in the 5120-byte class (80 lines, a quarter of the L1's sets
  // at best), and no class from 4 KiB to 8 KiB has an odd number of lines:
  // no rule is offered, the program must stagger its hot fields.
  r.allocator = "jemalloc";
  r.groups[0].group.size_class = r.groups[0].group.requested_size = 4096;
  r.groups[0].strides = {{4096, 0.95}};
  auto fs2 = find_problems(r);
  f = find(fs2, "set_underutilization");
  REQUIRE(f);
  CHECK(f->fix.find("pad=") == std::string::npos);
  CHECK(f->fix.find("stagger their hot fields") != std::string::npos);
  CHECK(f->rule.empty());
  // The rule puts them in a pool, whose classes are jemalloc's whatever the
  // program's allocator: glibc's 4168-byte chunks would not be whole lines
  // apart, but a pool's 5120-byte class is, so no rule under glibc either.
  r.allocator = "native";
  auto fs3 = find_problems(r);
  f = find(fs3, "set_underutilization");
  REQUIRE(f);
  CHECK(f->fix.find("pad=") == std::string::npos);
  CHECK(f->rule.empty());
  // jemalloc at 256 bytes: 320 is 5 lines.
  r.allocator = "jemalloc";
  r.groups[0].group.size_class = r.groups[0].group.requested_size = 256;
  r.groups[0].strides = {{256, 0.95}};
  auto fs4 = find_problems(r);
  f = find(fs4, "set_underutilization");
  REQUIRE(f);
  CHECK(f->fix.find("pad=320") != std::string::npos);
}

TEST_CASE("findings: a power-of-two stride's fix depends on what makes it", "[findings]") {
  Report r = base_report();
  SECTION("back to back in their own class: a pool alone keeps the stride, the rule pads") {
    GroupReport g = clean_group(1, "make_inode", 128);
    g.set_effective_fraction = {0.5, 0.5, 0.5};
    g.strides = {{128, 0.99}};
    r.groups = {g};
    auto fs = find_problems(r);
    const Finding *f = find(fs, "set_underutilization");
    REQUIRE(f);
    CHECK(f->rule.find("pool=") != std::string::npos);
    CHECK(f->rule.find("pad=192") != std::string::npos);
  }
  SECTION("farther apart than their class: something sits between, a pool packs them") {
    GroupReport g = clean_group(1, "make_leaf", 64);
    g.set_effective_fraction = {0.5, 0.5, 0.5};
    g.strides = {{128, 0.99}};
    r.groups = {g};
    auto fs = find_problems(r);
    const Finding *f = find(fs, "set_underutilization");
    REQUIRE(f);
    CHECK(f->fix.find("packs them 64 bytes apart") != std::string::npos);
    CHECK(f->rule.find("pool=") != std::string::npos);
    CHECK(f->rule.find("pad=") == std::string::npos);
  }
  SECTION("asked aligned to the stride: no rule moves them") {
    GroupReport g = clean_group(1, "iobuf_new", 264);
    g.group.requested_size = 256;
    g.group.aligned_api = true;
    g.set_effective_fraction = {0.0625, 0.0625, 0.0625};
    g.strides = {{4096, 0.99}};
    r.groups = {g};
    auto fs = find_problems(r);
    const Finding *f = find(fs, "set_underutilization");
    REQUIRE(f);
    CHECK(f->rule.empty());
    CHECK(f->fix.find("no rule moves them off the alignment asked for") != std::string::npos);
  }
}

// jemalloc serves aligned_alloc(4096, 256) from its 4096-byte class: stride
// and class are alike, yet it is the alignment asked that puts the objects a
// page apart (256 bytes would pack 256 apart); glibc's chunks say so by a
// stride farther than the class.
TEST_CASE("findings: objects asked aligned to a page under jemalloc", "[findings]") {
  Report r = base_report();
  r.allocator = "jemalloc";
  GroupReport g = clean_group(1, "iobuf_new", 4096);
  g.group.requested_size = 256;
  g.group.aligned_api = true;
  g.objects = 100;
  g.set_effective_fraction = {0.0625, 0.0625, 0.0625};
  g.lines_counted = {400, 400, 400};
  g.strides = {{4096, 1.0}};
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("the program asks for these objects aligned") != std::string::npos);
  CHECK(f->fix.find("no padding gives") == std::string::npos);
  // Objects of a page asked aligned to one: their class is what they need,
  // and the alignment changes nothing: the page-sized class is the cause.
  r.groups[0].group.requested_size = 4096;
  auto page = find_problems(r);
  f = find(page, "set_underutilization");
  REQUIRE(f);
  CHECK(f->fix.find("no padding gives") != std::string::npos);
}

TEST_CASE("pool layout: strides and what they do to straddling and sets", "[findings]") {
  // 256-byte objects aligned to 64: the 256-byte class, 4 lines apart; their
  // hot first line visits a quarter of the L1's sets. Padded to 320 (5
  // lines), every set.
  CHECK(pool_stride(256, 0, 64) == 256);
  PoolLayout p = predict_pool_layout(256, 0, 64, 0, 64, 5000);
  CHECK(p.straddle_fraction == 0);
  REQUIRE(p.l1_set_fraction);
  CHECK(*p.l1_set_fraction == Approx(0.25).margin(0.02));
  p = predict_pool_layout(256, 320, 64, 0, 64, 5000);
  CHECK(p.stride == 320);
  CHECK(*p.l1_set_fraction > 0.95);
  // 101-byte notes packed in the 112-byte class: offsets 0, 48, 32, 16 of
  // their lines, half of them across one more line than they need. Aligned
  // to 64: the 128-byte class, two lines each, every set.
  p = predict_pool_layout(101, 0, 0, 0, 101, 4000);
  CHECK(p.stride == 112);
  CHECK(p.straddle_fraction == Approx(0.5).margin(0.01));
  p = predict_pool_layout(101, 0, 64, 0, 101, 4000);
  CHECK(p.stride == 128);
  CHECK(p.straddle_fraction == 0);
  CHECK(*p.l1_set_fraction > 0.95);
  // A class not a multiple of the alignment is served at the next multiple.
  CHECK(pool_stride(100, 0, 128) == 128);
  CHECK(pool_stride(48, 0, 32) == 64);
  CHECK(straddle_align(24) == 32);
  CHECK(straddle_align(40) == 64);
  CHECK(straddle_align(8) == 16);
}

// sets.cpp of a user's sweep: 256-byte buckets whose first 64 bytes are
// hot, 75% of them straddling under glibc. align=64 alone in a pool of the
// 256-byte class made them use a quarter of the L1 sets (replay: high
// set_underutilization); the rule pads them to an odd number of lines.
TEST_CASE("findings: a straddle fix's pool keeps the objects on every set", "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "new_bucket", 264);
  g.group.requested_size = 256;
  g.objects = 5000;
  g.hot_bytes = 64;
  g.straddle_fraction = 0.75;
  g.lines_counted = {5000, 5000, 5000};
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  memlayout::rules::Rule rule = parsed_rule(f->rule);
  CHECK(rule.align == 64);
  CHECK(rule.pad == 320);
  CHECK(f->fix.find("pad=320") != std::string::npos);
  CHECK(f->fix.find("25% of the L1 sets") != std::string::npos);
  PoolLayout p = predict_pool_layout(256, rule.pad, rule.align, 0, 64, g.objects);
  CHECK(p.straddle_fraction < 0.1);
  CHECK(*p.l1_set_fraction >= 0.75);
  // Too few lines for set use to count: align alone, no padding.
  r.groups[0].objects = 100;
  auto small = find_problems(r);
  f = find(small, "line_straddle");
  REQUIRE(f);
  CHECK(parsed_rule(f->rule).align == 64);
  CHECK(parsed_rule(f->rule).pad == 0);
}

// spread.cpp of the sweep: 101-byte strings, all at one line offset between
// the program's other records, spread over 4x their pages. The page_spread
// pool alone packs them in its 112-byte class, half across a line (replay:
// high line_straddle); the rule aligns them to 64.
TEST_CASE("findings: a page_spread pool does not make the objects straddle", "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "new_note", 104);
  g.group.requested_size = 101;
  g.objects = 4000;
  g.lines_per_object = 2;
  g.straddle_fraction = 0;
  g.pages_min = 102;
  g.pages_4k = 438;
  r.groups = {g};
  auto fs = find_problems(r);
  CHECK_FALSE(find(fs, "line_straddle"));
  const Finding *f = find(fs, "page_spread");
  REQUIRE(f);
  memlayout::rules::Rule rule = parsed_rule(f->rule);
  CHECK(std::string(rule.pool) == "new_note");
  CHECK(rule.align == 64);
  CHECK(rule.pad == 0);
  CHECK(f->fix.find("112-byte class would leave 50%") != std::string::npos);
  // Objects the pool's class keeps within their lines need nothing more:
  // 80 bytes at 0, 16, 32, 48 stay on two lines.
  r.groups[0].group.requested_size = 80;
  r.groups[0].group.size_class = 88;
  auto fits = find_problems(r);
  f = find(fits, "page_spread");
  REQUIRE(f);
  CHECK(f->rule == "function=new_note,pool=new_note");
}

// The design's DBx1000 rows: 48-byte mutexes allocated back to back by one
// thread. No other thread allocated on their lines, but their type says
// they hold a lock and most share a line with another: a candidate.
TEST_CASE("findings: small objects holding a lock, several to a line", "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "row_new", 56);
  g.group.requested_size = 48;
  g.lock_fields = {"lock"};
  g.neighbours = {{1, g.objects * 9 / 10, 0, g.objects}};
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "false_sharing");
  REQUIRE(f);
  CHECK(f->severity == "medium");
  CHECK(f->metric.at("lock_line_share") == Approx(0.9));
  CHECK(f->message.find("each holds a lock (lock)") != std::string::npos);
  CHECK(f->rule == "function=row_new,pool=row_new,pad=64,align=64");
  // Without the type's word on it, nothing is known: no finding.
  r.groups[0].lock_fields.clear();
  auto none = find_problems(r);
  CHECK_FALSE(find(none, "false_sharing"));
  // Nor for objects of more than a line, or alone on their lines.
  r.groups[0].lock_fields = {"lock"};
  r.groups[0].neighbours = {{1, 0, 0, g.objects}};
  auto alone = find_problems(r);
  CHECK_FALSE(find(alone, "false_sharing"));
}

TEST_CASE("findings: 48-byte nodes straddling lines", "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "citrus_node", 48);
  g.straddle_fraction = 0.25;
  g.hot_bytes = 24;
  r.groups = {g};
  auto fs2 = find_problems(r);
  const Finding *f = find(fs2, "line_straddle");
  REQUIRE(f);
  CHECK(f->severity == "high");
  // 24 hot bytes stay within a line from any 32-byte boundary.
  CHECK(f->fix.find("align=32") != std::string::npos);
  g.straddle_fraction = 0.05;
  r.groups = {g};
  CHECK_FALSE(find(find_problems(r), "line_straddle"));
  // A 900-byte object crossing one more line: not judged unless --hot says
  // which bytes matter.
  GroupReport big = clean_group(2, "make_page", 912);
  big.straddle_fraction = 0.3;
  r.groups = {big};
  CHECK_FALSE(find(find_problems(r), "line_straddle"));
  big.hot_bytes = 48;
  r.groups = {big};
  CHECK(find(find_problems(r), "line_straddle"));
  // make_shared's T, 16 bytes in: its hot 24 bytes end 40 bytes into the
  // object, which only a 64-byte start keeps within one line.
  GroupReport shared = clean_group(3, "Quote", 56);
  shared.group.type = "Quote";
  shared.straddle_fraction = 0.5;
  shared.hot_bytes = 24;
  shared.hot_offset = 16;
  r.groups = {shared};
  auto fs = find_problems(r);
  const Finding *s = find(fs, "line_straddle");
  REQUIRE(s);
  CHECK(s->message.find("hot bytes 16-40 (Quote's first 24, behind make_shared's control block)") !=
        std::string::npos);
  CHECK(s->fix.find("align=64") != std::string::npos);
}

TEST_CASE("findings: a group holding a sliver of the heap is one severity lower", "[findings]") {
  // glibc's locale tables: 40 objects of 48 bytes, half across a line, in
  // a 20 MiB heap. Hot, they stay in the L1 however they are laid out.
  Report r = base_report();
  GroupReport tables = clean_group(2, "_nl_intern_locale_data", 48);
  tables.objects = 40;
  tables.group.bytes = 40 * 48;
  tables.lines_total = 60;
  tables.lines_counted = {60, 60, 60};
  tables.pages_min = 1;
  tables.pages_4k = 1;
  tables.straddle_fraction = 0.5;
  GroupReport nodes = clean_group(1, "make_node", 64);
  r.groups = {nodes, tables};
  r.live_bytes = 20 << 20;
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  CHECK(f->severity == "medium");
  CHECK(f->metric.at("heap_share") == Approx(40.0 * 48 / (20 << 20)));
  CHECK(f->message.find("a minor group") != std::string::npos);

  // The same objects as most of a small program's heap: their 60 lines still
  // fit in an eighth of the 48 KiB L1.
  r.groups = {tables};
  r.live_bytes = 40 * 48;
  auto small_heap = find_problems(r);
  f = find(small_heap, "line_straddle");
  REQUIRE(f);
  CHECK(f->severity == "medium");
  CHECK(f->message.find("stay in the L1's 48 KiB") != std::string::npos);

  // Many of them, most of the heap: high, as before.
  tables.objects = 4000;
  tables.group.bytes = 4000 * 48;
  tables.lines_total = 6000;
  r.groups = {tables};
  r.live_bytes = 4000 * 48;
  auto many = find_problems(r);
  f = find(many, "line_straddle");
  REQUIRE(f);
  CHECK(f->severity == "high");
  CHECK(f->message.find("minor") == std::string::npos);

  // Forty contended locks cost as much as thousands: false sharing keeps its
  // severity however little of the heap they hold.
  GroupReport locks = clean_group(3, "row_lock_init", 48);
  locks.objects = 40;
  locks.group.bytes = 40 * 48;
  locks.lines_total = 30;
  locks.cross_thread_lines = 30;
  locks.group.threads = {100, 101};
  r.groups = {nodes, locks};
  r.live_bytes = 20 << 20;
  auto shared = find_problems(r);
  f = find(shared, "false_sharing");
  REQUIRE(f);
  CHECK(f->severity == "high");
}

TEST_CASE("findings: row locks shared by threads are false sharing", "[findings]") {
  Report r = base_report();
  GroupReport locks = clean_group(1, "row_lock_init", 48);
  locks.group.threads = {100, 101};
  locks.group.requested_size = 40;
  locks.cross_thread_lines = 60000;
  r.groups = {locks};
  auto fs3 = find_problems(r);
  const Finding *f = find(fs3, "false_sharing");
  REQUIRE(f);
  CHECK(f->fix.find("pad=64") != std::string::npos);
  // The size the program asked for, and the allocator's.
  CHECK(f->message.find("small objects (40 bytes, 48 with the allocator's rounding)") !=
        std::string::npos);
  GroupReport rows = clean_group(2, "row_new", 1024);
  rows.cross_thread_lines = 60000;
  r.groups = {rows};
  CHECK(find(find_problems(r), "cross_thread_line_sharing"));
  CHECK_FALSE(find(find_problems(r), "false_sharing"));
}

TEST_CASE("findings: nodes spread over four times the pages they need", "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "new_node", 64);
  g.pages_4k = g.pages_min * 4;
  r.groups = {g};
  auto fs4 = find_problems(r);
  const Finding *f = find(fs4, "page_spread");
  REQUIRE(f);
  CHECK(f->severity == "high");
  CHECK(f->metric.at("pages_4k") == Approx(static_cast<double>(g.pages_4k)));
}

TEST_CASE("findings: too few lines say nothing about sets", "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "rare", 64);
  g.set_effective_fraction = {0.1, 0.1, 0.1};
  g.lines_counted = {100, 100, 100};
  r.groups = {g};
  CHECK_FALSE(find(find_problems(r), "set_underutilization"));
}

TEST_CASE("findings: shares stay shares, unnamed sites get size rules", "[findings]") {
  Report r = base_report();
  GroupReport a = clean_group(1, "??", 72), b = clean_group(2, "make_b", 72);
  // Every object both shares a line and has the other group on its pair line.
  a.neighbours = {{2, a.objects, a.objects, a.objects}};
  r.groups = {a, b};
  auto fs5 = find_problems(r);
  const Finding *f = find(fs5, "size_class_sharing");
  REQUIRE(f);
  CHECK(f->metric.at("interleaved_share") == Approx(1.0));
  CHECK(f->fix.find("function=??") == std::string::npos);
  // A size rule would route make_b's 72-byte objects too: no rule is offered.
  CHECK(f->rule.empty());
  CHECK(f->fix.find("no rule routes these objects without make_b (tree.c:10)") !=
        std::string::npos);
  // Where the other group's size differs, the size rule is the fix.
  r.groups[1].group.requested_size = 64;
  auto fs6 = find_problems(r);
  f = find(fs6, "size_class_sharing");
  REQUIRE(f);
  CHECK(f->rule == "size=72,pool=group1");
}

TEST_CASE("findings: one call site's size classes share one finding", "[findings]") {
  Report r = base_report();
  for (uint32_t i = 0; i < 5; ++i) {
    GroupReport g = clean_group(i + 1, "read_buffer", 48 + 16 * i);
    g.straddle_fraction = i == 2 ? 0.4 : 0.15; // group 3 is the worst
    r.groups.push_back(g);
  }
  GroupReport other = clean_group(9, "make_node", 48);
  other.straddle_fraction = 0.3;
  r.groups.push_back(other);
  auto fs = find_problems(r);
  size_t straddles = 0;
  for (const auto &f : fs)
    straddles += f.kind == "line_straddle";
  CHECK(straddles == 2); // read_buffer's five merged, make_node's own
  // The merged one is the worst case's (group 3, high), listing all five.
  const Finding *merged = nullptr;
  for (const auto &f : fs)
    if (f.kind == "line_straddle" && f.groups.size() == 5)
      merged = &f;
  REQUIRE(merged);
  CHECK(merged->groups.front() == 3);
  CHECK(merged->severity == "high");
  CHECK(merged->metric.at("groups_merged") == Approx(5));
  CHECK(merged->message.find("4 more size classes") != std::string::npos);

  // Of cases as severe, the worst speaks: group 5's 61%, not group 1's 30%
  // (the largest group, listed first before).
  Report same = base_report();
  const double fractions[] = {0.30, 0.55, 0.61};
  for (uint32_t i = 0; i < 3; ++i) {
    GroupReport g = clean_group(i == 0 ? 1 : 3 + i, "make_node", 32 + 16 * i);
    g.straddle_fraction = fractions[i];
    same.groups.push_back(g);
  }
  const Finding *worst = nullptr;
  auto fs2 = find_problems(same);
  for (const auto &f : fs2)
    if (f.kind == "line_straddle")
      worst = &f;
  REQUIRE(worst);
  REQUIRE(worst->groups.size() == 3);
  CHECK(worst->severity == "high");
  CHECK(worst->groups.front() == 5);
  CHECK(worst->metric.at("straddle_fraction") == Approx(0.61));
  CHECK(worst->message.rfind("61%", 0) == 0);
}

TEST_CASE("a fix's rule ends where its prose goes on", "[findings]") {
  CHECK(rule_of_fix("align the objects: --segregate function=leaf,pool=leaf,align=64; where "
                    "conflicts remain, put the fields ...") == "function=leaf,pool=leaf,align=64");
  CHECK(rule_of_fix("segregate: --segregate function=node,pool=node (or pad them)") ==
        "function=node,pool=node");
  CHECK(rule_of_fix("put the fields on lines of their own") == "");
  CHECK(rule_of_fix("--segregate function=node,pool=") == "");
}

// What /bin/sh makes of `words` as the arguments of printf '%s|'.
std::string as_shell_reads(const std::string &words) {
  std::string out;
  if (FILE *p = popen(("printf '%s|' " + words).c_str(), "r")) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
      out.append(buf, n);
    pclose(p);
  }
  return out;
}

TEST_CASE("a fix's --segregate runs as printed when pasted into a shell", "[findings]") {
  const std::string plain = "function=new_node,pool=new_node,align=64";
  CHECK(segregate_flag(plain) == "--segregate " + plain);
  // C++ names: templates, operators, argument lists, lambdas (quotes).
  for (const std::string &rule :
       {std::string("function=std::map<int, long>::operator[](long const&),pool=map_node"),
        std::string("function=std::thread::_State_impl<std::tuple<main::'lambda'()> >::_M_run(),"
                    "pool=_State_impl._M_run"),
        std::string("function=f*,pool=p"), std::string("function=a$b`c\\d\"e,pool=x")}) {
    CAPTURE(rule);
    std::string flag = segregate_flag(rule);
    CHECK(flag.rfind("--segregate '", 0) == 0);
    CHECK(as_shell_reads(flag) == "--segregate|" + rule + "|");
    // Read back from a fix, prose after it or not.
    CHECK(segregate_flag_rule("segregate it: " + flag + "; where conflicts remain, ...") == rule);
    CHECK(segregate_flag_rule(flag) == rule);
  }
  CHECK(segregate_flag_rule("segregate it: --segregate 'function=x,pool=y") == ""); // unclosed
  CHECK(segregate_flag_rule("segregate: " + segregate_flag(plain) + " (or pad them)") == plain);
}

TEST_CASE("fixes whose rules route the same allocations rank as one, as advise merges them",
          "[findings]") {
  Report r = base_report();
  r.groups = {clean_group(1, "new_leaf", 64), clean_group(2, "new_inner", 256),
              clean_group(3, "new_tiny", 16)};
  auto finding = [](const char *kind, const char *severity, uint32_t group, const char *rule) {
    Finding f;
    f.kind = kind;
    f.severity = severity;
    f.groups = {group};
    f.rule = rule;
    f.fix = std::string("--segregate ") + rule;
    return f;
  };
  Finding straddle =
      finding("line_straddle", "medium", 1, "function=new_leaf,pool=new_leaf,align=64");
  Finding sharing = finding("set_underutilization", "high", 1, "function=new_leaf,pool=new_leaf");
  Finding prose = finding("htm_false_conflict", "low", 3, "");
  prose.fix = "split the record";
  Finding inner = finding("page_spread", "low", 2, "function=new_inner,pool=new_inner,hugepages=1");
  r.findings = {straddle, sharing, prose, inner};

  std::vector<RankedFix> fixes = rank_fixes(r);
  REQUIRE(fixes.size() == 3);
  // By bytes: new_inner's 25.6 MB, new_leaf's 6.4 MB, new_tiny's 1.6 MB.
  CHECK(fixes[0].groups == std::vector<uint32_t>{2});
  CHECK(fixes[1].rule == "function=new_leaf,pool=new_leaf,align=64");
  CHECK(fixes[1].findings.size() == 2);
  CHECK(fixes[1].severity == "high");
  CHECK(fixes[1].groups == std::vector<uint32_t>{1});
  CHECK(fixes[1].bytes == 6400000);
  CHECK(fixes[2].rule.empty());
  CHECK(fixes[2].groups == std::vector<uint32_t>{3});
}

TEST_CASE("findings: a rule for one line of a function leaves its other lines out", "[findings]") {
  // sym_new allocates a 32-byte struct at line 20 and its names, of up to 24
  // bytes, at line 21; the interposer routes by function and size, not line.
  Report r = base_report();
  GroupReport sym = clean_group(1, "sym_new", 32), name = clean_group(2, "sym_new", 24);
  sym.group.site.line = 20;
  name.group.site.line = 21;
  name.group.requested_size = 18;
  interleave(sym, name);
  r.groups = {sym, name};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  // Every size above the names' class, up to the struct's: 25-32.
  CHECK(f->rule == "function=sym_new,size=25-32,pool=sym_new.25-32");
  CHECK(f->fix.find("--segregate function=sym_new,size=25-32,pool=sym_new.25-32") !=
        std::string::npos);
  CHECK(groups_routed(parsed_rule(f->rule), r) == std::vector<uint32_t>{1});

  // In the same size class (names of 17 to 32 bytes, most of them 18) no
  // size tells them apart: the fix says so, and offers none.
  r.groups[1].group.size_class = 32;
  auto same = find_problems(r);
  f = find(same, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("--segregate") == std::string::npos);
  CHECK(f->fix.find("in code (docs/segregation-api.md): no rule routes these objects without "
                    "sym_new (tree.c:10) [group 2]") != std::string::npos);

  // Many other groups in the class: a few are named, the rest counted.
  std::vector<GroupReport> crowd = {r.groups[0]};
  for (uint32_t id = 2; id <= 7; ++id) {
    GroupReport other = r.groups[1];
    other.group.id = id;
    other.group.site.line = 20 + id;
    other.group.name = "sym_new (tree.c:" + std::to_string(20 + id) + ")";
    crowd.push_back(other);
  }
  Report crowded = r;
  crowded.groups = crowd;
  auto many = find_problems(crowded);
  f = find(many, "set_underutilization");
  REQUIRE(f);
  CHECK(f->fix.find("sym_new (tree.c:24) [group 4] and 3 other groups (a rule matches") !=
        std::string::npos);
  CHECK(f->fix.find("[group 5]") == std::string::npos);

  // Only what a rule for the subject's own sizes would still take is named:
  // the function's groups of other sizes (a 64-byte one here, in a class of
  // its own) a size key leaves out.
  Report mixed = r;
  GroupReport big = clean_group(3, "sym_new", 64);
  big.group.site.line = 30;
  big.group.name = "sym_new (tree.c:30)";
  big.group.requested_size = 64;
  mixed.groups.push_back(big);
  auto blocked = find_problems(mixed);
  f = find(blocked, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("no rule routes these objects without sym_new (tree.c:10) [group 2] (a rule") !=
        std::string::npos);
  CHECK(f->fix.find("[group 3]") == std::string::npos);

  // One line's size classes stay together, as before.
  r.groups[1].group.site.line = 20;
  auto one_site = find_problems(r);
  f = find(one_site, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule == "function=sym_new,pool=sym_new");
}

TEST_CASE("findings: one line of inlined library code makes records of several sizes",
          "[findings]") {
  // A lambda's one line (inlined unordered_map and list code) allocates
  // 48-byte list nodes, 64-byte hash nodes and 1016-byte bucket arrays; only
  // the list nodes straddle. A rule for the whole site would route all three
  // into one aligned pool (the hash nodes then share the list nodes' class):
  // the rule is narrowed to the list nodes' sizes.
  Report r = base_report();
  GroupReport list = clean_group(1, "main::{lambda()#1}::operator()", 48);
  GroupReport hash = clean_group(2, "main::{lambda()#1}::operator()", 64);
  GroupReport buckets = clean_group(3, "main::{lambda()#1}::operator()", 1024);
  list.group.requested_min = list.group.requested_max = 48;
  hash.group.requested_size = hash.group.requested_min = hash.group.requested_max = 56;
  buckets.group.requested_size = buckets.group.requested_min = buckets.group.requested_max = 1016;
  list.straddle_fraction = 0.5;
  r.groups = {list, hash, buckets};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  INFO(f->rule);
  memlayout::rules::Rule rule = parsed_rule(f->rule);
  CHECK(rule.has_size);
  CHECK(rule.size_max == 48);
  CHECK(groups_routed(rule, r) == std::vector<uint32_t>{1});
}

TEST_CASE("findings: requested sizes tell apart groups that share a class", "[findings]") {
  // Book::add allocates a 40-byte list node at line 23 and a 24-byte map
  // node at line 24, which glibc served from a reused 40-byte chunk: one
  // class, two sizes. A size key routes the list nodes alone.
  Report r = base_report();
  GroupReport node = clean_group(1, "Book::add", 40), map = clean_group(2, "Book::add", 40);
  node.group.site.line = 23;
  node.group.requested_size = node.group.requested_min = node.group.requested_max = 40;
  map.group.site.line = 24;
  map.group.requested_size = map.group.requested_min = map.group.requested_max = 24;
  interleave(node, map);
  r.groups = {node, map};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  // In a pool of their own the 40-byte nodes would pack in the 48-byte
  // class, half of them across a line: the rule aligns them (pool_layout.h).
  CHECK(f->rule == "function=Book::add,size=25-40,pool=Book.add.25-40,align=64");
  CHECK(groups_routed(parsed_rule(f->rule), r) == std::vector<uint32_t>{1});

  // Map nodes of 24 to 40 bytes: no size holds the list nodes alone.
  r.groups[1].group.requested_max = 40;
  auto overlapping = find_problems(r);
  f = find(overlapping, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule.empty());

  // Larger map nodes, in the same class: the range stops below them.
  r.groups[0].group.size_class = r.groups[1].group.size_class = 48;
  r.groups[0].group.requested_size = r.groups[0].group.requested_min =
      r.groups[0].group.requested_max = 40;
  r.groups[1].group.requested_size = r.groups[1].group.requested_min =
      r.groups[1].group.requested_max = 44;
  auto above = find_problems(r);
  f = find(above, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule == "function=Book::add,size=1-43,pool=Book.add.1-43,align=64");
}

// `out.push_back(new Item)`: the line allocates 40-byte items and the
// vector's growing buffer; the next line 48-byte counters. The whole line
// spans every class the counters' could fall in, but the items' own class
// is still apart from everything else the function allocates.
TEST_CASE("findings: straddling small objects are aligned no further than keeps them in a line",
          "[findings]") {
  Report r = base_report();
  GroupReport g = clean_group(1, "fl_get", 24);
  g.straddle_fraction = 0.25;
  r.groups = {g};
  auto small = find_problems(r);
  const Finding *f = find(small, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule == "function=fl_get,pool=fl_get,align=32"); // not a line per 24-byte entry
  g = clean_group(1, "leaf", 40);
  g.straddle_fraction = 0.5;
  r.groups = {g};
  auto larger = find_problems(r);
  f = find(larger, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule == "function=leaf,pool=leaf,align=64");
}

TEST_CASE("findings: a buffer grown by realloc in the same function keeps a size rule off",
          "[findings]") {
  Report r = base_report();
  GroupReport rec = clean_group(1, "load", 40), log = clean_group(2, "load", 262144);
  log.group.site.line = 13;
  log.group.grown_by_realloc = true; // realloc(NULL, 11) first: routed by 11 bytes
  log.objects = 1;
  rec.straddle_fraction = 0.5;
  r.groups = {rec, log};
  CHECK(groups_routed(parsed_rule("function=load,size=1-56,pool=p"), r) ==
        std::vector<uint32_t>{1, 2});
  CHECK(groups_routed(parsed_rule("function=load,size=300000-400000,pool=p"), r).empty());
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("no rule routes these objects without load (tree.c:10) [group 2]") !=
        std::string::npos);
}

TEST_CASE("findings: a line that also grows a vector still gets a rule for its objects",
          "[findings]") {
  Report r = base_report();
  GroupReport item = clean_group(1, "work", 40), buffer = clean_group(2, "work", 266224),
              counter = clean_group(3, "work", 56);
  buffer.objects = 6;
  counter.group.site.line = 15;
  counter.group.requested_size = 48;
  item.straddle_fraction = 0.5;
  r.groups = {item, buffer, counter};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule == "function=work,size=1-40,pool=work.1-40,align=64");
  CHECK(groups_routed(parsed_rule(f->rule), r) == std::vector<uint32_t>{1});
}

TEST_CASE("findings: a program's own pool is fixed by its options, not by a rule", "[findings]") {
  // The objects come from seg_malloc in main: a rule by main's name would
  // route main's other allocations and leave these where they are.
  Report r = base_report();
  GroupReport g = clean_group(1, "main", 48);
  g.group.name = "nodes";
  g.group.program_pool = true;
  g.straddle_fraction = 0.5;
  g.lines_per_object = 1.5;
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("--segregate") == std::string::npos);
  CHECK(f->fix.find("create the program's pool nodes with seg_pool_options .alignment = 64") !=
        std::string::npos);
}

TEST_CASE("findings: a function name longer than a rule holds is given by its scopes",
          "[findings]") {
  Report r = base_report();
  std::string args(600, 'x');
  std::string name = "std::__detail::_Hashtable_alloc<std::allocator<" + args +
                     "> >::_M_allocate_node<long const&>(long const&)";
  GroupReport g = clean_group(1, "f", 88);
  g.group.site.function = name;
  g.straddle_fraction = 0.35;
  g.lines_per_object = 2.35;
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule ==
        "function=std::__detail::_Hashtable_alloc::_M_allocate_node,pool=_Hashtable_alloc._M_"
        "allocate_node,align=64");
  CHECK(groups_routed(parsed_rule(f->rule), r) == std::vector<uint32_t>{1});
}

TEST_CASE("findings: two instantiations of one template get pools of their own", "[findings]") {
  // Pool names drop template arguments: both would be "Tree.insert".
  Report r = base_report();
  GroupReport a = clean_group(1, "ns::Tree<long, long>::insert(long const&)", 48);
  GroupReport b = clean_group(2, "ns::Tree<int, std::string>::insert(int const&)", 64);
  a.group.site.line = b.group.site.line = 30;
  for (GroupReport *g : {&a, &b}) {
    g->straddle_fraction = 0.5;
    g->lines_per_object = 1.5;
  }
  r.groups = {a, b};
  auto fs = find_problems(r);
  std::vector<std::string> rules;
  for (const Finding &f : fs)
    if (f.kind == "line_straddle")
      rules.push_back(f.rule);
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].find("pool=Tree.insert.g1,") != std::string::npos);
  CHECK(rules[1].find("pool=Tree.insert.g2,") != std::string::npos);
  for (const Finding &f : fs)
    if (f.kind == "line_straddle")
      CHECK(f.fix.find(segregate_flag(f.rule)) != std::string::npos);
}

TEST_CASE("findings: a pool name at the length limit keeps its size or group suffix",
          "[findings]") {
  // The function's last scopes fill the pool name; the suffix must still fit,
  // or the struct and the strings would share one pool again.
  Report r = base_report();
  std::string fn = "ns::" + std::string(40, 'a') + "::" + std::string(30, 'b');
  GroupReport sym = clean_group(1, fn.c_str(), 32), name = clean_group(2, fn.c_str(), 24);
  sym.group.site.line = 20;
  name.group.site.line = 21;
  for (GroupReport *g : {&sym, &name}) {
    g->straddle_fraction = 0.5;
    g->lines_per_object = 1.5;
  }
  r.groups = {sym, name};
  auto fs = find_problems(r);
  std::set<std::string> pools;
  for (const Finding &f : fs) {
    if (f.kind != "line_straddle")
      continue;
    memlayout::rules::Rule parsed = parsed_rule(f.rule);
    CHECK(std::strlen(parsed.pool) < memlayout::rules::kMaxPoolName);
    pools.insert(parsed.pool);
    CHECK(groups_routed(parsed, r) == std::vector<uint32_t>{f.groups[0]});
  }
  CHECK(pools.size() == 2);
}

TEST_CASE("findings: groups named alike are told apart in the words", "[findings]") {
  // One pool's two size classes, both spread over twice their pages.
  Report r = base_report();
  GroupReport small = clean_group(1, "index_add", 32), large = clean_group(2, "entry_new", 64);
  for (GroupReport *g : {&small, &large}) {
    g->group.name = "shared";
    g->pages_4k = 2 * g->pages_min;
  }
  r.groups = {small, large};
  auto fs = find_problems(r);
  std::vector<std::string> messages;
  for (const auto &f : fs)
    if (f.kind == "page_spread")
      messages.push_back(f.message);
  REQUIRE(messages.size() == 2);
  CHECK(messages[0] != messages[1]);
  for (const auto &m : messages)
    CHECK((m.rfind("shared [group 1] spreads", 0) == 0 ||
           m.rfind("shared [group 2] spreads", 0) == 0));
}

// advise writes a rule only where the rules before it leave it something to
// match: perl's Perl_pp_helem got size=1-56 and then size=41-56 and 1-40.
TEST_CASE("rules: a rule with the same site and a size range holding another's shadows it",
          "[findings]") {
  using memlayout::inspector::shadows;
  const auto wide = parsed_rule("function=f,size=1-56,pool=a");
  CHECK(shadows(wide, parsed_rule("function=f,size=41-56,pool=b")));
  CHECK(shadows(wide, parsed_rule("function=f,size=1-40,pool=b,align=64")));
  CHECK_FALSE(shadows(wide, parsed_rule("function=f,size=41-64,pool=b"))); // 57-64 left
  CHECK_FALSE(shadows(wide, parsed_rule("function=f,pool=b")));            // any size
  CHECK_FALSE(shadows(wide, parsed_rule("function=g,size=41-56,pool=b")));
  CHECK(shadows(parsed_rule("function=f,pool=a"), parsed_rule("function=f,size=8,pool=b")));
  CHECK_FALSE(shadows(parsed_rule("file=a.c:3,pool=a"), parsed_rule("file=a.c:4,pool=b")));
}

TEST_CASE("findings: 512-byte objects get no padding, which jemalloc's classes cannot give",
          "[findings]") {
  // 576 bytes lands in jemalloc's 640-byte class, 10 lines apart: half the
  // L1's sets, still high. No class from 512 bytes up is an odd number of lines.
  CHECK(odd_stride_pad(8) == 0);
  CHECK(odd_stride_pad(4) == 320); // 5 lines
  CHECK(odd_stride_pad(2) == 192);
  Report r = base_report();
  r.allocator = "jemalloc";
  GroupReport g = clean_group(1, "new_page", 512);
  g.hot_bytes = 16; // --hot: one line of each object is read
  g.set_effective_fraction = {0.125, 0.125, 0.125};
  g.strides = {{512, 0.95}};
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("pad=") == std::string::npos);
  CHECK(f->fix.find("448 bytes or less") != std::string::npos);
  // Interleaved with another group of its class, segregating would still
  // leave them 512 bytes apart in the pool: no rule that keeps the finding.
  GroupReport other = clean_group(2, "new_meta", 512);
  r.groups = {g, other};
  interleave(r.groups[0], r.groups[1]);
  r.groups[0].set_effective_fraction = {0.125, 0.125, 0.125};
  r.groups[0].strides = {{1024, 0.95}};
  auto mixed = find_problems(r);
  f = find(mixed, "set_underutilization");
  REQUIRE(f);
  INFO(f->fix);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("no rule helps") != std::string::npos);
}

TEST_CASE("findings: a hot part behind make_shared's control block that no alignment keeps "
          "within a line",
          "[findings]") {
  // Conn's first 64 bytes, 16 bytes into each block: at any alignment of the
  // blocks they start 16 bytes into a line and cross into the next.
  Report r = base_report();
  GroupReport g = clean_group(1, "open_conns", 96);
  g.group.requested_size = 80;
  g.group.type = "Conn";
  g.hot_bytes = 64;
  g.hot_offset = 16;
  g.straddle_fraction = 0.5;
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule.empty());
  CHECK(f->fix.find("alignas(64)") != std::string::npos);
  CHECK(f->fix.find("within its first 48 bytes") != std::string::npos);
  // 40 hot bytes behind the block end at 56: align=64 keeps them on one line.
  r.groups[0].hot_bytes = 40;
  auto fits = find_problems(r);
  f = find(fits, "line_straddle");
  REQUIRE(f);
  CHECK(f->rule.find("align=64") != std::string::npos);
}

TEST_CASE("findings: locks padded to a line but not aligned share lines in larger chunks",
          "[findings]") {
  // 64-byte records in glibc's 80-byte chunks: three starts in four share
  // their last line with the next record's lock.
  Report r = base_report();
  GroupReport g = clean_group(1, "account_new", 80);
  g.group.requested_size = 64;
  g.lock_fields = {"m"};
  g.neighbours = {{1, g.objects * 3 / 4, 0, g.objects}};
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "false_sharing");
  REQUIRE(f);
  CHECK(f->message.find("padded to a line but not aligned to one") != std::string::npos);
  CHECK(f->rule.find("align=64") != std::string::npos);
  // More than a line of its own: not this finding.
  r.groups[0].group.requested_size = 72;
  auto big = find_problems(r);
  CHECK_FALSE(find(big, "false_sharing"));
}

TEST_CASE("findings: the stride a segregation fix promises is the pool's class", "[findings]") {
  // 48-byte wrappers between other objects, 128 bytes apart; glibc gives
  // each 56 usable bytes, a pool packs them in its 48-byte class.
  Report r = base_report();
  GroupReport g = clean_group(1, "new_wrapper", 56);
  g.group.requested_size = 48;
  g.set_effective_fraction = {0.5, 0.5, 0.5};
  g.strides = {{128, 0.95}};
  r.groups = {g};
  auto fs = find_problems(r);
  const Finding *f = find(fs, "set_underutilization");
  REQUIRE(f);
  INFO(f->fix);
  CHECK(f->fix.find("packs them 48 bytes apart") != std::string::npos);
}
