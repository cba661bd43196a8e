#include "cxx_names.h"
#include "symbolizer.h"
#include "this_process_modules.h"

#include <catch2/catch.hpp>

#include <elf.h>
#include <link.h>

using namespace memlayout;
using namespace memlayout::inspector;

// A function with a distinctive name the symbolizer must find in this binary.
extern "C" __attribute__((noinline)) int memlayout_symbolizer_probe(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

namespace {

std::vector<ModuleEntry> this_process() { return memlayout::testing::this_process_modules(); }

} // namespace

TEST_CASE("an address in this test binary names its function and file", "[symbolizer]") {
  REQUIRE(memlayout_symbolizer_probe(2) == 7);
  auto mods = this_process();
  REQUIRE_FALSE(mods.empty());
  CHECK_FALSE(mods[0].build_id.empty()); // gcc links with --build-id on Debian
  Symbolizer::Options opts;
  opts.main_executable = "/proc/self/exe";
  Symbolizer sym(mods, opts);
  auto pc = reinterpret_cast<uint64_t>(&memlayout_symbolizer_probe);
  const SymbolizedAddress &a = sym.symbolize(pc, /*return_address=*/false);
  REQUIRE(a.module != nullptr);
  CHECK(a.module->path.empty()); // the main program, found through main_executable
  CHECK(a.module_offset == pc - mods[0].load_bias);
  CHECK(a.resolved);
  REQUIRE_FALSE(a.frames.empty());
  CHECK(a.frames.back().function == "memlayout_symbolizer_probe");
  CHECK(a.frames.back().file.find("symbolizer_test.cpp") != std::string::npos);
  CHECK(a.frames.back().line > 0);
  CHECK_FALSE(a.frames.back().inlined);
  CHECK(&sym.symbolize(pc, false) == &a); // cached
  CHECK(sym.take_warnings().empty());

  SECTION("a return address names the caller's call line") {
    auto ret = reinterpret_cast<uint64_t>(__builtin_return_address(0));
    const SymbolizedAddress &r = sym.symbolize(ret);
    CHECK(r.resolved);
    CHECK(r.frames.front().function != "??");
  }
  SECTION("a changed build-id is reported once and symbols still come") {
    mods[0].build_id = "not the real id";
    Symbolizer other(mods, opts);
    const SymbolizedAddress &b = other.symbolize(pc, false);
    CHECK(b.frames.back().function == "memlayout_symbolizer_probe");
    other.symbolize(pc + 1, false);
    auto w = other.take_warnings();
    REQUIRE(w.size() == 1);
    CHECK(w[0].find("build-id") != std::string::npos);
  }
}

TEST_CASE("unknown addresses come back as ?? with their module", "[symbolizer]") {
  ModuleEntry gone;
  gone.path = "/nonexistent/libgone.so";
  gone.load_bias = 0x7f0000000000;
  gone.segments.push_back({0, 0x10000, 5});
  Symbolizer sym({gone});
  const SymbolizedAddress &a = sym.symbolize(0x7f0000000123);
  REQUIRE(a.module != nullptr);
  CHECK(a.module->path == "/nonexistent/libgone.so");
  CHECK(a.module_offset == 0x123);
  CHECK_FALSE(a.resolved);
  CHECK(a.frames.at(0).function == "??");
  sym.symbolize(0x7f0000000456);
  CHECK(sym.take_warnings().size() == 1); // once per module, not per address

  const SymbolizedAddress &b = sym.symbolize(0x1234);
  CHECK(b.module == nullptr);
  CHECK(b.frames.at(0).function == "??");
}

TEST_CASE("allocator frames are told apart from callers", "[symbolizer]") {
  CHECK(is_allocator_frame("operator new(unsigned long)"));
  CHECK(is_allocator_frame("malloc"));
  CHECK(is_allocator_frame("__gnu_cxx::new_allocator<int>::allocate(unsigned long, void const*)"));
  CHECK(is_allocator_frame("std::__new_allocator<int>::allocate(unsigned long, void const*)"));
  CHECK(is_allocator_frame("std::allocator_traits<std::allocator<int> >::allocate()"));
  CHECK_FALSE(is_allocator_frame("mallocate_things()"));
  CHECK_FALSE(is_allocator_frame("std::_Rb_tree<int, int>::_M_create_node()"));
  CHECK_FALSE(is_allocator_frame("make_node(int)"));
}

// A call into the allocator's code obtains memory only where it is no
// release and no question about memory already had.
TEST_CASE("allocation calls are allocator code that obtains memory", "[symbolizer]") {
  CHECK(is_allocation_call("malloc"));
  CHECK(is_allocation_call("operator new(unsigned long)"));
  CHECK(is_allocation_call("realloc"));
  CHECK(is_allocation_call("memlayout::seg::pool_alloc(memlayout::seg::Pool*, unsigned long)"));
  CHECK(is_allocation_call("std::__new_allocator<int>::allocate(unsigned long, void const*)"));
  CHECK_FALSE(is_allocation_call("free"));
  CHECK_FALSE(is_allocation_call("operator delete(void*, unsigned long)"));
  CHECK_FALSE(is_allocation_call("std::__new_allocator<int>::deallocate(int*, unsigned long)"));
  CHECK_FALSE(is_allocation_call("je_sdallocx"));
  CHECK_FALSE(is_allocation_call("memlayout::seg::pool_of(void const*)"));
  CHECK_FALSE(is_allocation_call("memlayout::seg::pool_usable_size(void const*)"));
  CHECK_FALSE(is_allocation_call("memlayout::seg::(anonymous namespace)::resolve()"));
  CHECK(is_allocation_call("memalign"));
  CHECK(is_allocation_call("__libc_scratch_buffer_grow"));
  CHECK_FALSE(is_allocation_call("make_node(int)")); // not the allocator's code at all
}

TEST_CASE("demangle: names LLVM 14 cannot demangle get libstdc++'s reading", "[symbolizer]") {
  // std::make_shared<Session>(Session&&): llvm-cxxfilt-14 returns it as it is.
  const std::string make_shared = "_ZSt11make_sharedI7SessionJS0_EESt10shared_ptrINSt9enable_"
                                  "ifIXntsrSt8is_arrayIT_E5valueES4_E4typeEEDpOT0_";
  std::string d = memlayout::inspector::demangle(make_shared);
  CHECK(d.find("std::make_shared<Session, Session>(Session&&)") != std::string::npos);
  CHECK(memlayout::inspector::demangle("_Z8new_nodem") == "new_node(unsigned long)");
  CHECK(memlayout::inspector::demangle("main") == "main");
  CHECK(memlayout::inspector::demangle("_Znot a name") == "_Znot a name");
}

// Rust's symbols as rustc-demangle and perf print them: legacy mangling
// without its hash and with its escapes decoded, and v0.
TEST_CASE("demangle: Rust's legacy and v0 symbols", "[symbolizer]") {
  using memlayout::inspector::demangle;
  CHECK(demangle("_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$15try_allocate_in17hd87dd332ee4f38d9E") ==
        "alloc::raw_vec::RawVecInner<A>::try_allocate_in");
  CHECK(demangle("_ZN63_$LT$u8$u20$as$u20$alloc..vec..spec_from_elem..SpecFromElem$GT$9from_"
                 "elem17h9eca3d5eee1efb20E") ==
        "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem");
  CHECK(demangle("_ZN4main4main28_$u7b$$u7b$closure$u7d$$u7d$17h8f98cfa5385beccfE") ==
        "main::main::{{closure}}");
  CHECK(demangle("_ZN5alloc7raw_vec19RawVec$LT$T$C$A$GT$4grow17h0123456789abcdefE") ==
        "alloc::raw_vec::RawVec<T,A>::grow");
  CHECK(demangle("_RNvCs1234_7mycrate3foo") == "mycrate::foo");
}

TEST_CASE("canonical_cxx_name: the demangler's and clang's spellings meet", "[symbolizer]") {
  using memlayout::inspector::canonical_cxx_name;
  const std::string demangler =
      "ns::Tree<int, std::__cxx11::basic_string<char, std::char_traits<char>, "
      "std::allocator<char> > >::insert";
  CHECK(canonical_cxx_name(demangler) == "ns::Tree<int,std::string>::insert");
  CHECK(canonical_cxx_name("ns::Tree<int, std::basic_string<char>>::insert") ==
        "ns::Tree<int,std::string>::insert");
  CHECK(canonical_cxx_name("std::vector<Node*, std::allocator<Node*> >") == "std::vector<Node*>");
  CHECK(
      canonical_cxx_name("std::map<long, V, std::less<long>, "
                         "std::allocator<std::pair<long const, V> > >::operator[](long const&)") ==
      "std::map<long,V>::operator[](long const&)");
  // Words stay apart, a first argument stays even when it looks like a default,
  // and operator< is no argument list.
  CHECK(canonical_cxx_name("f(unsigned long)") == "f(unsigned long)");
  CHECK(canonical_cxx_name("Box<std::allocator<int>, 3>") == "Box<std::allocator<int>,3>");
  CHECK(canonical_cxx_name("operator<(A const&, A const&)") == "operator<(A const&,A const&)");
  CHECK(canonical_cxx_name("Tree<long,long>::Node") ==
        canonical_cxx_name("Tree<long, long>::Node"));
  // A library type is a default only where it is the default: of an earlier
  // argument.
  CHECK(canonical_cxx_name("Map<char, std::hash<int>>::E") == "Map<char,std::hash<int>>::E");
  CHECK(canonical_cxx_name("Map<char, std::hash<char>>::E") == "Map<char>::E");
  CHECK(canonical_cxx_name("std::unordered_map<int, long, std::hash<int>, std::equal_to<int>, "
                           "std::allocator<std::pair<const int, long> > >") ==
        "std::unordered_map<int,long>");
  CHECK(canonical_cxx_name("std::unique_ptr<Node, std::default_delete<Node> >") ==
        "std::unique_ptr<Node>");
  CHECK(canonical_cxx_name("std::set<long, std::less<int> >") == "std::set<long,std::less<int>>");
}
