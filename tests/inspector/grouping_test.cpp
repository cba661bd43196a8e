#include "grouping.h"
#include "heap_snapshot.h"
#include "this_process_modules.h"
#include "trace_builder.h"
#include "trace_reader.h"

#include <catch2/catch.hpp>

#include <elf.h>
#include <link.h>

using namespace memlayout;
using namespace memlayout::inspector;
using memlayout::testing::Block;
using memlayout::testing::Bytes;
using memlayout::testing::TraceBuilder;
using trace::Api;

// Code addresses of this binary for the recorded stacks: frame 0 lies in a
// malloc-like wrapper, frame 1 in the function that called it. Outside the
// memlayout namespace, which the symbolizer counts as allocator plumbing.
struct GroupingFrames {
  uint64_t in_wrapper, in_caller;
};

extern "C" __attribute__((noinline)) uint64_t grouping_return_address() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

extern "C" __attribute__((noinline)) GroupingFrames grouping_xmalloc_like() {
  GroupingFrames f;
  f.in_wrapper = grouping_return_address();
  f.in_caller = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return f;
}

extern "C" __attribute__((noinline)) GroupingFrames grouping_make_node() {
  GroupingFrames f = grouping_xmalloc_like();
  asm volatile("" ::: "memory"); // keeps the call from becoming a tail jump
  return f;
}

extern "C" __attribute__((noinline)) GroupingFrames grouping_xstrdup_like() {
  GroupingFrames f;
  f.in_wrapper = grouping_return_address();
  f.in_caller = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return f;
}

// A record and its name from one line, through two wrappers.
extern "C" __attribute__((noinline)) GroupingFrames grouping_make_named(bool name) {
  GroupingFrames f = name ? grouping_xstrdup_like() : grouping_xmalloc_like();
  asm volatile("" ::: "memory");
  return f;
}

extern "C" __attribute__((noinline)) GroupingFrames grouping_make_edge() {
  GroupingFrames f = grouping_xmalloc_like();
  asm volatile("" ::: "memory");
  return f;
}

namespace {

std::unique_ptr<Symbolizer> this_process_symbolizer() {
  std::vector<ModuleEntry> mods = memlayout::testing::this_process_modules();
  Symbolizer::Options opts;
  opts.main_executable = "/proc/self/exe";
  return std::make_unique<Symbolizer>(mods, opts);
}

constexpr uint32_t kTagEdge = 9;

// Objects: tagged edges from make_edge (usable 128, 2 of 3 tagged; 320
// bytes), nodes from make_node in class 48 through two stacks (164 bytes)
// and in class 64 (50 bytes), untagged edges in class 32 by two threads (48).
Bytes grouping_trace() {
  GroupingFrames node = grouping_make_node();
  GroupingFrames edge = grouping_make_edge();
  TraceBuilder t;
  t.strings({{kTagEdge, "edge_t"}});
  t.stacks({{1, {node.in_wrapper, node.in_caller}},
            {2, {edge.in_wrapper, edge.in_caller}},
            {3, {node.in_wrapper, node.in_caller, 0x1234}}});
  Block b(1000, 1000, 5000);
  uint64_t a = 0x100000;
  auto next = [&a] { return a += 0x1000; };
  b.alloc(Api::kMalloc, next(), 40, 48, 1).alloc(Api::kMalloc, next(), 40, 48, 1);
  b.alloc(Api::kMalloc, next(), 44, 48, 1).alloc(Api::kMalloc, next(), 40, 48, 3);
  b.alloc(Api::kMalloc, next(), 50, 64, 1);
  b.alloc(Api::kMalloc, next(), 100, 128, 2).tag(a, kTagEdge);
  b.alloc(Api::kMalloc, next(), 100, 128, 2).tag(a, kTagEdge);
  b.alloc(Api::kMalloc, next(), 120, 128, 2);
  b.alloc(Api::kMalloc, next(), 24, 32, 2);
  Block b6(1100, 1100, 5100);
  b6.alloc(Api::kMalloc, next(), 24, 32, 2);
  t.events(5, b).events(6, b6).end(2000, 6000);
  return t.bytes();
}

struct Grouped {
  Bytes bytes;
  TraceReader r;
  HeapSnapshot s;
};

std::unique_ptr<Grouped> snapshot_of_grouping_trace() {
  auto g = std::make_unique<Grouped>();
  g->bytes = grouping_trace();
  REQUIRE(g->r.open_buffer(g->bytes.data(), g->bytes.size(), "g.trace"));
  std::string error;
  REQUIRE(build_snapshot(g->r, g->bytes, SnapshotSpec{SnapshotPoint::kEnd, "", {}}, g->s, error));
  REQUIRE(g->s.objects.size() == 10);
  return g;
}

} // namespace

TEST_CASE("a group lists the wrappers its own objects came through", "[grouping]") {
  GroupingFrames record = grouping_make_named(false), name = grouping_make_named(true);
  TraceBuilder t;
  t.stacks({{1, {record.in_wrapper, record.in_caller}}, {2, {name.in_wrapper, name.in_caller}}});
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, 0x100000, 24, 24, 1).alloc(Api::kMalloc, 0x101000, 30, 40, 2);
  t.events(5, b).end(2000, 6000);
  Bytes bytes = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(bytes.data(), bytes.size(), "w.trace"));
  HeapSnapshot s;
  std::string error;
  REQUIRE(build_snapshot(r, bytes, {SnapshotPoint::kEnd, "", {}}, s, error));
  auto sym = this_process_symbolizer();
  WrapperPolicy wrappers;
  wrappers.wrappers = {"grouping_xmalloc_like", "grouping_xstrdup_like"};
  GroupingOptions o;
  o.wrappers = &wrappers;
  std::vector<Group> groups = group_objects(s, r, *sym, o);
  REQUIRE(groups.size() == 2);
  for (const Group &g : groups) {
    INFO(g.size_class);
    CHECK(g.site.function == "grouping_make_named");
    REQUIRE(g.site.looked_through.size() == 1);
    CHECK(g.site.looked_through[0].function ==
          (g.size_class == 24 ? "grouping_xmalloc_like" : "grouping_xstrdup_like"));
  }
}

TEST_CASE("wrapper frames: allocator plumbing, C wrappers and configured names", "[grouping]") {
  WrapperPolicy o;
  CHECK(o.is_skipped("operator new(unsigned long)"));
  CHECK(o.is_skipped("xmalloc"));
  CHECK(o.is_skipped("xmalloc(unsigned long)"));
  CHECK(o.is_skipped("sqlite3DbMallocRawNN"));
  CHECK(o.is_skipped("g_malloc0"));
  CHECK(o.is_skipped("std::allocator_traits<std::allocator<int> >::allocate(...)"));
  // Function templates carry their return type first: the name decides.
  CHECK(o.is_skipped("std::unique_ptr<Node, std::default_delete<Node> > std::make_unique<Node, "
                     "int&>(int&)"));
  CHECK(o.is_skipped("std::__allocated_ptr<std::allocator<Node> > "
                     "std::__allocate_guarded<std::allocator<Node> >(std::allocator<Node>&)"));
  CHECK_FALSE(o.is_skipped("std::unique_ptr<Node> make_node_ptr(int)"));
  CHECK_FALSE(o.is_skipped("xmallocate_everything"));
  // The standard containers allocate for the code that fills them.
  CHECK(o.is_skipped("std::_Rb_tree<int, int, std::_Identity<int>, std::less<int>, "
                     "std::allocator<int> >::_M_create_node<int const&>(int const&)"));
  CHECK(o.is_skipped("std::map<long, Account, std::less<long>, std::allocator<std::pair<long "
                     "const, Account> > >::operator[](long const&)"));
  CHECK(o.is_skipped("std::__cxx11::list<int, std::allocator<int> >::_M_create_node<int>(int&&)"));
  CHECK(o.is_skipped("std::__detail::_Hashtable_alloc<std::allocator<std::__detail::_Hash_node<"
                     "long, false> > >::_M_allocate_buckets(unsigned long)"));
  CHECK_FALSE(o.is_skipped("ledger::map_accounts(int)"));
  // All of the standard library: std::function, operator+ on strings, a
  // thread's start (the thread's function, inlined or not, is the site).
  CHECK(o.is_skipped("std::thread::_State_impl<Fn>::_M_run()"));
  CHECK(o.is_skipped("std::__cxx11::basic_string<char> std::operator+<char>(char const*, "
                     "std::__cxx11::basic_string<char>&&)"));
  CHECK(o.is_skipped("std::_Function_base::_Base_manager<main()::<lambda()> >::_M_create"));
  // An allocator's allocate member, whoever wrote the allocator.
  CHECK(o.is_skipped("ob::Arena<Order>::allocate(unsigned long)"));
  // A class's own operator new (MEMLAYOUT_SEG_CLASS's, a free list's):
  // the new-expression that calls it is the site.
  CHECK(o.is_skipped("rnode::operator new(unsigned long)"));
  CHECK(o.is_skipped("ns::Node<int>::operator new[](unsigned long)"));
  CHECK_FALSE(o.is_skipped("ns::Node<int>::operator_new_helper(unsigned long)"));
  CHECK_FALSE(o.is_skipped("allocate_order(unsigned long)"));
  CHECK_FALSE(o.is_skipped("ob::Book::allocate_order(unsigned long)"));
  CHECK_FALSE(o.is_skipped("make_node(int)"));
  CHECK_FALSE(o.is_skipped("my_alloc_node"));
  o.wrappers = {"my_alloc_*", "make_node"};
  CHECK(o.is_skipped("my_alloc_node"));
  CHECK(o.is_skipped("make_node(int)"));
  CHECK_FALSE(o.is_skipped("make_nodes(int)"));
  WrapperReason why;
  REQUIRE(o.wrapper_reason("make_node(int)", &why));
  CHECK(why == WrapperReason::kOption);
  REQUIRE(o.wrapper_reason("xmalloc", &why));
  CHECK(why == WrapperReason::kBuiltin);
  o.not_wrappers = {"xmalloc"};
  CHECK_FALSE(o.is_skipped("xmalloc"));
  CHECK(o.is_skipped("operator new(unsigned long)")); // plumbing is never a site
}

TEST_CASE("the call site skips wrappers to the caller's line", "[grouping]") {
  GroupingFrames node = grouping_make_node();
  auto sym = this_process_symbolizer();
  std::vector<uint64_t> stack{node.in_wrapper, node.in_caller, 0x1234};

  Group::Site plain = alloc_site(stack, *sym, WrapperPolicy{});
  CHECK(plain.function == "grouping_xmalloc_like");
  CHECK(plain.looked_through.empty());

  WrapperPolicy o;
  o.wrappers = {"grouping_xmalloc_like"};
  Group::Site site = alloc_site(stack, *sym, o);
  CHECK(site.function == "grouping_make_node");
  REQUIRE(site.looked_through.size() == 1);
  CHECK(site.looked_through[0].function == "grouping_xmalloc_like");
  CHECK(site.looked_through[0].reason == WrapperReason::kOption);
  CHECK(site.file.find("grouping_test.cpp") != std::string::npos);
  CHECK(site.line > 0);

  // The frame that called the site's function: the wrapper's caller, at its
  // call, which is the site once the wrapper is looked through.
  Group::Site caller;
  alloc_site(stack, *sym, WrapperPolicy{}, nullptr, &caller);
  CHECK(caller.function == "grouping_make_node");
  CHECK(caller.file == site.file);
  CHECK(caller.line == site.line);
  Group::Site none;
  CHECK(alloc_site({stack.data(), 1}, *sym, WrapperPolicy{}, nullptr, &none).function ==
        "grouping_xmalloc_like");
  CHECK(none.function.empty()); // the stack ends there

  // Every frame a wrapper: the outermost one names the site.
  o.wrappers.push_back("grouping_make_*");
  CHECK(alloc_site({stack.data(), 2}, *sym, o).function == "grouping_make_node");
  // Nothing known about the address: "??".
  CHECK(alloc_site(std::vector<uint64_t>{0x1234}, *sym, o).function == "??");
}

TEST_CASE("groups by call site and size class, named by tag or site, ids by bytes", "[grouping]") {
  auto g = snapshot_of_grouping_trace();
  auto sym = this_process_symbolizer();
  WrapperPolicy wrappers;
  wrappers.wrappers = {"grouping_xmalloc_like"};
  GroupingOptions o;
  o.wrappers = &wrappers;
  std::vector<Group> groups = group_objects(g->s, g->r, *sym, o);
  REQUIRE(groups.size() == 4);
  for (size_t i = 0; i < groups.size(); ++i)
    CHECK(groups[i].id == i + 1);

  const Group &tagged = groups[0];
  CHECK(tagged.name == "edge_t");
  CHECK(tagged.site.function == "grouping_make_edge");
  CHECK(tagged.size_class == 128);
  CHECK(tagged.requested_size == 100);
  CHECK(tagged.bytes == 320);
  CHECK(tagged.objects.size() == 3);
  CHECK(tagged.threads == std::vector<uint32_t>{5});

  const Group &node48 = groups[1];
  CHECK(node48.site.function == "grouping_make_node");
  CHECK(node48.name ==
        "grouping_make_node (grouping_test.cpp:" + std::to_string(node48.site.line) + ")");
  CHECK(node48.size_class == 48);
  CHECK(node48.requested_size == 40);
  CHECK(node48.objects.size() == 4); // stacks 1 and 3 share the call site
  CHECK(node48.bytes == 164);

  const Group &node64 = groups[2];
  CHECK(node64.site.function == "grouping_make_node");
  CHECK(node64.size_class == 64);
  CHECK(node64.bytes == 50);

  const Group &edge32 = groups[3];
  CHECK(edge32.site.function == "grouping_make_edge");
  CHECK(edge32.name.rfind("grouping_make_edge (grouping_test.cpp:", 0) == 0);
  CHECK(edge32.size_class == 32);
  CHECK(edge32.threads == std::vector<uint32_t>{5, 6});

  // Object indices are by address, and every object is in one group.
  std::vector<uint32_t> all;
  for (const Group &gr : groups) {
    CHECK(std::is_sorted(gr.objects.begin(), gr.objects.end()));
    all.insert(all.end(), gr.objects.begin(), gr.objects.end());
  }
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  SECTION("ids and names are deterministic") {
    auto sym2 = this_process_symbolizer();
    std::vector<Group> again = group_objects(g->s, g->r, *sym2, o);
    REQUIRE(again.size() == groups.size());
    for (size_t i = 0; i < groups.size(); ++i) {
      CHECK(again[i].id == groups[i].id);
      CHECK(again[i].name == groups[i].name);
      CHECK(again[i].objects == groups[i].objects);
    }
  }

  SECTION("without the wrapper configured, the wrapper is the site") {
    std::vector<Group> plain = group_objects(g->s, g->r, *sym, GroupingOptions{});
    for (const Group &gr : plain)
      CHECK(gr.site.function == "grouping_xmalloc_like");
    CHECK(plain.size() == 4); // one site now, still four size classes
  }

  SECTION("a pool hook names groups whose objects mostly come from one pool") {
    GroupingOptions p = o;
    p.pool_of = [](const LiveObject &obj) {
      return obj.usable == 48 ? std::string("nodes") : std::string();
    };
    std::vector<Group> pooled = group_objects(g->s, g->r, *sym, p);
    CHECK(pooled[0].name == "edge_t");
    CHECK(pooled[1].name == "nodes");
  }

  SECTION("a type hook names the groups whose objects can be of the record") {
    // grouping_make_node's site allocates a 40-byte record: its 48-class
    // group (40 bytes) is one; its 64-class group (50 bytes, not a multiple)
    // is something else allocated on that line; nothing is smaller than it.
    GroupingOptions t = o;
    t.type_of = [](const Group::Site &site) {
      return site.function == "grouping_make_node" ? GroupingOptions::SiteType{"node", 40}
                                                   : GroupingOptions::SiteType{"edge", 120};
    };
    std::vector<Group> typed = group_objects(g->s, g->r, *sym, t);
    CHECK(typed[0].name == "edge_t"); // the tag still wins
    CHECK(typed[1].type == "node");
    CHECK(typed[1].name == "node");
    CHECK(typed[2].type.empty());
    CHECK(typed[2].name.rfind("grouping_make_node (grouping_test.cpp:", 0) == 0);
    CHECK(typed[3].type.empty()); // 32-byte objects are no 120-byte record
  }

  SECTION("a caller hook types a site's objects by the calls of its function") {
    // grouping_xmalloc_like not looked through: it is the site of every
    // group, and what its callers' calls allocate types them. The site and
    // the name by tag stay; a site type_of names wins.
    GroupingOptions t;
    std::vector<std::string> asked;
    t.type_from_caller = [&asked](const Group::Site &site, const Group::Site *caller) {
      asked.push_back(caller ? caller->function : "(none)");
      if (site.function != "grouping_xmalloc_like" || !caller)
        return GroupingOptions::SiteType{};
      return caller->function == "grouping_make_node" ? GroupingOptions::SiteType{"node", 40}
                                                      : GroupingOptions::SiteType{"edge", 100};
    };
    std::vector<Group> typed = group_objects(g->s, g->r, *sym, t);
    REQUIRE(typed.size() == 4);
    CHECK(typed[0].name == "edge_t"); // the tag still wins
    CHECK(typed[0].type == "edge");
    CHECK(typed[1].site.function == "grouping_xmalloc_like");
    CHECK(typed[1].size_class == 48);
    CHECK(typed[1].type == "node");
    CHECK(typed[1].name == "node");
    CHECK(typed[1].type_caller.find("grouping_make_node (grouping_test.cpp:" +
                                    std::to_string(node48.site.line) + ")") != std::string::npos);
    CHECK(typed[2].type.empty()); // 50 bytes: not the 40-byte record
    CHECK(typed[2].type_caller.empty());
    CHECK(typed[3].type.empty()); // 24 bytes: no 100-byte record
    CHECK(std::count(asked.begin(), asked.end(), "(none)") == 0);

    t.type_of = [](const Group::Site &) { return GroupingOptions::SiteType{"direct", 8}; };
    std::vector<Group> direct = group_objects(g->s, g->r, *sym, t);
    for (const Group &gr : direct) {
      CHECK(gr.type == "direct");
      CHECK(gr.type_caller.empty());
    }
  }

  SECTION("a record ending in a one-element array names the longer objects too") {
    // A skip list's node with `Node *next[1]` last, at 32 bytes: its site's
    // 40-byte and 50-byte objects are the same record with more levels, not
    // something else allocated on the line; only those below the array's
    // offset are not it.
    GroupingOptions t = o;
    t.type_of = [](const Group::Site &site) {
      GroupingOptions::SiteType node{"node", 40};
      node.trailing_array = true;
      node.trailing_offset = 32;
      return site.function == "grouping_make_node" ? node : GroupingOptions::SiteType{};
    };
    std::vector<Group> typed = group_objects(g->s, g->r, *sym, t);
    CHECK(typed[1].type == "node");
    CHECK(typed[2].type == "node");
    CHECK(typed[2].name == "node");
    t.type_of = [](const Group::Site &site) {
      GroupingOptions::SiteType node{"node", 48};
      node.trailing_array = true;
      node.trailing_offset = 48;
      return site.function == "grouping_make_node" ? node : GroupingOptions::SiteType{};
    };
    typed = group_objects(g->s, g->r, *sym, t);
    CHECK(typed[1].type.empty()); // 40 bytes: short of the array's offset
    CHECK(typed[2].type == "node");
  }

  SECTION("a record behind a control block names only objects of exactly that size") {
    // make_shared<T> of a 24-byte T: 16 + 24 = 40-byte objects are T, the
    // 50-byte ones on the same line (a vector's buffer) are not.
    GroupingOptions t = o;
    t.type_of = [](const Group::Site &site) {
      return site.function == "grouping_make_node" ? GroupingOptions::SiteType{"node", 24, 16}
                                                   : GroupingOptions::SiteType{};
    };
    std::vector<Group> typed = group_objects(g->s, g->r, *sym, t);
    CHECK(typed[1].type == "node");
    CHECK(typed[1].type_offset == 16);
    CHECK(typed[2].type.empty());
    CHECK(typed[2].type_offset == 0);
  }

  SECTION("groups whose objects mostly came from seg_malloc are the program's pools") {
    CHECK(std::none_of(groups.begin(), groups.end(),
                       [](const Group &gr) { return gr.program_pool; }));
    HeapSnapshot s = g->s;
    for (LiveObject &obj : s.objects)
      if (obj.usable == 48)
        obj.api = memlayout::trace::Api::kSegPool;
    std::vector<Group> pools = group_objects(s, g->r, *sym, o);
    for (const Group &gr : pools)
      CHECK(gr.program_pool == (gr.size_class == 48));
  }
}

TEST_CASE("unresolved frames are looked through to a named caller", "[grouping]") {
  GroupingFrames node = grouping_make_node();
  auto sym = this_process_symbolizer();
  WrapperPolicy o;
  o.wrappers = {"grouping_xmalloc_like"};
  // A stripped library's frames (no module covers 0x1234/0x5678) below a
  // named function: the innermost unresolved frame is the site, named by
  // its caller, so call paths through the library stay apart.
  Group::Site a = alloc_site(std::vector<uint64_t>{0x1234, node.in_caller}, *sym, o);
  CHECK(a.function == "??");
  CHECK(a.file == "0x1234");
  CHECK(a.caller == "grouping_make_node");
  Group::Site b = alloc_site(std::vector<uint64_t>{0x5678, node.in_caller}, *sym, o);
  CHECK(b.file != a.file);
  // Unresolved frames inside a wrapper belong to it: the site is the
  // first unresolved frame after it.
  Group::Site c =
      alloc_site(std::vector<uint64_t>{0x1234, node.in_wrapper, 0x5678, node.in_caller}, *sym, o);
  CHECK(c.file == "0x5678");
  CHECK(c.caller == "grouping_make_node");
}

TEST_CASE("glibc's chunks of several sizes for one request make one group", "[grouping]") {
  // A reused 208-byte chunk serves a 184-byte request whole (the rest is too
  // small to split off): 184 and 200 usable bytes from one site and size.
  // Grouped by usable size, each half fell under every finding's minimum.
  GroupingFrames node = grouping_make_node();
  TraceBuilder t = TraceBuilder::bare();
  t.u32(trace::HeaderTag::kPageSize, 4096).u32(trace::HeaderTag::kPointerBits, 64);
  t.u32(trace::HeaderTag::kUsableModel, static_cast<uint32_t>(trace::UsableModel::kGlibc));
  t.stacks({{1, {node.in_wrapper, node.in_caller}}});
  Block b(1000, 1000, 5000);
  for (uint64_t i = 0; i < 40; ++i)
    b.alloc(Api::kMalloc, 0x100000 + 0x1000 * i, 184, i % 3 ? 184 : 200, 1);
  t.events(5, b).end(2000, 6000);
  Bytes bytes = t.bytes();
  TraceReader r;
  REQUIRE(r.open_buffer(bytes.data(), bytes.size(), "glibc.trace"));
  HeapSnapshot s;
  std::string error;
  REQUIRE(build_snapshot(r, bytes, SnapshotSpec{SnapshotPoint::kEnd, "", {}}, s, error));
  auto sym = this_process_symbolizer();
  WrapperPolicy wrappers;
  wrappers.wrappers = {"grouping_xmalloc_like"};
  GroupingOptions o;
  o.wrappers = &wrappers;
  std::vector<Group> groups = group_objects(s, r, *sym, o);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].objects.size() == 40);
  CHECK(groups[0].size_class == 184); // what most of them have

  SECTION("a pool's objects keep their exact classes") {
    for (LiveObject &obj : s.objects)
      obj.api = Api::kSegPool;
    CHECK(group_objects(s, r, *sym, o).size() == 2);
  }
}
