// memlayout structs against the compiler: the fixtures are compiled into
// this test, which measures sizes, alignments, offsets and bit positions,
// and scanned by the tool, whose report must agree byte for byte (and bit
// for bit), C and C++, templates, nested records, bases and holes included.
#include "expected_layout.h"
#include "fixtures/layouts.hpp"
#include "struct_scan.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace memlayout::inspector;

const std::string kFixtures = STRUCTS_FIXTURES;

ScanResult scan(const std::string &file, std::vector<std::string> args) {
  ScanOptions o;
  o.files = {kFixtures + "/" + file};
  o.fixed_args = std::move(args);
  ScanResult r;
  std::string error;
  REQUIRE(scan_structs(o, r, error));
  REQUIRE(error.empty());
  REQUIRE(r.failed.empty());
  return r;
}

// clang takes about a second per file: each fixture is scanned once.
const ScanResult &cxx_scan() {
  static const ScanResult r = scan("layouts.hpp", {"-x", "c++", "-std=c++20"});
  return r;
}
const ScanResult &c_scan() {
  static const ScanResult r = scan("c_layouts.h", {"-std=c11"});
  return r;
}

const RecordLayout &record(const ScanResult &r, const std::string &name) {
  auto it = std::find_if(r.records.begin(), r.records.end(),
                         [&](const RecordLayout &l) { return l.name == name; });
  INFO("record " << name);
  REQUIRE(it != r.records.end());
  return *it;
}

// Where a member lies in a constructed object: offsetof for the types it
// does not cover (dynamic classes, virtual bases).
template <class T, class M> size_t offset_of(M T::*member) {
  auto object = std::make_unique<T>();
  return static_cast<size_t>(reinterpret_cast<const char *>(&((*object).*member)) -
                             reinterpret_cast<const char *>(object.get()));
}

template <class T, class B> size_t base_offset() {
  auto object = std::make_unique<T>();
  return static_cast<size_t>(reinterpret_cast<const char *>(static_cast<B *>(object.get())) -
                             reinterpret_cast<const char *>(object.get()));
}

template <class T> expected_record rec(const char *name) { return {name, sizeof(T), alignof(T)}; }

#define FIELD(T, NAME, F)                                                                          \
  expected_field { NAME, #F, offset_of(&T::F), sizeof(std::declval<T &>().F) }

// Sets one bit-field to all ones in a zeroed object and sees which bits moved.
template <class T, class Set>
expected_bits bits_of(const char *record, const char *field, Set set) {
  T object;
  std::memset(static_cast<void *>(&object), 0, sizeof object);
  set(object);
  return set_bits(record, field, &object, sizeof object);
}

void check_record(const ScanResult &r, const expected_record &e) {
  const RecordLayout &l = record(r, e.name);
  INFO("record " << e.name);
  CHECK(l.size == e.size);
  CHECK(l.align == e.align);
}

void check_field(const ScanResult &r, const expected_field &e) {
  const RecordLayout &l = record(r, e.record);
  const FieldLayout *f = l.field(e.field);
  INFO("field " << e.record << "::" << e.field);
  REQUIRE(f);
  CHECK(f->offset == e.offset);
  CHECK(f->size == e.size);
  CHECK_FALSE(f->is_bitfield());
}

void check_bits(const ScanResult &r, const expected_bits &e) {
  const RecordLayout &l = record(r, e.record);
  const FieldLayout *f = l.field(e.field);
  INFO("bit-field " << e.record << "::" << e.field);
  REQUIRE(f);
  REQUIRE(f->is_bitfield());
  CHECK(f->bit_offset == e.bit_offset);
  CHECK(f->bit_size == e.bit_size);
  CHECK(f->offset == e.bit_offset / 8);
  CHECK(f->offset + f->size == (e.bit_offset + e.bit_size + 7) / 8);
}

// The holes and tail padding the compiler's offsets leave, for a record
// whose every member is listed.
void check_holes(const ScanResult &r, const char *name, std::vector<expected_field> fields) {
  const RecordLayout &l = record(r, name);
  INFO("holes of " << name);
  REQUIRE(l.fields.size() == fields.size());
  std::sort(fields.begin(), fields.end(),
            [](const auto &a, const auto &b) { return a.offset < b.offset; });
  std::vector<std::pair<uint64_t, uint64_t>> expected, reported;
  size_t end = 0;
  for (const expected_field &f : fields) {
    if (f.offset > end)
      expected.emplace_back(end, f.offset - end);
    end = std::max(end, f.offset + f.size);
  }
  for (const Hole &h : l.holes)
    reported.emplace_back(h.offset, h.size);
  CHECK(reported == expected);
  CHECK(l.tail_padding == record(r, name).size - end);
}

} // namespace

TEST_CASE("C++ records as the compiler lays them out", "[layout]") {
  const ScanResult &r = cxx_scan();
  SECTION("sizes and alignments as the compiler has them") {
    for (const expected_record &e : {
             rec<fx::Holes>("fx::Holes"),
             rec<fx::Bits>("fx::Bits"),
             rec<fx::Mixed>("fx::Mixed"),
             rec<fx::Base>("fx::Base"),
             rec<fx::Derived>("fx::Derived"),
             rec<fx::VBase>("fx::VBase"),
             rec<fx::Diamond>("fx::Diamond"),
             rec<fx::Outer>("fx::Outer"),
             rec<fx::Outer::Inner>("fx::Outer::Inner"),
             rec<fx::Box<int, 3>>("fx::Box<int, 3>"),
             rec<fx::Box<int, 3>::Slot>("fx::Box<int, 3>::Slot"),
             rec<fx::Synced>("fx::Synced"),
             rec<fx::Counters>("fx::Counters"),
             rec<fx::Row>("fx::Row"),
             rec<fx::Aligned>("fx::Aligned"),
             rec<fx::Padded>("fx::Padded"),
             rec<fx::Packed>("fx::Packed"),
         })
      check_record(r, e);
  }

  SECTION("member offsets and sizes") {
    using BoxI3 = fx::Box<int, 3>;
    for (const expected_field &e : {
             FIELD(fx::Holes, "fx::Holes", a),
             FIELD(fx::Holes, "fx::Holes", b),
             FIELD(fx::Holes, "fx::Holes", c),
             FIELD(fx::Holes, "fx::Holes", d),
             FIELD(fx::Holes, "fx::Holes", e),
             FIELD(fx::Bits, "fx::Bits", c),
             FIELD(fx::Bits, "fx::Bits", e),
             FIELD(fx::Mixed, "fx::Mixed", i),
             FIELD(fx::Mixed, "fx::Mixed", d),
             FIELD(fx::Mixed, "fx::Mixed", s),
             FIELD(fx::Base, "fx::Base", x),
             FIELD(fx::Derived, "fx::Derived", y),
             FIELD(fx::Derived, "fx::Derived", z),
             FIELD(fx::Diamond, "fx::Diamond", w),
             FIELD(fx::Outer, "fx::Outer", in),
             FIELD(fx::Outer, "fx::Outer", z),
             FIELD(fx::Outer::Inner, "fx::Outer::Inner", s),
             FIELD(fx::Outer::Inner, "fx::Outer::Inner", d),
             FIELD(BoxI3, "fx::Box<int, 3>", keys),
             FIELD(BoxI3, "fx::Box<int, 3>", next),
             FIELD(BoxI3, "fx::Box<int, 3>", slot),
             FIELD(BoxI3::Slot, "fx::Box<int, 3>::Slot", k),
             FIELD(BoxI3::Slot, "fx::Box<int, 3>::Slot", tag),
             FIELD(fx::Synced, "fx::Synced", m),
             FIELD(fx::Synced, "fx::Synced", version),
             FIELD(fx::Synced, "fx::Synced", data),
             FIELD(fx::Row, "fx::Row", guard),
             FIELD(fx::Row, "fx::Row", counters),
             FIELD(fx::Row, "fx::Row", key),
             FIELD(fx::Aligned, "fx::Aligned", a),
             FIELD(fx::Aligned, "fx::Aligned", b),
             FIELD(fx::Padded, "fx::Padded", key),
             FIELD(fx::Padded, "fx::Padded", pad),
             expected_field{"fx::Packed", "a", offsetof(fx::Packed, a), sizeof(char)},
             expected_field{"fx::Packed", "b", offsetof(fx::Packed, b), sizeof(int)},
             expected_field{"fx::Packed", "c", offsetof(fx::Packed, c), sizeof(short)},
         })
      check_field(r, e);
  }

  SECTION("bit-fields at the compiler's bit positions") {
    check_bits(r, bits_of<fx::Bits>("fx::Bits", "a", [](fx::Bits &b) { b.a = 7; }));
    check_bits(r, bits_of<fx::Bits>("fx::Bits", "b", [](fx::Bits &b) { b.b = 127; }));
    check_bits(r, bits_of<fx::Bits>("fx::Bits", "d", [](fx::Bits &b) { b.d = (1ull << 40) - 1; }));
  }

  SECTION("vptr, bases and virtual bases where the ABI puts them") {
    const RecordLayout &base = record(r, "fx::Base");
    REQUIRE(base.fields.size() == 2);
    CHECK(base.fields[0].role == FieldRole::kVptr);
    CHECK(base.fields[0].offset == 0);
    CHECK(base.fields[0].size == sizeof(void *));

    const RecordLayout &derived = record(r, "fx::Derived");
    const FieldLayout *b = derived.field("fx::Base");
    REQUIRE(b);
    CHECK(b->role == FieldRole::kBase);
    CHECK(b->offset == base_offset<fx::Derived, fx::Base>());
    // The derived member lives in the base's tail padding, as the ABI allows.
    CHECK(b->offset + b->size <= offset_of(&fx::Derived::y));

    const RecordLayout &diamond = record(r, "fx::Diamond");
    const FieldLayout *v = diamond.field("fx::VBase");
    REQUIRE(v);
    CHECK(v->role == FieldRole::kVirtualBase);
    CHECK(v->offset == base_offset<fx::Diamond, fx::VBase>());
    CHECK(v->size == sizeof(fx::VBase));
  }

  SECTION("holes and tail padding from the compiler's offsets") {
    check_holes(r, "fx::Holes",
                {FIELD(fx::Holes, "fx::Holes", a), FIELD(fx::Holes, "fx::Holes", b),
                 FIELD(fx::Holes, "fx::Holes", c), FIELD(fx::Holes, "fx::Holes", d),
                 FIELD(fx::Holes, "fx::Holes", e)});
    check_holes(r, "fx::Outer::Inner",
                {FIELD(fx::Outer::Inner, "fx::Outer::Inner", s),
                 FIELD(fx::Outer::Inner, "fx::Outer::Inner", d)});
    check_holes(r, "fx::Aligned",
                {FIELD(fx::Aligned, "fx::Aligned", a), FIELD(fx::Aligned, "fx::Aligned", b)});
    const RecordLayout &packed = record(r, "fx::Packed");
    CHECK(packed.holes.empty());
    CHECK(packed.packed);
  }

  SECTION("locks and atomics recognised") {
    const RecordLayout &s = record(r, "fx::Synced");
    CHECK(s.field("m")->sync == SyncKind::kLock);
    CHECK(s.field("version")->sync == SyncKind::kAtomic);
    CHECK(s.field("data")->sync == SyncKind::kNone);
    // A member holding a lock is one; holding atomics, an atomic; a pointer
    // to them, neither.
    const RecordLayout &row = record(r, "fx::Row");
    CHECK(row.field("guard")->sync == SyncKind::kLock);
    CHECK(row.field("counters")->sync == SyncKind::kAtomic);
    CHECK(row.field("shared")->sync == SyncKind::kNone);
    CHECK(row.field("key")->sync == SyncKind::kNone);
  }

  SECTION("the instantiated template, not the pattern") {
    for (const RecordLayout &l : r.records) {
      INFO(l.name);
      CHECK(l.name.find("Box<K") == std::string::npos);
      CHECK(l.name != "fx::Box");
    }
  }
}

TEST_CASE("C records: sizes, alignments, offsets, bit-fields, holes", "[layout]") {
  const ScanResult &r = c_scan();
  for (size_t i = 0; i < c_record_count; ++i)
    check_record(r, c_records[i]);
  for (size_t i = 0; i < c_field_count; ++i)
    check_field(r, c_fields[i]);
  expected_bits bits[2];
  c_bitfields(bits);
  check_bits(r, bits[0]);
  check_bits(r, bits[1]);
  std::vector<expected_field> pair(c_fields, c_fields + 3);
  check_holes(r, "pair_t", pair);
  // The anonymous struct is known by its typedef; the one nested in
  // c_outer is a record of its own, as C scopes it.
  CHECK(record(r, "pair_t").kind == "struct");
  CHECK(record(r, "c_val").kind == "union");
  // Members of unnamed types are the member's own, as pahole expands them.
  const RecordLayout &tagged = record(r, "c_tagged");
  const FieldLayout *anon = nullptr;
  for (const FieldLayout &f : tagged.fields)
    if (f.name.empty() && f.nested == "struct")
      anon = &f;
  REQUIRE(anon);
  REQUIRE(anon->members.size() == 2);
  CHECK(anon->members[0].name == "c1");
  CHECK(anon->members[1].name == "ptr");
  CHECK(tagged.field("u")->nested == "union");
  CHECK(tagged.field("u")->members.size() == 2);
  CHECK_FALSE(tagged.field("n")); // u's: named u.n
}

// Two functions' local R, and a function template's local Frame, were
// records named "R" and "Frame": one of several "layouts", the wrong one
// for half the sites. Each is named with its function, as the demangler
// names its scope.
TEST_CASE("local classes and explicit instantiations named as the demangler names them",
          "[layout]") {
  ScanResult r = scan("local_classes.cpp", {"-x", "c++", "-std=c++17"});
  CHECK(record(r, "ns::Tree::lookup(long)::R").size == 16);
  CHECK(record(r, "ns::Tree::scan(long)::R").size == 32);
  CHECK(record(r, "ns::walk<long>(long)::Frame").size == 16);
  CHECK(record(r, "ns::walk<char>(char)::Frame").size == 2);
  // `template struct Table<int>;` named it "ns::Table<int>", its members'
  // scope ns::Table<int, 4>.
  CHECK(record(r, "ns::Table<int, 4>").size == 20);
  CHECK(record(r, "ns::Table<int, 4>").spelled == "ns::Table<int>");
  // A class deriving from an empty base only is empty too (it was size 1).
  for (const RecordLayout &l : r.records)
    CHECK(l.name.find("Policy") == std::string::npos);
  for (const AllocSite &s : r.sites) {
    INFO(s.function << " allocates " << s.type);
    if (s.function == "ns::Tree::scan")
      CHECK(s.type == "ns::Tree::scan(long)::R");
    if (s.function == "ns::walk<char>")
      CHECK(s.type == "ns::walk<char>(char)::Frame");
  }
}

// `unsigned :32;` was a member: the padding it is was hidden.
TEST_CASE("unnamed bit-fields are padding and not members", "[layout]") {
  ScanResult r = scan("unnamed_bitfields.c", {"-std=gnu11"});
  const RecordLayout &tail = record(r, "tail_pad");
  CHECK(tail.fields.size() == 5);
  CHECK(tail.tail_padding == 4);
  const RecordLayout &words = record(r, "reserved_words");
  CHECK(words.fields.empty());
  CHECK(words.size == 16);
  CHECK(words.tail_padding == 16);
  const RecordLayout &bits = record(r, "reserved_bits");
  REQUIRE(bits.fields.size() == 2);
  CHECK(bits.fields[1].name == "b");
  CHECK(bits.bit_holes >= 3);
  const RecordLayout &arr = record(r, "with_unnamed_array");
  REQUIRE(arr.fields.size() == 2);
  CHECK(arr.fields[1].type == "struct {...}[3]");
}
