// Allocation sites found in C and C++ fixtures whose allocating lines say,
// in a comment, which sites they hold (fixtures/sites.cpp explains the
// markers): every marked site found, nothing unmarked reported.
#include "alloc_sites.h"
#include "struct_scan.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace memlayout::inspector;

const std::string kFixtures = STRUCTS_FIXTURES;
const std::string kSegInclude = "-I" SEG_INCLUDE_DIR;

using SiteKey = std::tuple<uint32_t, std::string, std::string>; // line, call, type

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t*/");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// "SITE: malloc st::Node | new st::Desc" on line N -> {N, malloc, st::Node}, ...
std::set<SiteKey> marked_sites(const std::string &path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::set<SiteKey> out;
  std::string text;
  for (uint32_t line = 1; std::getline(in, text); ++line) {
    size_t at = text.find("SITE:");
    if (at == std::string::npos || text.find("\"SITE:") != std::string::npos)
      continue;
    std::stringstream entries(text.substr(at + 5));
    std::string entry;
    while (std::getline(entries, entry, '|')) {
      entry = trim(entry);
      size_t space = entry.rfind(' ');
      REQUIRE(space != std::string::npos);
      out.emplace(line, trim(entry.substr(0, space)), entry.substr(space + 1));
    }
  }
  return out;
}

ScanResult scan(const std::string &file, std::vector<std::string> args) {
  ScanOptions o;
  o.files = {kFixtures + "/" + file};
  o.fixed_args = std::move(args);
  ScanResult r;
  std::string error;
  REQUIRE(scan_structs(o, r, error));
  REQUIRE(r.failed.empty());
  return r;
}

std::set<SiteKey> reported(const ScanResult &r, const std::string &file) {
  std::set<SiteKey> out;
  for (const AllocSite &s : r.sites) {
    CHECK(s.file == kFixtures + "/" + file);
    CHECK_FALSE(s.dependent);
    out.emplace(s.line, s.call, s.type);
  }
  return out;
}

const AllocSite *site_at(const ScanResult &r, uint32_t line, const std::string &type) {
  for (const AllocSite &s : r.sites)
    if (s.line == line && s.type == type)
      return &s;
  return nullptr;
}

uint32_t line_of(const std::string &file, const std::string &text) {
  std::ifstream in(kFixtures + "/" + file);
  std::string l;
  for (uint32_t n = 1; std::getline(in, l); ++n)
    if (l.find(text) != std::string::npos)
      return n;
  FAIL("no line with '" << text << "' in " << file);
  return 0;
}

} // namespace

TEST_CASE("C++ allocation sites: new, make_*, malloc family, allocators, pools", "[sites]") {
  const ScanResult r = scan("sites.cpp", {"-std=c++20", kSegInclude});
  const std::set<SiteKey> expected = marked_sites(kFixtures + "/sites.cpp");
  REQUIRE(expected.size() >= 20);
  CHECK(reported(r, "sites.cpp") == expected);

  SECTION("each with its enclosing function") {
    const AllocSite *plain = site_at(r, line_of("sites.cpp", "Node *plain()"), "st::Node");
    REQUIRE(plain);
    CHECK(plain->function == "st::plain");
    // A default member initializer runs in the class's constructors.
    const AllocSite *member = site_at(r, line_of("sites.cpp", "Node *sentinel = "), "st::Node");
    REQUIRE(member);
    CHECK(member->function == "st::Sentinel::Sentinel");
    const AllocSite *lambda = site_at(r, line_of("sites.cpp", "auto make = []"), "st::Node");
    REQUIRE(lambda);
    CHECK(lambda->function == "st::in_lambda::<lambda>");
    const uint32_t take = line_of("sites.cpp", "T *take()");
    REQUIRE(site_at(r, take, "st::Desc"));
    CHECK(site_at(r, take, "st::Desc")->function == "st::Pool<st::Desc>::take");
  }
  SECTION("an expression over several lines spans them") {
    const AllocSite *multi = site_at(r, line_of("sites.cpp", "std::malloc( // SITE"), "st::Node");
    REQUIRE(multi);
    CHECK(multi->end_line == multi->line + 1);
  }
}

TEST_CASE("C allocation sites: sizeof expressions, offsetof, conversions, pools", "[sites]") {
  const ScanResult r = scan("c_sites.c", {"-std=c11", kSegInclude});
  const std::set<SiteKey> expected = marked_sites(kFixtures + "/c_sites.c");
  REQUIRE(expected.size() == 7);
  CHECK(reported(r, "c_sites.c") == expected);
  const AllocSite *flex = site_at(r, line_of("c_sites.c", "offsetof(struct flex"), "flex");
  REQUIRE(flex);
  CHECK(flex->function == "flexible");
}

// fl_get, pool_get, arena_push: what the program's own allocators are
// called. Sites where their untyped result becomes a record; none where the
// callee is the C library's, finds what it was given, or allocates nothing.
TEST_CASE("C allocation sites through the program's own allocators", "[sites]") {
  const ScanResult r = scan("c_wrapper_sites.c", {"-std=c11"});
  const std::set<SiteKey> expected = marked_sites(kFixtures + "/c_wrapper_sites.c");
  REQUIRE(expected.size() == 8);
  CHECK(reported(r, "c_wrapper_sites.c") == expected);
  const AllocSite *e = site_at(r, line_of("c_wrapper_sites.c", "*e = fl_get(&entries)"), "entry");
  REQUIRE(e);
  CHECK(e->function == "entry_new");
}

TEST_CASE("C++ allocation sites through the program's own allocators", "[sites]") {
  const ScanResult r = scan("wrapper_sites.cpp", {"-std=c++20"});
  const std::set<SiteKey> expected = marked_sites(kFixtures + "/wrapper_sites.cpp");
  REQUIRE(expected.size() == 4);
  CHECK(reported(r, "wrapper_sites.cpp") == expected);
  const AllocSite *t = site_at(r, line_of("wrapper_sites.cpp", "T *make_in("), "ws::Node");
  REQUIRE(t);
  CHECK(t->function == "ws::make_in<ws::Node>");
}

TEST_CASE("a function template's instantiations name their sites with their arguments", "[sites]") {
  const ScanResult r = scan("function_templates.cpp", {"-std=c++20"});
  const uint32_t line = line_of("function_templates.cpp", "new Skip<L>");
  const AllocSite *one = site_at(r, line, "Skip<1>");
  const AllocSite *four = site_at(r, line, "Skip<4>");
  REQUIRE(one);
  REQUIRE(four);
  CHECK(one->function == "make_skip<1>");
  CHECK(four->function == "make_skip<4>");
}

TEST_CASE("an uninstantiated template's site keeps the type as written", "[sites]") {
  const ScanResult r = scan("template_sites.hpp", {"-x", "c++", "-std=c++20"});
  std::vector<std::string> calls;
  for (const AllocSite &s : r.sites) {
    CHECK(s.dependent);
    CHECK(s.type.find("Cell") != std::string::npos);
    calls.push_back(s.call);
  }
  // new T and std::make_*<T> alike; placement new on memory from a call
  // that depends on the template's parameters is no site.
  CHECK(calls == std::vector<std::string>{"new", "make_shared", "make_unique", "make_unique[]"});
}

TEST_CASE("functions that allocate, by name", "[sites]") {
  for (const char *yes : {"malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign",
                          "memalign", "seg_malloc", "seg_aligned_alloc", "allocate", "xmalloc",
                          "operator new", "operator new[]", "mallocx", "g_malloc0"})
    CHECK(is_allocating_function(yes));
  for (const char *no : {"free", "deallocate", "seg_free", "alloca", "__builtin_alloca",
                         "get_allocator", "memcpy", "dealloc_node"})
    CHECK_FALSE(is_allocating_function(no));
}
