// memlayout structs on the study's trees (trees/*.cpp with the build's
// compilation database): every node and descriptor record as the compiler
// lays it out, and an allocation site, with its record, for every
// allocating line.
#include "edge_ext_lf.h"
#include "edge_int_lf.h"
#include "ext_lf.h"
#include "int_lf.h"
#include "occ_avl.h"
#include "struct_scan.h"
#include "ticket.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

using namespace memlayout::inspector;
namespace trees = memlayout::trees;

const std::string kTrees = TREES_DIR;

// An allocation that names its type: a record allocator given sizeof(T),
// make_unique<T>, new T (placement new constructs in memory allocated
// elsewhere and is no allocation). Comment lines are not code.
bool allocating_line(const std::string &text) {
  static const std::regex allocating(
      R"(records_\.allocate\w*\([^;]*sizeof\(|std::make_unique<|\bnew\s+[A-Za-z_][\w:<>]*\s*[\(\{\[;])");
  static const std::regex comment(R"(^\s*//)");
  return !std::regex_search(text, comment) && std::regex_search(text, allocating);
}

bool allocates(const std::string &path) {
  std::ifstream in(path);
  std::string text;
  while (std::getline(in, text))
    if (allocating_line(text))
      return true;
  return false;
}

const ScanResult &trees_scan() {
  static const ScanResult r = [] {
    ScanOptions o;
    // The files that allocate: clang takes seconds a file.
    for (const auto &e : std::filesystem::directory_iterator(kTrees))
      if (e.path().extension() == ".cpp" && allocates(e.path().string()))
        o.files.push_back(e.path().string());
    std::sort(o.files.begin(), o.files.end());
    o.build_dir = BUILD_DIR;
    ScanResult out;
    std::string error;
    if (!scan_structs(o, out, error))
      FAIL(error);
    REQUIRE(out.failed.empty());
    return out;
  }();
  return r;
}

const RecordLayout *find(const std::string &name) {
  for (const RecordLayout &r : trees_scan().records)
    if (r.name == name)
      return &r;
  return nullptr;
}

struct Expected {
  const char *name;
  size_t size, align;
};

#define NODE(T)                                                                                    \
  Expected { "memlayout::trees::" #T, sizeof(trees::T), alignof(trees::T) }

} // namespace

TEST_CASE("structs on the trees", "[trees]") {
  SECTION("node and descriptor records as the compiler lays them out") {
    for (const Expected &e : {
             NODE(IntLfBaselineLayout::Node),
             NODE(IntLfBaselineLayout::ChildCasOp),
             NODE(IntLfBaselineLayout::RelocateOp),
             NODE(IntLfFixedLayout::Node),
             NODE(IntLfFixedLayout::ChildCasOp),
             NODE(IntLfFixedLayout::RelocateOp),
             NODE(ExtLfBaselineLayout::Node),
             NODE(ExtLfBaselineLayout::Info),
             NODE(ExtLfFixedLayout::Node),
             NODE(EdgeExtLfBaselineLayout::Node),
             NODE(EdgeExtLfFixedLayout::Node),
             NODE(EdgeIntLfBaselineLayout::Node),
             NODE(EdgeIntLfFixedLayout::Node),
             NODE(OccAvlBaselineLayout::Node),
             NODE(OccAvlFixedLayout::Node),
             NODE(TicketBaselineLayout::Node),
             NODE(TicketFixedLayout::Node),
         }) {
      INFO(e.name);
      const RecordLayout *r = find(e.name);
      REQUIRE(r);
      CHECK(r->size == e.size);
      CHECK(r->align == e.align);
      // Members, holes and tail padding account for every byte once.
      uint64_t used = 0, holes = 0;
      for (const Hole &h : r->holes)
        holes += h.size;
      uint64_t end = 0;
      for (const FieldLayout &f : r->fields) {
        CHECK(f.offset >= end); // no overlap in a struct
        end = std::max(end, f.offset + f.size);
        used += f.size;
      }
      CHECK(used + holes + r->tail_padding == r->size);
    }
    // The study's headline: int-lf's padded 64-byte node, one line at jemalloc's class 64.
    const RecordLayout *node = find("memlayout::trees::IntLfBaselineLayout::Node");
    REQUIRE(node);
    REQUIRE(node->field("op"));
    CHECK(node->field("op")->offset == offsetof(trees::IntLfBaselineLayout::Node, op));
    CHECK(node->field("op")->sync == SyncKind::kAtomic);
  }

  SECTION("every typed allocation has its sites, each with its record") {
    size_t lines_checked = 0;
    for (const auto &e : std::filesystem::directory_iterator(kTrees)) {
      if (e.path().extension() != ".cpp")
        continue;
      std::ifstream in(e.path());
      std::string text;
      for (uint32_t line = 1; std::getline(in, text); ++line) {
        if (!allocating_line(text))
          continue;
        ++lines_checked;
        INFO(e.path().filename().string() << ":" << line << ": " << text);
        std::set<std::string> types;
        for (const AllocSite &s : trees_scan().sites)
          if (s.file == std::filesystem::canonical(e.path()).string() && s.line == line) {
            CHECK_FALSE(s.function.empty());
            // The template's own, uninstantiated site names the type as
            // written; its instantiations name the records.
            if (!s.dependent)
              types.insert(s.type);
          }
        CHECK_FALSE(types.empty());
        // What the record allocators allocate are the trees' records (one per
        // layout in a tree templated on its layout), each reported.
        if (text.find("records_.allocate") != std::string::npos)
          for (const std::string &t : types)
            CHECK(find(t));
      }
    }
    CHECK(lines_checked >= 8);
  }
}
