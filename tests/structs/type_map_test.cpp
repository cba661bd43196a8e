// Type maps: what `memlayout structs --format json` writes is what
// `memlayout report --types` reads back, and a recorded call site finds its
// type in it (file path suffixes, expression line ranges, template
// instantiations told apart by function, function-only fallback).
#include "render_structs.h"
#include "structs_report.h"
#include "type_map.h"

#include <catch2/catch.hpp>

#include <sstream>

namespace {

using namespace memlayout::inspector;

FieldLayout member(std::string name, uint64_t offset, uint64_t size) {
  FieldLayout f;
  f.name = std::move(name);
  f.type = "long";
  f.offset = offset;
  f.size = size;
  f.align = 8;
  return f;
}

// A struct of `fields` (holes computed), 8-aligned unless told.
RecordLayout record_of(std::string name, std::string file, uint64_t size,
                       std::vector<FieldLayout> fields, uint64_t align = 8) {
  RecordLayout r;
  r.name = std::move(name);
  r.kind = "struct";
  r.file = std::move(file);
  r.size = size;
  r.align = align;
  r.fields = std::move(fields);
  compute_holes(r);
  return r;
}

AllocSite site(std::string file, uint32_t line, uint32_t end_line, std::string function,
               std::string type, std::string call = "new") {
  return {std::move(file), line, 5, end_line, std::move(function), std::move(type),
          std::move(call), false};
}

StructsReport sample() {
  RecordLayout node;
  node.name = "ns::Tree<int>::Node";
  node.kind = "struct";
  node.file = "/src/tree.h";
  node.line = 10;
  node.size = 40;
  node.align = 8;
  node.fields = {member("key", 0, 8), member("left", 8, 8), member("right", 16, 8)};
  FieldLayout bits = member("flags", 24, 1);
  bits.bit_offset = 192;
  bits.bit_size = 3;
  bits.type = "unsigned int";
  node.fields.push_back(bits);
  FieldLayout lock = member("m", 32, 8);
  lock.sync = SyncKind::kLock;
  lock.type = "Spinlock";
  node.fields.push_back(lock);
  compute_holes(node);
  RecordLayout other = node;
  other.name = "ns::Tree<long>::Node";
  RecordLayout desc;
  desc.name = "Desc";
  desc.kind = "struct";
  desc.size = 16;
  desc.align = 8;
  desc.fields = {member("op", 0, 8), member("target", 8, 8)};
  compute_holes(desc);
  return analyse_structs(
      {node, other, desc},
      {site("/home/me/proj/src/tree.cpp", 42, 43, "ns::Tree<int>::insert", "ns::Tree<int>::Node"),
       site("/home/me/proj/src/tree.cpp", 42, 43, "ns::Tree<long>::insert", "ns::Tree<long>::Node"),
       // clang's spelling of an instantiation over std::string
       site("/home/me/proj/src/tree.cpp", 42, 43, "ns::Tree<std::basic_string<char>>::insert",
            "ns::Tree<std::basic_string<char>>::Node"),
       site("/home/me/proj/src/ops.cpp", 7, 7, "make_desc", "Desc", "malloc"),
       site("/home/me/proj/src/ops.cpp", 9, 9, "share_desc", "Desc", "make_shared"),
       site("/home/me/proj/test/ops.cpp", 7, 7, "make_test_desc", "ns::Tree<int>::Node"),
       site("/home/me/proj/src/skip.cpp", 8, 8, "make_skip<1>", "ns::Tree<int>::Node"),
       site("/home/me/proj/src/skip.cpp", 8, 8, "make_skip<4>", "ns::Tree<long>::Node")},
      64);
}

TypeMap round_trip(const StructsReport &r) {
  std::ostringstream json;
  memlayout::cli::render_structs_json(r, json);
  std::string error;
  auto map = TypeMap::parse(json.str(), "map.json", error);
  INFO(error);
  REQUIRE(map);
  return *map;
}

} // namespace

TEST_CASE("a structs map reads back as written", "[types]") {
  const StructsReport r = sample();
  const TypeMap map = round_trip(r);
  REQUIRE(map.records().size() == 3);
  REQUIRE(map.sites().size() == 8);
  const RecordLayout &node = map.records()[0];
  CHECK(node.name == "ns::Tree<int>::Node");
  CHECK(node.size == 40);
  CHECK(node.align == 8);
  REQUIRE(node.fields.size() == 5);
  CHECK(node.fields[3].bit_offset == 192);
  CHECK(node.fields[3].bit_size == 3);
  CHECK(node.fields[4].sync == SyncKind::kLock);
  CHECK(node.fields[4].type == "Spinlock");
  CHECK(node.holes.size() == r.records[0].layout.holes.size());
  const AllocSite &s = map.sites()[0];
  CHECK(s.file == "/home/me/proj/src/tree.cpp");
  CHECK(s.line == 42);
  CHECK(s.end_line == 43);
  CHECK(s.function == "ns::Tree<int>::insert");
  CHECK(s.call == "new");
}

TEST_CASE("a recorded call site finds its type", "[types]") {
  const TypeMap map = round_trip(sample());
  SECTION("by file and line, the file under another root") {
    CHECK(map.type_at("make_desc", "/build/elsewhere/src/ops.cpp", 7) == "Desc");
    CHECK(map.type_at("make_test_desc(int)", "/x/test/ops.cpp", 7) == "ns::Tree<int>::Node");
  }
  SECTION("a line inside the allocating expression") {
    CHECK(map.type_at("make_desc", "src/ops.cpp", 8).empty());
    CHECK(map.type_at("ns::Tree<int>::insert(int const&)", "src/tree.cpp", 43) ==
          "ns::Tree<int>::Node");
  }
  SECTION("a function template's instantiations, named with their return type") {
    CHECK(map.type_at("ns::Tree<int>::Node* make_skip<1>(long)", "src/skip.cpp", 8) ==
          "ns::Tree<int>::Node");
    CHECK(map.type_at("ns::Tree<long>::Node* make_skip<4>(long)", "src/skip.cpp", 8) ==
          "ns::Tree<long>::Node");
  }
  SECTION("a template's instantiations told apart by function") {
    CHECK(map.type_at("ns::Tree<long>::insert(long const&)", "tree.cpp", 42) ==
          "ns::Tree<long>::Node");
    CHECK(map.type_at("??", "tree.cpp", 42).empty());
    // The demangler spells it otherwise: inline namespace, default arguments.
    CHECK(map.type_at("ns::Tree<std::__cxx11::basic_string<char, std::char_traits<char>, "
                      "std::allocator<char> > >::insert(std::__cxx11::basic_string<char, "
                      "std::char_traits<char>, std::allocator<char> > const&)",
                      "tree.cpp", 42) == "ns::Tree<std::basic_string<char>>::Node");
  }
  SECTION("no line information: the function's one type") {
    CHECK(map.type_at("make_desc", "", 0) == "Desc");
    CHECK(map.type_at("unknown_function", "", 0).empty());
  }
  SECTION("the standard library allocating for make_unique<T> / make_shared<T>") {
    CHECK(map.type_at("std::__detail::_MakeUniq<Desc>::__single_object std::make_unique<Desc>()",
                      "/usr/include/c++/12/bits/unique_ptr.h", 1065) == "Desc");
    CHECK(map.type_at("std::__allocated_ptr<std::allocator<std::_Sp_counted_ptr_inplace<"
                      "ns::Tree<long>::Node, std::allocator<ns::Tree<long>::Node>, "
                      "(__gnu_cxx::_Lock_policy)2> > > std::__allocate_guarded<...>(...)",
                      "/usr/include/c++/12/bits/allocated_ptr.h", 98) == "ns::Tree<long>::Node");
    CHECK(map.type_at("std::make_unique<Missing>()", "unique_ptr.h", 1065).empty());
  }
  SECTION("make_shared's T sits in the control block, others' objects are T") {
    CHECK(map.site_type("share_desc", "src/ops.cpp", 9).in_control_block);
    CHECK(map.site_type("share_desc", "src/ops.cpp", 9).type == "Desc");
    CHECK_FALSE(map.site_type("make_desc", "src/ops.cpp", 7).in_control_block);
    CHECK(map.site_type("std::__allocated_ptr<std::allocator<std::_Sp_counted_ptr_inplace<Desc, "
                        "std::allocator<Desc>, (__gnu_cxx::_Lock_policy)2> > > "
                        "std::__allocate_guarded<...>(...)",
                        "allocated_ptr.h", 98)
              .in_control_block);
    CHECK_FALSE(map.site_type("std::make_unique<Desc>()", "unique_ptr.h", 1065).in_control_block);
  }
  SECTION("records by full or unqualified name, unless ambiguous") {
    REQUIRE(map.record("Desc"));
    REQUIRE(map.record("ns::Tree<long>::Node"));
    CHECK_FALSE(map.record("Node")); // two records answer to it
    CHECK_FALSE(map.record("Missing"));
  }
}

// A map made before placement new in templates was left out holds, on the
// line of `new (A::allocate(sizeof(Leaf))) Leaf()`, the template's own text
// (the type as written) beside the instantiation's allocate: the
// instantiation types the site, as it would alone.
TEST_CASE("a template's own site gives way to its instantiation's", "[types]") {
  RecordLayout leaf = record_of("BPlusTree<>::Leaf", "/src/index.cpp", 248, {member("n", 0, 8)});
  AllocSite pattern = site("/src/index.cpp", 90, 90, "BPlusTree::new_leaf", "BPlusTree::Leaf");
  pattern.dependent = true;
  AllocSite instance =
      site("/src/index.cpp", 90, 90, "BPlusTree<>::new_leaf", "BPlusTree<>::Leaf", "allocate");
  const TypeMap map = round_trip(analyse_structs({leaf}, {pattern, instance}, 64));
  REQUIRE(map.sites().size() == 2);
  CHECK(map.sites()[0].dependent != map.sites()[1].dependent);
  CHECK(map.type_at("BPlusTree<Alloc<0> >::new_leaf()", "/src/index.cpp", 90) ==
        "BPlusTree<>::Leaf");
  // Alone, the template's text still names its type.
  const TypeMap only = round_trip(analyse_structs({leaf}, {pattern}, 64));
  CHECK(only.type_at("BPlusTree<Alloc<0> >::new_leaf()", "/src/index.cpp", 90) ==
        "BPlusTree::Leaf");
}

TEST_CASE("an implicit constructor's objects: its default member initializers' type", "[types]") {
  // template <class T> struct F {      // line 2: GCC's line for F<T>::F()
  //   T *made = new T();               // line 3
  RecordLayout fa = record_of("F<A>", "/src/f.cpp", 8, {member("made", 0, 8)});
  fa.line = 2;
  RecordLayout fb = record_of("F<B>", "/src/f.cpp", 8, {member("made", 0, 8)});
  fb.line = 2;
  RecordLayout a = record_of("A", "/src/f.cpp", 24, {member("x", 0, 8)});
  a.line = 6;
  const TypeMap map = round_trip(analyse_structs(
      {fa, fb, a},
      {site("/src/f.cpp", 3, 3, "F<A>::F", "A"), site("/src/f.cpp", 3, 3, "F<B>::F", "B")}, 64));
  CHECK(map.type_at("F<A>::F()", "/src/f.cpp", 2) == "A");
  CHECK(map.type_at("F<B>::F()", "/src/f.cpp", 2) == "B");
  // Not at its class's head: another line of the constructor, untyped.
  CHECK(map.type_at("F<A>::F()", "/src/f.cpp", 4).empty());
  // Not a constructor.
  CHECK(map.type_at("F<A>::G()", "/src/f.cpp", 2).empty());
}

TEST_CASE("what is not a type map says so", "[types]") {
  std::string error;
  CHECK_FALSE(TypeMap::parse("{nope", "a.json", error));
  CHECK(error.rfind("a.json: ", 0) == 0);
  CHECK_FALSE(TypeMap::parse(R"({"schema": "memlayout.report/1"})", "b.json", error));
  CHECK(error.find("not a type map") != std::string::npos);
  CHECK_FALSE(TypeMap::parse(
      R"({"schema": "memlayout.structs/1", "records": [{"name": "A", "size": 8, "align": 8,
          "fields": [{"name": "x", "size": 8, "type": "long"}]}], "sites": []})",
      "c.json", error));
  CHECK(error.find("records[0].fields[0].offset") != std::string::npos);
  CHECK_FALSE(TypeMap::load("/nonexistent/map.json", error));
  CHECK(error.find("/nonexistent/map.json") != std::string::npos);
  CHECK(type_map_beside("/bin/prog") == "/bin/prog.memlayout-types.json");
}

TEST_CASE("records of one name in two files: each site's own", "[types]") {
  // C: a.c's private struct entry {char k; long v;}, b.c's {int id; char name[40];}.
  RecordLayout a =
      record_of("entry", "/home/me/proj/a.c", 16, {member("k", 0, 1), member("v", 8, 8)});
  RecordLayout b =
      record_of("entry", "/home/me/proj/b.c", 44, {member("id", 0, 4), member("name", 4, 40)}, 4);
  const TypeMap map = round_trip(analyse_structs({a, b}, {}, 64));
  const RecordLayout *in_b = map.record("entry", "proj/b.c");
  REQUIRE(in_b);
  CHECK(in_b->size == 44);
  CHECK(in_b->field("name"));
  const RecordLayout *in_a = map.record("entry", "/build/../home/me/proj/a.c");
  REQUIRE(in_a);
  CHECK(in_a->size == 16);
  CHECK(map.record("entry", "")->size == 16); // no file: the first, as before
}

TEST_CASE("a record two translation units lay out differently: its layouts counted", "[types]") {
  // kv.h's struct kv_entry, with -DKV_WIDE in one file: two layouts of one
  // record (one name, one place), numbered; `report --types` notes which one
  // it uses.
  const std::string kv_h = "/home/me/proj/include/kv.h";
  RecordLayout narrow =
      record_of("kv_entry", kv_h, 32, {member("key", 0, 24), member("value", 24, 8)});
  narrow.variant = 1;
  narrow.translation_units = {"/home/me/proj/src/main.cpp"};
  RecordLayout wide =
      record_of("kv_entry", kv_h, 56, {member("key", 0, 48), member("value", 48, 8)});
  wide.variant = 2;
  wide.translation_units = {"/home/me/proj/src/index.cpp -DKV_WIDE"};
  RecordLayout other = narrow;
  other.name = "kv_slot";
  other.variant = 0;
  const TypeMap map = round_trip(analyse_structs({narrow, wide, other}, {}, 64));
  const RecordLayout *first = map.record("kv_entry");
  REQUIRE(first);
  CHECK(first->size == 32);
  CHECK(map.layouts_of(*first) == 2);
  CHECK(map.layouts_of(*map.record("kv_slot")) == 1);
}

TEST_CASE("members of unnamed types read back, reachable by name", "[types]") {
  RecordLayout r;
  r.name = "tagged";
  r.kind = "struct";
  r.size = 32;
  r.align = 8;
  FieldLayout anon = member("", 16, 16);
  anon.type = "struct {...}";
  anon.nested = "struct";
  anon.members = {member("c1", 16, 1), member("ptr", 24, 8)};
  FieldLayout u = member("u", 8, 8);
  u.type = "union {...}";
  u.nested = "union";
  u.members = {member("n", 8, 4), member("d", 8, 8)};
  r.fields = {member("tag", 0, 4), u, anon};
  compute_holes(r);
  const TypeMap map = round_trip(analyse_structs({r}, {}, 64));
  const RecordLayout *back = map.record("tagged");
  REQUIRE(back);
  REQUIRE(back->field("ptr"));
  CHECK(back->field("ptr")->offset == 24);
  REQUIRE(back->field("u.d"));
  CHECK(back->field("u.d")->size == 8);
  CHECK(back->field("u")->nested == "union");
  CHECK_FALSE(back->field("d"));
}

// --hot FIELD names what C++ and C name: an inherited member as the derived
// record's own ("refs") or through its base ("Counted::refs"), an unnamed
// union's members directly; the list of names says the same.
TEST_CASE("members through bases and unnamed unions", "[types]") {
  RecordLayout counted = record_of("Counted", "/src/obj.h", 16, {member("refs", 0, 8)});
  counted.fields.push_back(member("weak", 8, 8));
  RecordLayout named = record_of("Named", "/src/obj.h", 8, {member("name", 0, 8)});
  FieldLayout base1 = member("Counted", 0, 16);
  base1.role = FieldRole::kBase;
  FieldLayout base2 = member("Named", 16, 8);
  base2.role = FieldRole::kBase;
  FieldLayout anon;
  anon.nested = "union";
  anon.offset = 24;
  anon.size = 8;
  anon.align = 8;
  anon.members = {member("i", 24, 8), member("p", 24, 8)};
  FieldLayout opaque = member("Opaque", 32, 8); // a base the map has no record of
  opaque.role = FieldRole::kBase;
  RecordLayout node =
      record_of("Node", "/src/node.h", 48, {base1, base2, anon, opaque, member("next", 40, 8)});
  const TypeMap map = round_trip(analyse_structs({counted, named, node}, {}, 64));
  const RecordLayout *n = map.record("Node");
  REQUIRE(n);
  CHECK(map.prefix_through(*n, "next") == 48u);
  CHECK(map.prefix_through(*n, "refs") == 8u);
  CHECK(map.prefix_through(*n, "weak") == 16u);
  CHECK(map.prefix_through(*n, "Counted::weak") == 16u);
  CHECK(map.prefix_through(*n, "name") == 24u);
  CHECK(map.prefix_through(*n, "Named::name") == 24u);
  CHECK(map.prefix_through(*n, "p") == 32u);
  CHECK(map.prefix_through(*n, "Named") == 24u); // through the base itself
  CHECK_FALSE(map.prefix_through(*n, "Named::refs"));
  CHECK_FALSE(map.prefix_through(*n, "nope"));
  CHECK(map.member_names(*n) ==
        std::vector<std::string>{"refs", "weak", "name", "i", "p", "Opaque", "next"});
}

// A one-caller allocating function stays a report's site (docs/report.md):
// its objects' type is what the map's sites that call it allocate.
TEST_CASE("a function's objects typed by the map's sites that call it", "[types]") {
  RecordLayout client =
      record_of("client", "/src/zm.c", 40, {member("lock", 0, 4), member("fd", 4, 4)});
  RecordLayout entry = record_of("entry", "/src/kv.c", 72, {member("key", 0, 8)});
  RecordLayout node = record_of("ns::Node", "/src/pool.cpp", 24, {member("key", 0, 8)});
  const TypeMap map =
      round_trip(analyse_structs({client, entry, node},
                                 {site("/src/zm.c", 13, 13, "createClient", "client", "zcalloc"),
                                  site("/src/kv.c", 23, 23, "entry_new", "entry", "fl_get"),
                                  site("/src/kv.c", 40, 41, "entry_copy", "entry", "fl_get"),
                                  site("/src/pool.cpp", 9, 9, "ns::make", "ns::Node", "get")},
                                 64));
  auto at = [&](const char *callee, const char *function, const char *file, uint32_t line) {
    TypeMap::Caller c{function, file, line};
    return map.called_type(callee, &c).type;
  };
  SECTION("the caller's call, by file and line") {
    CHECK(at("zcalloc", "createClient", "/build/zm.c", 13) == "client");
    CHECK(at("fl_get", "entry_copy", "kv.c", 41) == "entry");
    // A call the map has no site at, or of another function there.
    CHECK(at("zcalloc", "createClient", "zm.c", 14).empty());
    CHECK(at("zmalloc", "createClient", "zm.c", 13).empty());
    // The map's site there is not a call of it: its own allocation's type
    // is site_type's answer, not this one.
    CHECK(at("malloc", "createClient", "zm.c", 13).empty());
  }
  SECTION("recorded names: parameters, scopes and template arguments dropped") {
    CHECK(at("void* zcalloc(unsigned long)", "createClient", "zm.c", 13) == "client");
    CHECK(at("ns::Pool<ns::Node>::get(unsigned long)", "ns::make()", "pool.cpp", 9) == "ns::Node");
    CHECK(at("(anonymous namespace)::get()", "ns::make()", "pool.cpp", 9) == "ns::Node");
  }
  SECTION("no line information: the caller function's sites") {
    CHECK(at("zcalloc", "createClient", "", 0) == "client");
    CHECK(at("zcalloc", "main", "", 0).empty());
  }
  SECTION("no caller shown: the one place that calls it") {
    CHECK(map.called_type("zcalloc", nullptr).type == "client");
    CHECK(map.called_type("fl_get", nullptr).type.empty()); // two places
    CHECK(map.called_type("nothing_calls_it", nullptr).type.empty());
  }
}

// `sink(new A()); sink(new B()); sink(new C());` on one line: the map has the
// three new-expressions' start columns (37, 61, 80), a recorded site GCC's,
// where its expression ends (52, 71, 90). All three were left untyped.
TEST_CASE("several allocations on one line are told apart by column", "[types]") {
  RecordLayout a = record_of("q::Derived", "/src/p2.cpp", 16, {member("x", 8, 8)});
  RecordLayout b = record_of("q::B2", "/src/p2.cpp", 16, {member("y", 8, 8)});
  RecordLayout c = record_of("q::DA", "/src/p2.cpp", 128, {member("z", 0, 8)});
  auto at = [](uint32_t column, std::string type) {
    AllocSite s = site("/src/p2.cpp", 8, 8, "main", std::move(type));
    s.column = column;
    return s;
  };
  const TypeMap map = round_trip(
      analyse_structs({a, b, c}, {at(37, "q::Derived"), at(61, "q::B2"), at(80, "q::DA")}, 64));
  CHECK(map.type_at("main", "/src/p2.cpp", 8, false, 52) == "q::Derived");
  CHECK(map.type_at("main", "/src/p2.cpp", 8, false, 71) == "q::B2");
  CHECK(map.type_at("main", "/src/p2.cpp", 8, false, 90) == "q::DA");
  CHECK(map.type_at("main", "/src/p2.cpp", 8).empty()); // no column: which one is not known
  CHECK(map.type_at("main", "/src/p2.cpp", 8, false, 20).empty()); // before them all
}
