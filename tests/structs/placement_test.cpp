// Holes, placements and advice on hand-built layouts with known answers:
// where jemalloc and glibc can start a record within a line, what that does
// to it, and which risks and fixes follow.
#include "layout_advice.h"
#include "record_placement.h"
#include "structs_report.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace memlayout::inspector;

constexpr uint32_t kLine = 64;

FieldLayout member(std::string name, uint64_t offset, uint64_t size, uint64_t align = 0,
                   SyncKind sync = SyncKind::kNone, std::string type = "long") {
  FieldLayout f;
  f.name = std::move(name);
  f.type = std::move(type);
  f.offset = offset;
  f.size = size;
  f.align = align ? align : std::min<uint64_t>(size, 8);
  f.sync = sync;
  return f;
}

RecordLayout record(std::string name, uint64_t size, uint64_t align,
                    std::vector<FieldLayout> fields) {
  RecordLayout r;
  r.name = std::move(name);
  r.kind = "struct";
  r.size = size;
  r.align = align;
  r.fields = std::move(fields);
  compute_holes(r);
  return r;
}

std::vector<uint32_t> offsets(const Placement &p) {
  std::vector<uint32_t> v;
  for (const LineStart &s : p.starts)
    v.push_back(s.offset);
  return v;
}

std::vector<uint32_t> lines(const Placement &p) {
  std::vector<uint32_t> v;
  for (const LineStart &s : p.starts)
    v.push_back(s.lines);
  return v;
}

const Risk *risk(const RecordAdvice &a, const std::string &kind) {
  for (const Risk &k : a.risks)
    if (k.kind == kind)
      return &k;
  return nullptr;
}

const Suggestion *suggestion(const RecordAdvice &a, const std::string &kind) {
  for (const Suggestion &s : a.suggestions)
    if (s.kind == kind)
      return &s;
  return nullptr;
}

RecordAdvice advice_for(const RecordLayout &r, std::vector<AllocSite> sites = {}) {
  return advise(r, place(r, kLine), kLine, sites);
}

} // namespace

TEST_CASE("holes, bit holes and tail padding from the members", "[placement]") {
  RecordLayout r = record("r", 32, 8,
                          {member("a", 0, 1), member("b", 8, 8), member("c", 16, 1),
                           member("d", 20, 4), member("e", 24, 2)});
  REQUIRE(r.holes.size() == 2);
  CHECK(r.holes[0].offset == 1);
  CHECK(r.holes[0].size == 7);
  CHECK(r.holes[1].offset == 17);
  CHECK(r.holes[1].size == 3);
  CHECK(r.tail_padding == 6);
  CHECK(r.bit_holes == 0);

  FieldLayout bits = member("flags", 0, 1, 4);
  bits.bit_offset = 0;
  bits.bit_size = 3;
  FieldLayout more = member("kind", 1, 1, 4);
  more.bit_offset = 9;
  more.bit_size = 2;
  RecordLayout b = record("b", 4, 4, {bits, more});
  CHECK(b.holes.empty());   // no whole byte unused between them
  CHECK(b.bit_holes == 11); // bits 3-8 and 11-15
  CHECK(b.tail_padding == 2);
  CHECK(prefix_through(b, "kind") == 2u);
  CHECK(prefix_through(r, "c") == 17u);
  CHECK_FALSE(prefix_through(r, "nope"));
}

// struct flex { int n; char kind; double data[]; }: the flexible array
// member has no size, but the bytes before it are a hole (as pahole has
// them), not tail padding.
TEST_CASE("a flexible array member ends the data: the bytes before it are a hole", "[placement]") {
  RecordLayout r =
      record("flex", 8, 8, {member("n", 0, 4), member("kind", 4, 1), member("data", 8, 0, 8)});
  REQUIRE(r.holes.size() == 1);
  CHECK(r.holes[0].offset == 5);
  CHECK(r.holes[0].size == 3);
  CHECK(r.tail_padding == 0);
}

// Records whose objects extend past their size: a flexible array member,
// or C's older [1] and [0] forms, last. Any other array, or one not last,
// is storage of its own.
TEST_CASE("a record ending in an array of no, 0 or 1 elements has trailing storage",
          "[placement]") {
  for (const char *type : {"double[]", "Node *[1]", "char[0]"}) {
    RecordLayout r =
        record("t", 16, 8, {member("n", 0, 8), member("data", 8, 8, 8, SyncKind::kNone, type)});
    const FieldLayout *last = trailing_array(r);
    REQUIRE(last);
    CHECK(last->offset == 8);
  }
  RecordLayout two = record(
      "two", 24, 8, {member("n", 0, 8), member("data", 8, 16, 8, SyncKind::kNone, "Node *[2]")});
  CHECK_FALSE(trailing_array(two));
  RecordLayout inside = record(
      "inside", 24, 8, {member("data", 0, 8, 8, SyncKind::kNone, "Node *[1]"), member("n", 8, 16)});
  CHECK_FALSE(trailing_array(inside));
  RecordLayout u = record("u", 8, 8, {member("data", 0, 8, 8, SyncKind::kNone, "char[1]")});
  u.kind = "union";
  CHECK_FALSE(trailing_array(u));
}

TEST_CASE("a 48-byte record: jemalloc regions every 48 bytes, glibc 16-byte chunks",
          "[placement]") {
  RecordLayout r = record("node", 48, 8,
                          {member("key", 0, 8), member("left", 8, 8),
                           member("name", 16, 32, 1, SyncKind::kNone, "char[32]")});
  Placement je = place_jemalloc(r, kLine);
  CHECK(je.slot == 48);
  CHECK(je.waste == 0);
  CHECK(offsets(je) == std::vector<uint32_t>{0, 16, 32, 48});
  CHECK(lines(je) == std::vector<uint32_t>{1, 1, 2, 2});
  CHECK(je.min_lines == 1);
  CHECK(je.straddle_fraction == Approx(0.5));
  // name, bytes 16..48 of the object, crosses a line only from +32 (48..80).
  CHECK(je.starts[2].straddling == std::vector<uint32_t>{2});
  CHECK(je.starts[3].straddling.empty());
  CHECK(je.straddling_fields == std::vector<uint32_t>{2});

  Placement gl = place_glibc(r, kLine);
  CHECK(gl.slot == 64); // 48 + 8 header, rounded to 16
  CHECK(gl.waste == 16);
  CHECK(offsets(gl) == std::vector<uint32_t>{0, 16, 32, 48});
}

TEST_CASE("size classes decide the starts", "[placement]") {
  SECTION("64 bytes: jemalloc line-aligned, glibc not") {
    RecordLayout r = record("r", 64, 8, {member("a", 0, 64, 8)});
    CHECK(offsets(place_jemalloc(r, kLine)) == std::vector<uint32_t>{0});
    Placement gl = place_glibc(r, kLine);
    CHECK(gl.slot == 80);
    CHECK(offsets(gl) == std::vector<uint32_t>{0, 16, 32, 48});
    CHECK(gl.straddle_fraction == Approx(0.75));
  }
  SECTION("8 bytes: any 8-byte offset under jemalloc") {
    RecordLayout r = record("r", 8, 8, {member("a", 0, 8)});
    CHECK(place_jemalloc(r, kLine).starts.size() == 8);
    CHECK(place_glibc(r, kLine).slot == 32);
  }
  SECTION("80 bytes: class 80, gcd 16") {
    RecordLayout r = record("r", 72, 8, {member("a", 0, 72, 8)});
    Placement je = place_jemalloc(r, kLine);
    CHECK(je.slot == 80);
    CHECK(je.waste == 8);
    CHECK(offsets(je) == std::vector<uint32_t>{0, 16, 32, 48});
  }
  SECTION("over-aligned types start on their alignment") {
    RecordLayout r = record("r", 64, 64, {member("a", 0, 4)});
    CHECK(offsets(place_glibc(r, kLine)) == std::vector<uint32_t>{0});
    CHECK(offsets(place_jemalloc(r, kLine)) == std::vector<uint32_t>{0});
  }
  SECTION("large: jemalloc page-aligned, glibc mmapped 16 bytes into a page") {
    RecordLayout r = record("r", 200000, 8, {member("a", 0, 200000, 8)});
    Placement je = place_jemalloc(r, kLine);
    CHECK(offsets(je) == std::vector<uint32_t>{0});
    Placement gl = place_glibc(r, kLine);
    CHECK(offsets(gl) == std::vector<uint32_t>{16});
    CHECK(gl.slot % 4096 == 0);
    CHECK(gl.slot >= 200016);
  }
  SECTION("glibc's threshold is on the chunk: 131064 bytes are mmapped, 131048 are not") {
    RecordLayout at = record("at", 131064, 8, {member("a", 0, 131064, 8)});
    CHECK(offsets(place_glibc(at, kLine)) == std::vector<uint32_t>{16});
    RecordLayout below = record("below", 131048, 8, {member("a", 0, 131048, 8)});
    CHECK(place_glibc(below, kLine).slot == 131056);
  }
}

TEST_CASE("risks: a lock in a 48-byte record shares lines with neighbours", "[advice]") {
  RecordLayout r =
      record("row", 48, 8,
             {member("m", 0, 40, 8, SyncKind::kLock, "pthread_mutex_t"), member("v", 40, 8)});
  RecordAdvice a = advice_for(r);
  const Risk *n = risk(a, "neighbour_sharing");
  REQUIRE(n);
  CHECK(n->severity == "high");
  CHECK(n->fields == std::vector<std::string>{"m"});
  CHECK(n->message.rfind("lock 'm' can share a line", 0) == 0);
  // glibc's 64-byte chunks: the previous object's 48 bytes end 16 before
  // this one starts (its slack and the header hold nothing of it), so only
  // starts +32 and +48 put a neighbour's bytes on the lock's lines.
  CHECK(n->message.find("glibc (chunk 64: 2 of 4 start offsets)") != std::string::npos);
  CHECK(n->message.find("jemalloc (class 48: every start offset)") != std::string::npos);
  // A lock and an atomic are each called what they are.
  RecordLayout both = record("kv", 48, 8,
                             {member("lock", 0, 40, 8, SyncKind::kLock, "pthread_mutex_t"),
                              member("version", 40, 8, 8, SyncKind::kAtomic, "_Atomic long")});
  RecordAdvice b = advice_for(both);
  const Risk *nb = risk(b, "neighbour_sharing");
  REQUIRE(nb);
  CHECK(nb->message.rfind("lock 'lock' and atomic 'version' can share a line", 0) == 0);
  const Risk *l = risk(a, "lock_shares_line");
  REQUIRE(l);
  CHECK(l->fields == std::vector<std::string>{"m", "v"});
  const Suggestion *pad = suggestion(a, "pad");
  REQUIRE(pad);
  CHECK(pad->size == 64);
  const Suggestion *align = suggestion(a, "align");
  REQUIRE(align);
  CHECK(align->size == 64);
}

TEST_CASE("risks: a lock's line shared at every start and at some, each said", "[advice]") {
  // From +0 the lock has line 1 to itself but for 'a'; from +16 on, the
  // end of 'buf' reaches its line too.
  RecordLayout r =
      record("conn", 112, 8,
             {member("buf", 0, 64, 1, SyncKind::kNone, "char[64]"),
              member("mu", 64, 40, 8, SyncKind::kLock, "std::mutex"), member("a", 104, 8)});
  const RecordAdvice a = advice_for(r);
  const Risk *l = risk(a, "lock_shares_line");
  REQUIRE(l);
  CHECK(l->fields == std::vector<std::string>{"mu", "buf", "a"});
  CHECK(l->message.rfind("lock 'mu' (std::mutex, +64) shares a line with 'a' at every start "
                         "offset and 'buf' at +16, +32, +48 (3 of 4 start offsets): ",
                         0) == 0);
}

TEST_CASE("risks: atomics next to plain members, not next to each other", "[advice]") {
  RecordLayout lockfree =
      record("lf", 24, 8,
             {member("op", 0, 8, 8, SyncKind::kAtomic), member("left", 8, 8, 8, SyncKind::kAtomic),
              member("right", 16, 8, 8, SyncKind::kAtomic)});
  CHECK_FALSE(risk(advice_for(lockfree), "atomic_shares_line"));
  RecordLayout mixed =
      record("mixed", 16, 8, {member("key", 0, 8), member("next", 8, 8, 8, SyncKind::kAtomic)});
  const Risk *k = risk(advice_for(mixed), "atomic_shares_line");
  REQUIRE(k);
  CHECK(k->severity == "low");
  CHECK(k->fields == std::vector<std::string>{"next", "key"});
}

TEST_CASE("risks: a member crossing lines costs one more than it needs", "[advice]") {
  // A page buffer of 1024 bytes at +8: 17 lines from any start, 16 needed.
  RecordLayout big =
      record("pagebuf", 1040, 8,
             {member("lsn", 0, 8), member("data", 8, 1024, 1), member("crc", 1032, 4)});
  RecordAdvice a = advice_for(big);
  const Risk *k = risk(a, "field_straddles");
  REQUIRE(k);
  CHECK(k->fields == std::vector<std::string>{"data"});
  CHECK(k->message.find("costs 17 lines instead of 16") != std::string::npos);
  // One that fits a line costs two.
  RecordLayout small = record("pair", 72, 8, {member("a", 0, 8), member("b", 56, 16)});
  RecordAdvice b = advice_for(small);
  k = risk(b, "field_straddles");
  REQUIRE(k);
  CHECK(k->message.find("costs two lines") != std::string::npos);
}

TEST_CASE("risks: padding that does not pad", "[advice]") {
  SECTION("short of the line") {
    RecordLayout r = record("p", 56, 8, {member("key", 0, 8), member("pad", 8, 48, 1)});
    RecordAdvice a = advice_for(r);
    REQUIRE(risk(a, "padding_short"));
    CHECK(suggestion(a, "pad"));
  }
  SECTION("a line long but aligned to 8: glibc starts it mid-line") {
    RecordLayout r = record("p", 64, 8, {member("key", 0, 8), member("_pad1", 8, 56, 1)});
    RecordAdvice a = advice_for(r);
    const Risk *k = risk(a, "padding_unaligned");
    REQUIRE(k);
    CHECK(k->message.find("glibc") != std::string::npos);
    CHECK(k->message.find("jemalloc") == std::string::npos); // class 64: always on a line
    CHECK_FALSE(risk(a, "field_straddles"));                 // nobody reads the padding
    CHECK(suggestion(a, "align"));
  }
  SECTION("aligned to the line: nothing to say") {
    RecordLayout r = record("p", 64, 64, {member("key", 0, 8), member("pad", 8, 56, 1)});
    RecordAdvice a = advice_for(r);
    CHECK(a.risks.empty());
    CHECK(a.suggestions.empty());
  }
}

TEST_CASE("suggestions: reorder by alignment, with the size it gives", "[advice]") {
  RecordLayout r = record(
      "holes", 24, 8,
      {member("a", 0, 1, 1), member("b", 8, 8, 8), member("c", 16, 1, 1), member("d", 20, 4, 4)});
  const Suggestion *s = suggestion(advice_for(r), "reorder");
  REQUIRE(s);
  CHECK(s->size == 16);
  CHECK(s->order == std::vector<std::string>{"b", "d", "a", "c"});
  CHECK(s->message.find("24 -> 16") != std::string::npos);

  RecordLayout tight =
      record("tight", 16, 8, {member("b", 0, 8), member("d", 8, 4, 4), member("a", 12, 1, 1)});
  CHECK_FALSE(suggestion(advice_for(tight), "reorder"));
}

TEST_CASE("risks: malloc of an over-aligned type", "[advice]") {
  RecordLayout r = record("ns::Hot", 64, 64, {member("a", 0, 8)});
  AllocSite bad{"/src/a.c", 12, 3, 12, "make", "ns::Hot", "malloc", false};
  AllocSite fine{"/src/a.c", 20, 3, 20, "make", "ns::Hot", "new", false};
  AllocSite other{"/src/a.c", 30, 3, 30, "make", "ns::Cold", "malloc", false};
  const Risk *k = risk(advice_for(r, {bad, fine, other}), "malloc_ignores_alignment");
  REQUIRE(k);
  CHECK(k->severity == "high");
  CHECK(k->message.find("/src/a.c:12") != std::string::npos);
  CHECK_FALSE(risk(advice_for(r, {fine, other}), "malloc_ignores_alignment"));
}

TEST_CASE("locks and atomics by type name", "[advice]") {
  CHECK(sync_kind_of_type("std::mutex", "std::mutex") == SyncKind::kLock);
  CHECK(sync_kind_of_type("pthread_mutex_t", "union pthread_mutex_t") == SyncKind::kLock);
  CHECK(sync_kind_of_type("pthread_spinlock_t", "volatile int") == SyncKind::kLock);
  CHECK(sync_kind_of_type("TicketLock", "ns::TicketLock") == SyncKind::kLock);
  CHECK(sync_kind_of_type("std::shared_mutex", "std::shared_mutex") == SyncKind::kLock);
  CHECK(sync_kind_of_type("std::atomic<int>", "std::atomic<int>") == SyncKind::kAtomic);
  CHECK(sync_kind_of_type("atomic_int", "_Atomic(int)") == SyncKind::kAtomic);
  CHECK(sync_kind_of_type("std::atomic<Node *>[2]", "std::atomic<Node *>[2]") == SyncKind::kAtomic);
  CHECK(sync_kind_of_type("std::mutex *", "std::mutex *") == SyncKind::kNone);
  CHECK(sync_kind_of_type("std::unique_lock<std::mutex>", "std::unique_lock<std::mutex>") ==
        SyncKind::kNone);
  CHECK(sync_kind_of_type("Block", "Block") == SyncKind::kNone);
  CHECK(sync_kind_of_type("long", "long") == SyncKind::kNone);
  // "atomic" inside a name or a template argument is not an atomic.
  CHECK(sync_kind_of_type("std::__shared_ptr<int, __gnu_cxx::_S_atomic>",
                          "std::__shared_ptr<int, __gnu_cxx::_S_atomic>") == SyncKind::kNone);
  CHECK(sync_kind_of_type("non_atomic_stats", "struct non_atomic_stats") == SyncKind::kNone);
  CHECK(sync_kind_of_type("_Atomic long", "_Atomic(long)") == SyncKind::kAtomic);
  // What threads wait on is written to by each waiter: a lock's line too.
  CHECK(sync_kind_of_type("sem_t", "union sem_t") == SyncKind::kLock);
  CHECK(sync_kind_of_type("GCond", "struct _GCond") == SyncKind::kLock);
  CHECK(sync_kind_of_type("GMutex", "union _GMutex") == SyncKind::kLock);
  CHECK(sync_kind_of_type("pthread_barrier_t", "union pthread_barrier_t") == SyncKind::kLock);
  CHECK(sync_kind_of_type("std::latch", "std::latch") == SyncKind::kLock);
  CHECK(sync_kind_of_type("Dispatcher", "Dispatcher") == SyncKind::kNone);
  CHECK(sync_kind_of_type("second_t", "second_t") == SyncKind::kNone);
  CHECK(sync_kind_of_type("block_t", "struct block_t") == SyncKind::kNone);
  CHECK(sync_kind_of_type("QRecursiveMutex", "QRecursiveMutex") == SyncKind::kLock);
}

TEST_CASE("padding members by name", "[advice]") {
  for (const char *yes : {"pad", "_pad1", "__padding", "cacheline_pad", "padding_"})
    CHECK(is_padding_member(member(yes, 0, 8)));
  for (const char *no : {"pad_to", "spade", "payload", "padded_size"})
    CHECK_FALSE(is_padding_member(member(no, 0, 8)));
  CHECK(is_padding_member(member("pad_bytes", 0, 8, 1, SyncKind::kNone, "char[8]")));
}

TEST_CASE("record names as -C takes them: full, last scopes, without template arguments",
          "[advice]") {
  CHECK(record_selected("ns::Tree<int>::Node", "Node"));
  CHECK(record_selected("ns::Tree<int>::Node", "ns::Tree<int>::Node"));
  CHECK(record_selected("ns::Tree<int>::Node", "Tree<int>::Node"));
  CHECK(record_selected("ns::Tree<int>", "Tree"));
  CHECK(record_selected("ns::Tree<int>", "ns::Tree"));
  CHECK(record_selected("ns::Map<a::B, c::D>", "Map"));
  CHECK_FALSE(record_selected("ns::Tree<int>::Node", "Tree"));
  CHECK_FALSE(record_selected("ns::NodeX", "Node"));
  CHECK_FALSE(record_selected("ns::XNode", "Node"));
  CHECK_FALSE(record_selected("ns::Map<x::Node>", "Node"));
}
