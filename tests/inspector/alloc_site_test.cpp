// The allocation-site definition (alloc_site.h): wrapper detection from debug
// info (synthetic code maps with known answers) and from recorded stacks (this
// test's own functions, symbolized from its DWARF), the code map read from a
// real binary, and the route table that carries the definition to the
// interposer.
#include "alloc_site.h"
#include "code_map.h"
#include "route_table.h"
#include "this_process_modules.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <iterator>

using namespace memlayout;
using namespace memlayout::inspector;

// Frames of this binary: a pool that returns untyped memory to two typed
// constructors, and a typed helper with two callers. Outside the memlayout
// namespace, which counts as allocator plumbing.
struct AstNode {
  long key;
};
struct AstFrames {
  uint64_t in_wrapper, in_caller;
};

extern "C" __attribute__((noinline)) uint64_t ast_return_address() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

extern "C" __attribute__((noinline)) void *ast_pool_get(AstFrames *f) {
  f->in_wrapper = ast_return_address();
  f->in_caller = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return f;
}

extern "C" __attribute__((noinline)) AstNode *ast_make_node(AstFrames *f) {
  auto *n = static_cast<AstNode *>(ast_pool_get(f));
  asm volatile("" ::: "memory"); // not a tail call
  return n;
}

extern "C" __attribute__((noinline)) AstNode *ast_make_op(AstFrames *f) {
  auto *n = static_cast<AstNode *>(ast_pool_get(f));
  asm volatile("" ::: "memory");
  return n;
}

extern "C" __attribute__((noinline)) AstNode *ast_typed_get(AstFrames *f) {
  f->in_wrapper = ast_return_address();
  f->in_caller = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return reinterpret_cast<AstNode *>(f);
}

extern "C" __attribute__((noinline)) int ast_typed_a(AstFrames *f) {
  int k = static_cast<int>(reinterpret_cast<uintptr_t>(ast_typed_get(f)) & 1);
  asm volatile("" ::: "memory");
  return k;
}

extern "C" __attribute__((noinline)) int ast_typed_b(AstFrames *f) {
  int k = static_cast<int>(reinterpret_cast<uintptr_t>(ast_typed_get(f)) & 1);
  asm volatile("" ::: "memory");
  return k;
}

namespace {

std::unique_ptr<Symbolizer> this_process_symbolizer() {
  Symbolizer::Options opts;
  opts.main_executable = "/proc/self/exe";
  return std::make_unique<Symbolizer>(memlayout::testing::this_process_modules(), opts);
}

// A module as a compiler leaves it for the int-lf pattern: bst_add with the
// constructors and the pool inlined, the pool also out of line, a nested
// two-layer pool, a typed constructor with two callers, and a thread start
// routine returning void * that nobody calls directly.
struct Synthetic {
  ModuleCode code;
  uint32_t malloc_fn, pool_get, create_node, create_op, bst_add, raw_alloc, zalloc, make_a, make_b,
      new_node, insert, remove_fn, thread_main;
  Synthetic() {
    malloc_fn = code.add_function("malloc", Tri::kYes);
    pool_get = code.add_function("pool_get", Tri::kYes);
    create_node = code.add_function("create_node", Tri::kNo);
    create_op = code.add_function("create_op", Tri::kNo);
    bst_add = code.add_function("bst_add", Tri::kNo);
    raw_alloc = code.add_function("raw_alloc", Tri::kYes);
    zalloc = code.add_function("zalloc", Tri::kYes);
    make_a = code.add_function("make_a", Tri::kNo);
    make_b = code.add_function("make_b", Tri::kNo);
    new_node = code.add_function("new_node", Tri::kNo);
    insert = code.add_function("insert", Tri::kNo);
    remove_fn = code.add_function("remove", Tri::kNo);
    thread_main = code.add_function("thread_main", Tri::kYes);

    uint32_t add = code.add_scope(bst_add, ModuleCode::kNoScope, {{0x100, 0x200}});
    uint32_t cn = code.add_scope(create_node, add, {{0x120, 0x140}});
    uint32_t pn = code.add_scope(pool_get, cn, {{0x128, 0x130}});
    code.add_call(pn, malloc_fn, false);
    uint32_t co = code.add_scope(create_op, add, {{0x150, 0x170}});
    uint32_t po = code.add_scope(pool_get, co, {{0x158, 0x160}});
    code.add_call(po, malloc_fn, false);
    uint32_t pool = code.add_scope(pool_get, ModuleCode::kNoScope, {{0x300, 0x340}});
    code.add_call(pool, malloc_fn, false);

    uint32_t raw = code.add_scope(raw_alloc, ModuleCode::kNoScope, {{0x400, 0x420}});
    code.add_call(raw, malloc_fn, false);
    uint32_t z = code.add_scope(zalloc, ModuleCode::kNoScope, {{0x420, 0x440}});
    code.add_call(z, raw_alloc, false);
    code.add_call(code.add_scope(make_a, ModuleCode::kNoScope, {{0x440, 0x460}}), zalloc, false);
    code.add_call(code.add_scope(make_b, ModuleCode::kNoScope, {{0x460, 0x480}}), zalloc, false);

    uint32_t nn = code.add_scope(new_node, ModuleCode::kNoScope, {{0x500, 0x520}});
    code.add_call(nn, malloc_fn, false);
    code.add_call(code.add_scope(insert, ModuleCode::kNoScope, {{0x520, 0x560}}), new_node, false);
    code.add_call(code.add_scope(remove_fn, ModuleCode::kNoScope, {{0x560, 0x5a0}}), new_node,
                  false);

    uint32_t tm = code.add_scope(thread_main, ModuleCode::kNoScope, {{0x600, 0x640}});
    code.add_call(tm, malloc_fn, false);
  }
};

// label_module's ranges for a rules file's text, checked sorted and disjoint.
struct Labels {
  rules::RuleSet set{};
  std::vector<routes::RangeEntry> ranges;
  const routes::RangeEntry *at(uint64_t a) const {
    for (const auto &x : ranges)
      if (a >= x.lo && a < x.hi)
        return &x;
    return nullptr;
  }
};
Labels label(const ModuleCode &code, const WrapperPolicy &p, const std::string &text) {
  Labels l;
  rules::ParseError e{};
  REQUIRE(rules::parse_rules(text.data(), text.size(), &l.set, &e));
  l.ranges = label_module(code, p, l.set);
  for (size_t i = 1; i < l.ranges.size(); ++i)
    CHECK(l.ranges[i - 1].hi <= l.ranges[i].lo);
  return l;
}

} // namespace

TEST_CASE("wrappers from debug info: untyped memory handed to several callers", "[alloc_site]") {
  Synthetic s;
  WrapperPolicy p;
  detect_wrappers_in_binary(s.code, p);
  CHECK(p.detected.count("pool_get"));          // inlined into two constructors, and out of line
  CHECK(p.detected.count("zalloc"));            // two callers
  CHECK(p.detected.count("raw_alloc"));         // its one caller is a wrapper: nested
  CHECK_FALSE(p.detected.count("new_node"));    // typed: a constructor, whatever its callers
  CHECK_FALSE(p.detected.count("thread_main")); // nobody calls it
  CHECK_FALSE(p.detected.count("create_node"));
  CHECK(p.detected.at("pool_get").reason == WrapperReason::kDetectedBinary);
  CHECK(p.detected.at("pool_get").evidence.find("create_node") != std::string::npos);

  SECTION("--not-wrapper wins, and what nests under it is judged again") {
    WrapperPolicy q;
    q.not_wrappers = {"zalloc"};
    detect_wrappers_in_binary(s.code, q);
    CHECK_FALSE(q.detected.count("zalloc"));
    CHECK_FALSE(q.detected.count("raw_alloc")); // one caller, no longer a wrapper
    CHECK(q.detected.count("pool_get"));
  }
}

TEST_CASE("the route table labels sites, inlined copies and wrapper code", "[alloc_site]") {
  Synthetic s;
  WrapperPolicy p;
  detect_wrappers_in_binary(s.code, p);
  std::string text = "function=create_node,pool=nodes\nfunction=create_op,pool=ops\n"
                     "function=zalloc,pool=z\n";
  const Labels labels = label(s.code, p, text);
  auto label_at = [&](uint64_t a) { return labels.at(a); };
  // The pool inlined into create_node belongs to create_node's site.
  REQUIRE(label_at(0x12c));
  CHECK(label_at(0x12c)->rules == 1);
  CHECK(label_at(0x121)->rules == 1);
  CHECK(label_at(0x15c)->rules == 2);
  // bst_add's own code and sites no rule names are not listed.
  CHECK_FALSE(label_at(0x110));
  CHECK_FALSE(label_at(0x1f0));
  // Out-of-line wrapper code: decided by the caller.
  REQUIRE(label_at(0x310));
  CHECK(label_at(0x310)->flags == routes::kSkipFrame);
  CHECK(label_at(0x410)->flags == routes::kSkipFrame); // raw_alloc, nested
  // A rule naming a wrapper labels nothing of it: its callers are the sites.
  CHECK(label_at(0x430)->flags == routes::kSkipFrame);
  CHECK(label_at(0x430)->rules == 0);
  // Merged where labels agree: create_node's range is one.
  CHECK(label_at(0x121)->lo == 0x120);
  CHECK(label_at(0x121)->hi == 0x140);
  CHECK(rules_naming("ns::create_node", labels.set) == 1); // by scopes
}

TEST_CASE("wrappers from debug info across modules: the program's calls into a library",
          "[alloc_site]") {
  // liby.so defines the wrappers; the program only declares them and calls
  // grab_mem from two functions, grab_zero from one. Each also has a static
  // helper of the same name with one caller: two functions, not one.
  ModuleCode lib, exe;
  uint32_t l_malloc = lib.add_function("malloc", Tri::kYes);
  uint32_t l_calloc = lib.add_function("calloc", Tri::kYes);
  uint32_t l_mem = lib.add_function("grab_mem", Tri::kYes);
  uint32_t l_zero = lib.add_function("grab_zero", Tri::kYes);
  uint32_t l_helper = lib.add_function("helper", Tri::kYes);
  uint32_t l_user = lib.add_function("lib_user", Tri::kNo);
  lib.add_call(lib.add_scope(l_mem, ModuleCode::kNoScope, {{0x100, 0x140}}), l_malloc, false);
  lib.add_call(lib.add_scope(l_zero, ModuleCode::kNoScope, {{0x140, 0x180}}), l_calloc, false);
  lib.add_call(lib.add_scope(l_helper, ModuleCode::kNoScope, {{0x180, 0x1a0}}), l_malloc, false);
  lib.add_call(lib.add_scope(l_user, ModuleCode::kNoScope, {{0x1a0, 0x1c0}}), l_helper, false);

  uint32_t e_malloc = exe.add_function("malloc", Tri::kYes);
  uint32_t e_mem = exe.add_function("grab_mem", Tri::kYes); // declarations
  uint32_t e_zero = exe.add_function("grab_zero", Tri::kYes);
  uint32_t e_helper = exe.add_function("helper", Tri::kYes);
  uint32_t make_node = exe.add_function("make_node", Tri::kNo);
  uint32_t make_desc = exe.add_function("make_desc", Tri::kNo);
  uint32_t main_fn = exe.add_function("main", Tri::kNo);
  exe.add_call(exe.add_scope(make_node, ModuleCode::kNoScope, {{0x100, 0x120}}), e_mem, false);
  exe.add_call(exe.add_scope(make_desc, ModuleCode::kNoScope, {{0x120, 0x140}}), e_zero, false);
  uint32_t m = exe.add_scope(main_fn, ModuleCode::kNoScope, {{0x140, 0x200}});
  exe.add_call(m, e_mem, false);
  exe.add_call(m, e_helper, false);
  exe.add_call(exe.add_scope(e_helper, ModuleCode::kNoScope, {{0x200, 0x220}}), e_malloc, false);

  WrapperPolicy alone;
  detect_wrappers_in_binary(lib, alone);
  detect_wrappers_in_binary(exe, alone);
  CHECK_FALSE(alone.detected.count("grab_mem")); // no module alone shows it

  const ModuleCode *both[] = {&exe, &lib};
  WrapperPolicy p;
  detect_wrappers_in_modules(both, p);
  REQUIRE(p.detected.count("grab_mem"));
  CHECK(p.detected.at("grab_mem").reason == WrapperReason::kDetectedBinary);
  CHECK(p.detected.at("grab_mem").evidence.find("make_node") != std::string::npos);
  CHECK_FALSE(p.detected.count("grab_zero")); // one caller
  CHECK_FALSE(p.detected.count("helper"));    // two helpers of one caller each

  // What a rule naming make_desc meets: grab_zero, a site of its own.
  CallGraph graph(both);
  std::vector<SiteCallee> through = sites_called_by("make_desc", graph, p);
  REQUIRE(through.size() == 1);
  CHECK(through[0].callee == "grab_zero");
  CHECK_FALSE(through[0].tail);
  CHECK(sites_called_by("make_node", graph, p).empty()); // through a wrapper: routed
}

// A rule naming main that routed nothing: what main calls that gives memory
// back (free) or asks about it (seg_pool_of, into the pool's code) is no
// site its memory may have come from. The summary named seg_pool_of,
// seg_pool_stats and seg_usable_size "a site of its own that allocates".
TEST_CASE("functions that only free or ask about memory are no sites", "[alloc_site]") {
  ModuleCode exe;
  uint32_t pool_of = exe.add_function("memlayout::seg::pool_of(void const*)", Tri::kNo);
  uint32_t e_free = exe.add_function("free", Tri::kNo);
  uint32_t e_malloc = exe.add_function("malloc", Tri::kYes);
  uint32_t query = exe.add_function("seg_pool_of", Tri::kNo);
  uint32_t drop = exe.add_function("drop_all", Tri::kNo);
  uint32_t make = exe.add_function("make_buffer", Tri::kNo);
  uint32_t main_fn = exe.add_function("main", Tri::kNo);
  exe.add_scope(pool_of, ModuleCode::kNoScope, {{0x80, 0xa0}});
  exe.add_call(exe.add_scope(query, ModuleCode::kNoScope, {{0x100, 0x120}}), pool_of, false);
  exe.add_call(exe.add_scope(drop, ModuleCode::kNoScope, {{0x120, 0x140}}), e_free, false);
  exe.add_call(exe.add_scope(make, ModuleCode::kNoScope, {{0x140, 0x160}}), e_malloc, false);
  uint32_t m = exe.add_scope(main_fn, ModuleCode::kNoScope, {{0x200, 0x280}});
  exe.add_call(m, query, false);
  exe.add_call(m, drop, false);
  exe.add_call(m, make, false);

  const ModuleCode *mods[] = {&exe};
  CallGraph graph(mods);
  WrapperPolicy p;
  std::vector<SiteCallee> through = sites_called_by("main", graph, p);
  REQUIRE(through.size() == 1);
  CHECK(through[0].callee == "make_buffer");
}

TEST_CASE("the route table labels the return addresses of tail-called constructors",
          "[alloc_site]") {
  // new_node's body is `jmp malloc`: its allocations' first frame returns
  // into main, after the call of new_node.
  ModuleCode code;
  uint32_t malloc_fn = code.add_function("malloc", Tri::kYes);
  uint32_t new_node = code.add_function("new_node", Tri::kNo);
  uint32_t pool_get = code.add_function("pool_get", Tri::kYes);
  uint32_t main_fn = code.add_function("main", Tri::kNo);
  code.add_call(code.add_scope(new_node, ModuleCode::kNoScope, {{0x100, 0x10a}}), malloc_fn, true,
                0x10a);
  code.add_call(code.add_scope(pool_get, ModuleCode::kNoScope, {{0x110, 0x11a}}), malloc_fn, true,
                0x11a);
  uint32_t m = code.add_scope(main_fn, ModuleCode::kNoScope, {{0x200, 0x300}});
  code.add_call(m, new_node, false, 0x20d);
  code.add_call(m, malloc_fn, false, 0x21d);
  code.add_call(m, pool_get, false, 0x22d);
  REQUIRE(code.call_returning_to(0x20d));
  CHECK(code.call_returning_to(0x20d)->callee == new_node);
  CHECK_FALSE(code.call_returning_to(0x20c));
  REQUIRE(code.tail_call(new_node));
  CHECK(code.tail_call(new_node)->callee == malloc_fn);
  CHECK_FALSE(code.tail_call(main_fn));

  WrapperPolicy p;
  p.wrappers = {"pool_get"};
  std::string text = "function=new_node,pool=nodes\nfunction=main,pool=m\n";
  const Labels labels = label(code, p, text);
  auto label_at = [&](uint64_t a) { return labels.at(a); };
  // The byte before the return address (lookups use pc - 1) is new_node's
  // site, not main's.
  REQUIRE(label_at(0x20c));
  CHECK(label_at(0x20c)->rules == 1);
  CHECK(label_at(0x20c)->hi - label_at(0x20c)->lo == 1);
  CHECK(label_at(0x20b)->rules == 2);
  CHECK(label_at(0x20d)->rules == 2);
  CHECK(label_at(0x104)->rules == 1);
  // main's own calls of malloc and of a wrapper are main's.
  CHECK(label_at(0x21c)->rules == 2);
  CHECK(label_at(0x22c)->rules == 2);
}

TEST_CASE("the route table labels unnamed code: pending frames as alloc_site has them",
          "[alloc_site]") {
  // A stripped library's static helpers: code no function name covers, even
  // where (a module read otherwise) a scope says something else.
  ModuleCode code;
  uint32_t malloc_fn = code.add_function("malloc", Tri::kYes);
  uint32_t wrap = code.add_function("db_malloc_zero", Tri::kYes);
  uint32_t site = code.add_function("lib_new_record", Tri::kNo);
  uint32_t ctor = code.add_function("new_node", Tri::kNo);
  code.add_call(code.add_scope(wrap, ModuleCode::kNoScope, {{0x100, 0x140}}), malloc_fn, false);
  uint32_t s = code.add_scope(site, ModuleCode::kNoScope, {{0x200, 0x240}});
  code.add_call(s, wrap, false, 0x210);
  uint32_t t = code.add_scope(ctor, ModuleCode::kNoScope, {{0x300, 0x30a}});
  code.add_call(t, malloc_fn, true, 0x30a); // new_node: jmp malloc
  code.add_call(code.add_scope(wrap, ModuleCode::kNoScope, {{0x140, 0x180}}), ctor, false, 0x150);
  code.add_unnamed_code({0x80, 0x100});
  code.add_unnamed_code({0x230, 0x240}); // the symbolizer's word over the scope's

  WrapperPolicy p;
  p.wrappers = {"db_malloc_zero"};
  std::string text = "function=lib_new_record,pool=r\nfunction=new_node,pool=n\n";
  const Labels labels = label(code, p, text);
  auto label_at = [&](uint64_t a) { return labels.at(a); };
  REQUIRE(label_at(0x80));
  CHECK(label_at(0x80)->flags == routes::kUnnamedCode);
  CHECK(label_at(0x80)->rules == 0);
  CHECK(label_at(0xff)->flags == routes::kUnnamedCode);
  CHECK(label_at(0x100)->flags == routes::kSkipFrame);
  CHECK(label_at(0x20f)->rules == 1);
  REQUIRE(label_at(0x230));
  CHECK(label_at(0x230)->flags == routes::kUnnamedCode);
  CHECK(label_at(0x230)->rules == 0);
  CHECK(label_at(0x22f)->rules == 1);
  // A tail-called constructor's return address in wrapper code: new_node's
  // site, or wrapper code above a pending unnamed frame.
  REQUIRE(label_at(0x14f));
  CHECK(label_at(0x14f)->rules == 2);
  CHECK(label_at(0x14f)->flags == routes::kTailCallInWrapper);
  CHECK(label_at(0x14e)->flags == routes::kSkipFrame);
}

namespace {

std::string file_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The executable sections of an ELF file, and its loadable segments.
std::vector<ModuleCode::Range> executable_sections(const std::string &bytes) {
  std::vector<ModuleCode::Range> out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    if ((sh.sh_flags & SHF_EXECINSTR) && (sh.sh_flags & SHF_ALLOC) && sh.sh_type != SHT_NOBITS &&
        sh.sh_size)
      out.push_back({sh.sh_addr, sh.sh_addr + sh.sh_size});
  }
  return out;
}

std::vector<ModuleSegment> load_segments(const std::string &bytes) {
  std::vector<ModuleSegment> out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD)
      out.push_back({ph.p_vaddr, ph.p_memsz, static_cast<uint8_t>(ph.p_flags & 7)});
  }
  return out;
}

// Checks, for the addresses of `module`'s code that `at` gives, that the
// code map calls unnamed exactly what the symbolizer leaves unresolved.
// Returns how many addresses it checked.
size_t check_unnamed_agrees(const ModuleEntry &module, Symbolizer &sym,
                            const std::vector<uint64_t> &offsets) {
  std::string error;
  auto code = ModuleCode::load(module.path, {"/usr/lib/debug"}, &error);
  REQUIRE(code);
  const auto &unnamed = code->unnamed_code();
  for (size_t i = 1; i < unnamed.size(); ++i)
    REQUIRE(unnamed[i - 1].hi <= unnamed[i].lo);
  auto is_unnamed = [&](uint64_t a) {
    for (const auto &u : unnamed)
      if (a >= u.lo && a < u.hi)
        return true;
    return false;
  };
  size_t checked = 0, disagree = 0;
  std::string first;
  for (uint64_t off : offsets) {
    const SymbolizedAddress &a = sym.symbolize(module.load_bias + off, false);
    ++checked;
    if (a.resolved == !is_unnamed(off))
      continue;
    if (!disagree++) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(off));
      first = buf + std::string(a.resolved ? " symbolized as " + a.frames.back().function
                                           : " unresolved but named in the code map");
    }
  }
  INFO(module.path << ": " << disagree << " of " << checked << " disagree, first " << first);
  CHECK(disagree == 0);
  return checked;
}

// The offsets to check in code: every byte of small sections, else both
// sides of every unnamed range's edges and a sample.
std::vector<uint64_t> code_offsets(const std::string &path, bool every_byte) {
  std::string bytes = file_bytes(path);
  std::vector<ModuleCode::Range> text = executable_sections(bytes);
  std::vector<uint64_t> out;
  auto in_text = [&](uint64_t a) {
    for (const auto &t : text)
      if (a >= t.lo && a < t.hi)
        return true;
    return false;
  };
  for (const auto &t : text)
    for (uint64_t a = t.lo; a < t.hi; a += every_byte ? 1 : 97)
      out.push_back(a);
  if (!every_byte) {
    std::string error;
    auto code = ModuleCode::load(path, {"/usr/lib/debug"}, &error);
    REQUIRE(code);
    for (const auto &u : code->unnamed_code())
      for (uint64_t a : {u.lo - 1, u.lo, u.hi - 1, u.hi})
        if (in_text(a))
          out.push_back(a);
  }
  return out;
}

} // namespace

TEST_CASE("unnamed code is what the symbolizer leaves unresolved", "[alloc_site]") {
  SECTION("a stripped library: static helpers between exported functions") {
    ModuleEntry lib;
    lib.path = MLT_STRIPPED_LIB;
    lib.load_bias = 0x40000000;
    std::string bytes = file_bytes(lib.path);
    REQUIRE(bytes.size() > sizeof(Elf64_Ehdr));
    lib.segments = load_segments(bytes);
    Symbolizer sym({lib});
    std::string error;
    auto code = ModuleCode::load(lib.path, {"/usr/lib/debug"}, &error);
    REQUIRE(code);
    CHECK_FALSE(code->has_dwarf());
    CHECK(code->unnamed_code().size() >= 2); // mem_raw and zero_fill, at least
    CHECK(check_unnamed_agrees(lib, sym, code_offsets(lib.path, true)) > 100);
  }
  SECTION("the C and C++ libraries this test links") {
    Symbolizer::Options opts;
    opts.main_executable = "/proc/self/exe";
    auto mods = memlayout::testing::this_process_modules();
    Symbolizer sym(mods, opts);
    size_t libraries = 0;
    for (const auto &m : mods) {
      if (m.path.find("/libc.so.6") == std::string::npos &&
          m.path.find("/libstdc++.so.6") == std::string::npos)
        continue;
      ++libraries;
      check_unnamed_agrees(m, sym, code_offsets(m.path, false));
    }
    CHECK(libraries == 2);
  }
}

TEST_CASE("wrappers from recorded stacks: this binary's own frames", "[alloc_site]") {
  AstFrames node{}, op{}, a{}, b{};
  ast_make_node(&node);
  ast_make_op(&op);
  ast_typed_a(&a);
  ast_typed_b(&b);
  auto sym = this_process_symbolizer();
  CodeMaps code(*sym);
  std::vector<uint64_t> s_node{node.in_wrapper, node.in_caller}, s_op{op.in_wrapper, op.in_caller},
      s_a{a.in_wrapper, a.in_caller}, s_b{b.in_wrapper, b.in_caller};

  SECTION("untyped memory to two callers: a wrapper, the callers are the sites") {
    std::vector<WeightedStack> stacks{{s_node, 1000}, {s_op, 1000}, {s_a, 500}, {s_b, 500}};
    WrapperPolicy p;
    detect_wrappers_in_stacks(stacks, *sym, code, p);
    REQUIRE(p.detected.count("ast_pool_get"));
    CHECK(p.detected.at("ast_pool_get").reason == WrapperReason::kDetectedTrace);
    // The debug info says ast_typed_get returns a typed pointer.
    CHECK_FALSE(p.detected.count("ast_typed_get"));
    Group::Site site = alloc_site(s_node, *sym, p);
    CHECK(site.function == "ast_make_node");
    REQUIRE(site.looked_through.size() == 1);
    CHECK(site.looked_through[0].function == "ast_pool_get");
    CHECK(alloc_site(s_op, *sym, p).function == "ast_make_op");
    CHECK(alloc_site(s_a, *sym, p).function == "ast_typed_get");
  }

  SECTION("a caller under 1% of the objects does not count") {
    std::vector<WeightedStack> stacks{{s_node, 100000}, {s_op, 50}};
    WrapperPolicy p;
    detect_wrappers_in_stacks(stacks, *sym, code, p);
    CHECK_FALSE(p.detected.count("ast_pool_get"));
  }

  SECTION("the code map of this binary knows what its functions return") {
    CHECK(code.returns_untyped(s_node[0], "ast_pool_get") == Tri::kYes);
    CHECK(code.returns_untyped(s_a[0], "ast_typed_get") == Tri::kNo);
    const ModuleCode *m = code.module_at(s_node[0]);
    REQUIRE(m);
    CHECK(m->has_dwarf());
    // The compiler recorded the constructors' calls to the pool.
    const ModuleCode::Function *pool = m->function("ast_pool_get");
    REQUIRE(pool);
    size_t calls_to_pool = 0;
    for (const auto &c : m->calls())
      if (m->functions()[c.callee].name == "ast_pool_get")
        ++calls_to_pool;
    CHECK(calls_to_pool >= 2);
    WrapperPolicy p;
    detect_wrappers_in_binary(*m, p);
    // It makes no allocation call: not a wrapper from the binary's view.
    CHECK_FALSE(p.detected.count("ast_pool_get"));
  }
}

TEST_CASE("looked-through reasons round-trip through their JSON names", "[alloc_site]") {
  for (auto r : {WrapperReason::kBuiltin, WrapperReason::kOption, WrapperReason::kRulesFile,
                 WrapperReason::kDetectedBinary, WrapperReason::kDetectedTrace}) {
    WrapperReason back;
    REQUIRE(parse_looked_through_decided(looked_through_decided(r), &back));
    CHECK(back == r);
  }
  WrapperReason back;
  CHECK_FALSE(parse_looked_through_decided("guessed", &back));
  CHECK(looked_through_text({{"pool_get", WrapperReason::kDetectedTrace, ""},
                             {"xmalloc", WrapperReason::kBuiltin, ""}}) ==
        "pool_get (detected), xmalloc (built-in)");
}

// Rust's allocation plumbing is looked through as the C++ library's is: the
// alloc crate, hashbrown, core, the global allocator's entry points and the
// trait implementations of them; the program's closure is the site.
TEST_CASE("Rust's allocation plumbing is built in", "[alloc_site]") {
  WrapperPolicy p;
  WrapperReason why{};
  for (const char *f : {"alloc::alloc::alloc", "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
                        "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
                        "<alloc::alloc::Global>::alloc_impl",
                        "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
                        "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
                        "hashbrown::raw::RawTableInner::fallible_with_capacity", "__rust_alloc",
                        "__rdl_alloc", "core::iter::traits::iterator::Iterator::collect"}) {
    INFO(f);
    CHECK(p.wrapper_reason(f, &why));
    CHECK(why == WrapperReason::kBuiltin);
  }
  for (const char *f : {"main::main::{{closure}}::{{closure}}", "myapp::store::Table::insert",
                        "<myapp::Pool as myapp::Arena>::take", "allocate_dtv", "alloc_buffer"}) {
    INFO(f);
    CHECK_FALSE(p.wrapper_reason(f, &why));
  }
}
