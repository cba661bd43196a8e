// `memlayout structs` as users run it: pahole-style text, the JSON type
// map's keys, files that do not compile, a missing compilation database, a
// database given with -p, bad usage.
#include "run_tool.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace structs_test;
namespace json = llvm::json;

// A string member's value, "<none>" when absent.
std::string text(llvm::Optional<llvm::StringRef> s) { return s ? s->str() : "<none>"; }

const std::string kFixtures = STRUCTS_FIXTURES;

ToolRun structs(std::vector<std::string> args, const std::string &cwd = "") {
  args.insert(args.begin(), {MEMLAYOUT_BIN, "structs"});
  return run_tool(args, cwd);
}

json::Value parse(const std::string &text) {
  llvm::Expected<json::Value> v = json::parse(text);
  if (!v)
    FAIL("not JSON (" << llvm::toString(v.takeError()) << "):\n" << text);
  return std::move(*v);
}

const json::Object *find_record(const json::Object &top, const std::string &name) {
  for (const json::Value &r : *top.getArray("records"))
    if (text(r.getAsObject()->getString("name")) == name)
      return r.getAsObject();
  return nullptr;
}

// One entry of a compile_commands.json.
std::string db_entry(const std::string &directory, const std::string &file,
                     const std::string &command) {
  return "{\"directory\": \"" + directory + "\", \"file\": \"" + file + "\", \"command\": \"" +
         command + "\"}";
}

} // namespace

TEST_CASE("text output: pahole's columns and comments, the allocators' lines", "[cli]") {
  ToolRun r = structs({kFixtures + "/layouts.hpp", "-C", "Holes", "--line-size", "64", "--", "-x",
                       "c++", "-std=c++20"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("struct fx::Holes {") != std::string::npos);
  CHECK(r.out.find("\tchar                      a;                   /*     0     1 */") !=
        std::string::npos);
  CHECK(r.out.find("/* XXX 7 bytes hole, try to pack */") != std::string::npos);
  CHECK(r.out.find("/*     8     8 */") != std::string::npos);
  CHECK(r.out.find("/* size: 32, cachelines: 1, members: 5") != std::string::npos);
  // Base subobjects and the vptr are members, as pahole counts them
  // (Derived: Base, y, z; Diamond: its vptr, w and the virtual VBase).
  for (const char *derived : {"Derived", "Diamond"}) {
    ToolRun d =
        structs({kFixtures + "/layouts.hpp", "-C", derived, "--", "-x", "c++", "-std=c++20"});
    INFO(derived << "\n" << d.out);
    CHECK(d.out.find("/* size: 24, cachelines: 1, members: 3,") != std::string::npos);
  }
  // Asked for a record none of the files has: said, and exit 1 (as grep).
  ToolRun none =
      structs({kFixtures + "/layouts.hpp", "-C", "NoSuchRecord", "--", "-x", "c++", "-std=c++20"});
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("no record named 'NoSuchRecord'") != std::string::npos);
  CHECK(r.out.find("/* padding: 6 */") != std::string::npos);
  CHECK(r.out.find("jemalloc: class 32 (0 B wasted)") != std::string::npos);
  CHECK(r.out.find("glibc:    chunk 48 (16 B wasted)") != std::string::npos);
  CHECK(r.out.find("suggest reorder:") != std::string::npos);
  // -C keeps the one record.
  CHECK(r.out.find("fx::Bits") == std::string::npos);
}

TEST_CASE("JSON output: the keys of the type map", "[cli]") {
  ToolRun r = structs({kFixtures + "/sites.cpp", kFixtures + "/layouts.hpp", "--format", "json",
                       "--", "-x", "c++", "-std=c++20", "-I" SEG_INCLUDE_DIR});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json::Value doc = parse(r.out);
  const json::Object &top = *doc.getAsObject();
  CHECK(text(top.getString("schema")) == "memlayout.structs/1");
  const json::Array *records = top.getArray("records");
  REQUIRE(records);
  REQUIRE(records->size() > 10);
  // sites.cpp includes <memlayout/seg.h> with -I: its option struct is not
  // one of the program's records.
  CHECK_FALSE(find_record(top, "seg_pool_options"));
  CHECK(find_record(top, "st::Node"));
  for (const json::Value &v : *records) {
    const json::Object &rec = *v.getAsObject();
    INFO(rec.getString("name").getValueOr("?").str());
    CHECK(rec.getString("name"));
    CHECK(rec.getInteger("size"));
    CHECK(rec.getInteger("align"));
    for (const json::Value &f : *rec.getArray("fields")) {
      const json::Object &fo = *f.getAsObject();
      CHECK(fo.getString("name"));
      CHECK(fo.getInteger("offset"));
      CHECK(fo.getInteger("size"));
      CHECK(fo.getString("type"));
    }
    for (const json::Value &h : *rec.getArray("holes")) {
      CHECK(h.getAsObject()->getInteger("offset"));
      CHECK(h.getAsObject()->getInteger("size"));
    }
    const json::Object *sc = rec.getObject("size_class");
    REQUIRE(sc);
    CHECK(sc->getInteger("jemalloc"));
    CHECK(sc->getInteger("glibc"));
    CHECK(rec.getArray("risks"));
  }
  const json::Object *synced = find_record(top, "fx::Synced");
  REQUIRE(synced);
  // 56 bytes: jemalloc's class 64, glibc's chunk of 56 + 8 bytes of header.
  CHECK(*synced->getInteger("size") == sizeof(std::mutex) + 16);
  CHECK(*synced->getObject("size_class")->getInteger("jemalloc") == 64);
  CHECK(*synced->getObject("size_class")->getInteger("glibc") == 64);
  bool lock_risk = false;
  for (const json::Value &k : *synced->getArray("risks"))
    lock_risk |= text(k.getAsObject()->getString("kind")) == "lock_shares_line";
  CHECK(lock_risk);

  const json::Array *sites = top.getArray("sites");
  REQUIRE(sites);
  REQUIRE(sites->size() >= 20);
  for (const json::Value &s : *sites) {
    const json::Object &so = *s.getAsObject();
    CHECK(so.getString("file"));
    CHECK(so.getInteger("line"));
    CHECK(so.getString("function"));
    CHECK(so.getString("type"));
    CHECK(so.getString("call"));
  }
}

TEST_CASE("a file that does not compile: diagnostics and exit 1", "[cli]") {
  const std::string broken = kFixtures + "/broken.cpp";
  ToolRun r = structs({broken, "--", "-std=c++20"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("broken.cpp:9:3: error: unknown type name 'unknown_type'") != std::string::npos);
  CHECK(r.err.find("1 of 1 files did not compile") != std::string::npos);
  CHECK(r.err.find("--keep-going") != std::string::npos);

  SECTION("--keep-going reports what parsed, still exiting 1") {
    ToolRun k = structs({broken, "--keep-going", "--format", "json", "--", "-std=c++20"});
    CHECK(k.exit_code == 1);
    json::Value doc = parse(k.out);
    const json::Object &top = *doc.getAsObject();
    const json::Object *parsed = find_record(top, "Parsed");
    REQUIRE(parsed);
    CHECK(*parsed->getInteger("size") == 16);
    CHECK_FALSE(find_record(top, "Broken"));
    REQUIRE(top.getArray("failed")->size() == 1);
    CHECK(text((*top.getArray("failed"))[0].getAsString()) == broken);
  }
}

TEST_CASE("no compilation database: a hint at -p and --", "[cli]") {
  // Outside the build tree, whose compile_commands.json a search upward finds.
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("memlayout-structs-nodb-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kFixtures + "/broken.cpp", dir / "lonely.cpp",
                             std::filesystem::copy_options::overwrite_existing);
  ToolRun r = structs({"lonely.cpp"}, dir.string());
  std::filesystem::remove_all(dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no compilation database for 'lonely.cpp'") != std::string::npos);
  CHECK(r.err.find("-p BUILD_DIR") != std::string::npos);
  CHECK(r.err.find("memlayout structs lonely.cpp -- ") != std::string::npos);
}

TEST_CASE("a build directory given with -p: its commands, headers included", "[cli]") {
  const std::string dir = scratch_dir("with_db");
  const std::string build = dir + "/build";
  std::filesystem::create_directories(build);
  std::filesystem::copy_file(kFixtures + "/layouts.hpp", dir + "/layouts.hpp");
  write_text(dir + "/main.cpp", "#include \"layouts.hpp\"\nint main() { return 0; }\n");
  write_text(build + "/compile_commands.json",
             "[{\"directory\": \"" + build + "\", \"file\": \"" + dir +
                 "/main.cpp\", \"command\": \"/usr/bin/c++ -std=c++20 -O2 "
                 "-mindirect-branch=thunk-extern -c " +
                 dir + "/main.cpp -o main.o\"}]\n");
  // The header has no command of its own: one is inferred from main.cpp's.
  ToolRun r = structs({dir + "/layouts.hpp", "-p", build, "-C", "fx::Aligned"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("struct fx::Aligned {") != std::string::npos);
  // gcc's own flag in the build's command: dropped, said once, not an error.
  CHECK(r.err.find("ignoring -mindirect-branch=thunk-extern, a flag of the build's compiler that "
                   "clang does not know") != std::string::npos);
  CHECK(r.err.find("error:") == std::string::npos);
  CHECK(r.out.find("align: 64") != std::string::npos);

  ToolRun missing = structs({dir + "/layouts.hpp", "-p", dir + "/nowhere"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("is not a directory") != std::string::npos);

  // Outside the build tree, whose compile_commands.json a search upward finds.
  std::filesystem::path empty = std::filesystem::temp_directory_path() /
                                ("memlayout-structs-empty-" + std::to_string(getpid()));
  std::filesystem::create_directories(empty);
  ToolRun none = structs({dir + "/layouts.hpp", "-p", empty.string()});
  std::filesystem::remove_all(empty);
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("no compilation database in '" + empty.string()) != std::string::npos);

  // A database that is there but unreadable is named as such, first.
  const std::string broken = dir + "/broken";
  std::filesystem::create_directories(broken);
  write_text(broken + "/compile_commands.json", "");
  ToolRun unreadable = structs({dir + "/layouts.hpp", "-p", broken});
  CHECK(unreadable.exit_code == 2);
  CHECK(unreadable.err.find("memlayout structs: '" + broken +
                            "/compile_commands.json': not JSON: [1:0, byte=0]") == 0);

  // Its errors name the file and where in it: the line and column of a
  // syntax error (clang's own reader printed "YAML:4:3" and went on), the
  // entry of a command that is not a string (clang compiled "no input files").
  const std::string db = broken + "/compile_commands.json";
  write_text(db, "[\n {\"directory\": \"/tmp\",\n  \"file\": \"a.c\"\n  \"command\": \"cc\"}\n]\n");
  ToolRun syntax = structs({dir + "/layouts.hpp", "-p", broken});
  CHECK(syntax.exit_code == 2);
  CHECK(syntax.err == "memlayout structs: '" + db +
                          "': not JSON: [4:3, byte=44]: Expected , or } after object property\n");
  write_text(db, "[{\"directory\": \"/tmp\", \"file\": \"a.c\", \"command\": \"cc\"},\n"
                 " {\"directory\": \"/tmp\", \"file\": \"b.c\", \"command\": 5}]\n");
  ToolRun number = structs({dir + "/layouts.hpp", "-p", broken});
  CHECK(number.exit_code == 2);
  CHECK(number.err == "memlayout structs: '" + db + "', entry 2: \"command\" is not a string\n");
  write_text(db, "[{\"file\": \"a.c\", \"arguments\": [\"cc\", 1]}]\n");
  ToolRun no_dir = structs({dir + "/layouts.hpp", "-p", broken});
  CHECK(no_dir.err == "memlayout structs: '" + db + "', entry 1: \"directory\" is missing\n");
  write_text(db, "[{\"directory\": \"/tmp\", \"file\": \"a.c\", \"arguments\": [\"cc\", 1]}]\n");
  ToolRun args = structs({dir + "/layouts.hpp", "-p", broken});
  CHECK(args.err ==
        "memlayout structs: '" + db + "', entry 1: \"arguments\" is not an array of strings\n");
  // Empty: clang's "expected exactly one compiler job in ''", exit 1.
  write_text(db, "[{\"directory\": \"/tmp\", \"file\": \"a.c\", \"arguments\": []}]\n");
  ToolRun empty_args = structs({dir + "/layouts.hpp", "-p", broken});
  CHECK(empty_args.exit_code == 2);
  CHECK(empty_args.err == "memlayout structs: '" + db +
                              "', entry 1: \"arguments\" is empty: it needs the compiler and its "
                              "arguments\n");
}

TEST_CASE("a gcc build with precompiled headers (CMake's target_precompile_headers)", "[cli]") {
  // -include DIR/cmake_pch.hxx beside gcc's DIR/cmake_pch.hxx.gch, which
  // clang cannot read: the header is read as text, the PCH left alone.
  const std::string dir = scratch_dir("gcc_pch");
  const std::string build = dir + "/build";
  std::filesystem::create_directories(build);
  // As CMake writes it: a system header, which would make the project's
  // headers it includes system headers too, whose records are left out.
  write_text(build + "/cmake_pch.hxx", "/* generated by CMake */\n\n#pragma GCC system_header\n"
                                       "#ifdef __cplusplus\n#include \"" +
                                           dir + "/pch_rec.h\"\n#endif // __cplusplus\n");
  write_text(dir + "/pch_rec.h", "struct FromPch { long a; int b; };\n");
  write_text(build + "/cmake_pch.hxx.gch", "gpch013 not a clang PCH\n");
  write_text(dir + "/use.cpp", "struct User { FromPch p; char c; };\nUser u;\n");
  write_text(build + "/compile_commands.json",
             "[{\"directory\": \"" + build + "\", \"file\": \"" + dir +
                 "/use.cpp\", \"command\": \"/usr/bin/c++ -std=c++17 -Winvalid-pch -include " +
                 build + "/cmake_pch.hxx -c " + dir + "/use.cpp -o use.o\"}]\n");
  ToolRun r = structs({dir + "/use.cpp", "-p", build, "-C", "User"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("struct User {") != std::string::npos);
  CHECK(r.out.find("/* size: 24,") != std::string::npos);
  ToolRun from_pch = structs({dir + "/use.cpp", "-p", build, "-C", "FromPch"});
  CHECK(from_pch.out.find("struct FromPch {") != std::string::npos);
  CHECK(from_pch.out.find("pch_rec.h:1 */") != std::string::npos);
}

// A database made on another machine or in a container: clang's tool
// aborted the whole process where it could not enter a command's directory,
// and the files that did compile were lost with it.
TEST_CASE("a command's directory that is not there: that file fails, the others are read",
          "[cli]") {
  const std::string dir = scratch_dir("db_elsewhere");
  write_text(dir + "/good.c", "struct good { int a; long b; };\nstruct good g;\n");
  write_text(dir + "/moved.c", "struct moved { int a; };\nstruct moved m;\n");
  write_text(dir + "/compile_commands.json",
             "[" + db_entry(dir, "good.c", "cc -c good.c") + ",\n" +
                 db_entry("/build/ci/work", dir + "/moved.c", "cc -c moved.c") + "]\n");
  ToolRun r = structs({dir + "/good.c", dir + "/moved.c", "-p", dir, "--keep-going"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("moved.c: the compilation database compiles it in /build/ci/work, which is "
                   "not a directory here") != std::string::npos);
  CHECK(r.out.find("struct good {") != std::string::npos);
  CHECK(r.out.find("struct moved {") == std::string::npos);
  CHECK(r.err.find("LLVM ERROR") == std::string::npos);
}

TEST_CASE("an explicit instantiation and an implicit one are one record", "[cli]") {
  // Where it is instantiated explicitly the name is spelled as written there
  // (std::string), elsewhere as clang prints it (std::basic_string<char>).
  const std::string dir = scratch_dir("instantiations");
  write_text(dir + "/tree.hpp", "#include <string>\n"
                                "template <class K, class V> struct Tree {\n"
                                "  struct Node { K key; V value; Node *left, *right; };\n"
                                "  Node *root = nullptr;\n"
                                "  long size = 0;\n"
                                "};\n");
  write_text(dir + "/tree.cpp", "#include \"tree.hpp\"\n"
                                "template struct Tree<long, long>;\n"
                                "template struct Tree<int, std::string>;\n");
  // main.cpp names Tree<long, long> first through a forward declaration.
  write_text(dir + "/fwd.hpp", "template <class K, class V> struct Tree;\n"
                               "struct Forest { Tree<long, long> *t; };\n");
  write_text(dir + "/main.cpp", "#include \"fwd.hpp\"\n"
                                "#include \"tree.hpp\"\n"
                                "Tree<long, long> a;\n"
                                "Tree<int, std::string> b;\n");
  ToolRun r = structs({dir + "/tree.cpp", dir + "/main.cpp", "--", "-std=c++17"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto count = [&](const std::string &what) {
    size_t n = 0;
    for (size_t at = r.out.find(what); at != std::string::npos; at = r.out.find(what, at + 1))
      ++n;
    return n;
  };
  CHECK(count("struct Tree<long, long> {") == 1);
  CHECK(count("struct Tree<int, std::string> {") +
            count("struct Tree<int, std::basic_string<char>> {") ==
        1);
  // Each at the template's definition, not at a forward declaration.
  CHECK(count("/tree.hpp:2 */") == 2);
  CHECK(count("/fwd.hpp:1 */") == 0);
}

TEST_CASE("a template as code spells it, default arguments left out, selects with -C", "[cli]") {
  const std::string dir = scratch_dir("defaults");
  write_text(dir + "/table.cpp",
             "#include <string>\n"
             "namespace ns {\n"
             "template <class K, class V = std::string, int N = 4> struct Table {\n"
             "  struct Slot { K key; V val; bool used; };\n"
             "  Slot slots[N];\n"
             "  Slot *grow() { return new Slot[N * 2]; }\n"
             "};\n"
             "}\n"
             "ns::Table<int> a;\n"
             "ns::Table<int, long, 2> b;\n"
             "void *g() { return a.grow(); }\n");
  ToolRun r = structs({dir + "/table.cpp", "-C", "ns::Table<int>::Slot", "--", "-std=c++17"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("struct ns::Table<int, std::basic_string<char>, 4>::Slot {") !=
        std::string::npos);
  // Only the one whose left-out arguments are the defaults.
  CHECK(r.out.find("Table<int, long, 2>") == std::string::npos);
  // Its allocation site too, though the site names the type as printed.
  CHECK(r.out.find("allocation sites: 1") != std::string::npos);
  CHECK(r.out.find("table.cpp:6:") != std::string::npos);
  ToolRun whole = structs({dir + "/table.cpp", "-C", "Table<int>", "--", "-std=c++17"});
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  CHECK(whole.out.find("struct ns::Table<int, std::basic_string<char>, 4> {") != std::string::npos);
  CHECK(whole.out.find("Table<int, long, 2>") == std::string::npos);
  // The type map carries the spelling, for report --hot.
  ToolRun json = structs({dir + "/table.cpp", "--format", "json", "--", "-std=c++17"});
  REQUIRE(json.exit_code == 0);
  CHECK(json.out.find("\"spelled\": \"ns::Table<int>::Slot\"") != std::string::npos);
  CHECK(json.out.find("\"spelled\": \"ns::Table<int, long, 2>") == std::string::npos);
}

TEST_CASE("a class template's default member initializers: each instantiation's constructor",
          "[cli]") {
  const std::string dir = scratch_dir("member_init");
  write_text(dir + "/f.cpp", "template <class T> struct F {\n"
                             "  T *made = new T();\n"
                             "};\n"
                             "struct A { int a; };\n"
                             "struct B { long b; };\n"
                             "F<A> fa;\n"
                             "F<B> fb;\n");
  ToolRun r = structs({dir + "/f.cpp", "--", "-std=c++17"});
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  // As the recorded stacks name them: F<A>::F() and F<B>::F(), not both F::F.
  CHECK(r.out.find("  A     F<A>::F\n") != std::string::npos);
  CHECK(r.out.find("  B     F<B>::F\n") != std::string::npos);
}

TEST_CASE("bad usage: exit 2 with what is wrong", "[cli]") {
  auto fails = [](std::vector<std::string> args, const char *says) {
    ToolRun r = structs(std::move(args));
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(says) != std::string::npos);
  };
  fails({}, "FILES is required");
  fails({"a.cpp", "--bogus"}, "unknown option '--bogus'");
  fails({"a.cpp", "--format", "xml"}, "--format: takes text or json, not 'xml'");
  fails({"a.cpp", "-p", "build", "--", "-std=c++20"}, "-p and -- both");
  fails({"a.cpp", "--line-size", "60"}, "--line-size: takes a power of two");
  fails({"a.cpp", "--", "-std=c++20", "-nosuchflag"},
        "unknown compiler flag '-nosuchflag' after --");
  // An option of ours, or a file, after -- (clang's driver said "unsupported
  // option" and "no such file", and the report came out with status 0).
  fails({"a.cpp", "--", "--format", "json"}, "unknown compiler flag '--format' after --");
  fails({"a.cpp", "--", "-std=c++20", "b.cpp"},
        "'b.cpp' after -- is no compiler flag; the files to read go before --");
  ToolRun missing = structs({"/nonexistent/x.cpp", "--", "-std=c++20"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("/nonexistent/x.cpp: no such file") != std::string::npos);
  ToolRun directory = structs({"/tmp", "--", "-std=c++20"});
  CHECK(directory.exit_code == 1);
  CHECK(directory.err.find("/tmp: is a directory") != std::string::npos);
}

// A header read as C in one file and as C++ in another spells its members'
// types each language's way (_Bool and bool, _Atomic(int) and
// std::atomic<int>): laid out alike, it is one record, not two layouts.
TEST_CASE("a header read as C and as C++: one layout whatever the spelling", "[cli]") {
  const std::string dir = scratch_dir("c_and_cxx");
  write_text(dir + "/flags.h", "#ifdef __cplusplus\n#include <atomic>\n#define ATOMIC(T) "
                               "std::atomic<T>\n#else\n#include <stdbool.h>\n#define ATOMIC(T) "
                               "_Atomic(T)\n#endif\n"
                               "struct flags { bool on; ATOMIC(int) n; struct flags *next; };\n");
  write_text(dir + "/one.c", "#include \"flags.h\"\nstruct flags f1;\n");
  write_text(dir + "/two.cpp", "#include \"flags.h\"\nflags f2;\n");
  write_text(dir + "/compile_commands.json",
             "[" + db_entry(dir, "one.c", "cc -std=c11 -c one.c") + ",\n" +
                 db_entry(dir, "two.cpp", "c++ -std=c++17 -c two.cpp") + "]\n");
  ToolRun r = structs({dir + "/one.c", dir + "/two.cpp", "-p", dir, "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("different layouts") == std::string::npos);
  json::Value doc = parse(r.out);
  const json::Object *flags = find_record(*doc.getAsObject(), "flags");
  REQUIRE(flags);
  CHECK(!flags->get("variant"));
  CHECK(flags->getInteger("size").getValueOr(0) == 16);
}

TEST_CASE("one header laid out differently by different -D flags: each layout, each site's own",
          "[cli]") {
  const std::string dir = scratch_dir("defines");
  const std::string build = dir + "/build";
  std::filesystem::create_directories(build);
  write_text(dir + "/entry.h", "struct entry {\n"
                               "#ifdef WIDE\n"
                               "  long tag;\n"
                               "#else\n"
                               "  short tag;\n"
                               "#endif\n"
                               "  void *value;\n"
                               "};\n"
                               "struct same { int a; };\n");
  write_text(dir + "/wide.cpp", "#include \"entry.h\"\nentry *w() { return new entry; }\n");
  write_text(dir + "/narrow.cpp", "#include \"entry.h\"\nentry *n() { return new entry; }\n");
  auto command = [&](const std::string &file, const std::string &flags) {
    return "{\"directory\": \"" + build + "\", \"file\": \"" + dir + "/" + file +
           "\", \"command\": \"/usr/bin/c++ " + flags + " -c " + dir + "/" + file + "\"}";
  };
  write_text(build + "/compile_commands.json",
             "[" + command("wide.cpp", "-DWIDE=1") + ",\n" + command("narrow.cpp", "-O2") + "]\n");
  auto layouts = [](const json::Object &top) {
    std::map<int64_t, std::string> by_variant; // variant -> its size and translation units
    for (const json::Value &v : *top.getArray("records")) {
      const json::Object &r = *v.getAsObject();
      if (text(r.getString("name")) != "entry")
        continue;
      std::string tus;
      if (const json::Array *a = r.getArray("translation_units"))
        for (const json::Value &tu : *a)
          tus += " [" + text(tu.getAsString()) + "]";
      by_variant[r.getInteger("variant").getValueOr(0)] =
          std::to_string(r.getInteger("size").getValueOr(0)) + tus;
    }
    return by_variant;
  };
  // Whichever file comes first, both layouts are there, each with the files
  // (and defines) that gave it; the record laid out alike stays one.
  for (bool wide_first : {true, false}) {
    std::vector<std::string> files{dir + "/wide.cpp", dir + "/narrow.cpp"};
    if (!wide_first)
      std::swap(files[0], files[1]);
    ToolRun r = structs({files[0], files[1], "-p", build, "--format", "json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("warning: struct entry (" + dir +
                     "/entry.h:1) has different layouts in "
                     "different translation units") != std::string::npos);
    json::Value doc = parse(r.out);
    const json::Object &top = *doc.getAsObject();
    std::map<int64_t, std::string> got = layouts(top);
    REQUIRE(got.size() == 2);
    CHECK(got.count(0) == 0);
    const std::string wide = "16 [" + dir + "/wide.cpp -DWIDE=1]";
    const std::string narrow = "16 [" + dir + "/narrow.cpp]";
    // Both are 16 bytes: what differs is the member's size. Numbered by
    // their files' names, whichever came first.
    CHECK(got[1] == narrow);
    CHECK(got[2] == wide);
    const json::Object *same = find_record(top, "same");
    REQUIRE(same);
    CHECK(!same->get("variant"));
    // Each site allocates its own file's layout.
    for (const json::Value &v : *top.getArray("sites")) {
      const json::Object &s = *v.getAsObject();
      const bool in_wide = text(s.getString("file")) == dir + "/wide.cpp";
      CHECK(s.getInteger("variant").getValueOr(0) == (in_wide ? 2 : 1));
    }
    ToolRun t = structs({files[0], files[1], "-p", build});
    CHECK(t.out.find("/* layout 1 of entry, which translation units lay out differently") !=
          std::string::npos);
    CHECK(t.out.find("entry [layout 2]") != std::string::npos);
  }

  // One file with two commands in the database: both run, both layouts kept.
  write_text(build + "/compile_commands.json",
             "[" + command("wide.cpp", "-DWIDE") + ",\n" + command("wide.cpp", "-UWIDE") + "]\n");
  // Named relative to the working directory: the JSON's paths are absolute.
  ToolRun twice = structs({"wide.cpp", "-p", build, "--format", "json"}, dir);
  INFO(twice.err);
  REQUIRE(twice.exit_code == 0);
  json::Value doc = parse(twice.out);
  std::map<int64_t, std::string> got = layouts(*doc.getAsObject());
  CHECK(got[1] == "16 [" + dir + "/wide.cpp -DWIDE]");
  CHECK(got[2] == "16 [" + dir + "/wide.cpp -UWIDE]");
}

TEST_CASE("the lock's line: shared at every start and at some, each member said", "[cli]") {
  // From +0 'mu' has its line to itself but for 'a'; 'buf' reaches it only
  // from +16 on.
  const std::string dir = scratch_dir("lockshare");
  write_text(dir + "/conn.cpp", "#include <mutex>\n"
                                "struct Conn { char buf[64]; std::mutex mu; long a; };\n"
                                "Conn c;\n");
  ToolRun r = structs({dir + "/conn.cpp", "--line-size", "64", "--", "-std=c++17"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("shares a line with 'a' at every start offset and 'buf' at +16, +32, +48 (3 "
                   "of 4 start offsets)") != std::string::npos);
}

TEST_CASE("zero-width bit-fields: no reorder suggested", "[cli]") {
  const std::string dir = scratch_dir("zero_width");
  write_text(dir + "/zw.c", "struct zero_w { char c; int :0; char d; long long :0; char e; };\n"
                            "struct zero_w g;\n");
  ToolRun r = structs({dir + "/zw.c", "--format", "json", "--line-size", "64", "--"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json::Value doc = parse(r.out);
  const json::Object *zero = find_record(*doc.getAsObject(), "zero_w");
  REQUIRE(zero);
  // Its holes are the zero-width bit-fields' doing: c, d, e in any order
  // with them still between are 9 bytes.
  CHECK(zero->getInteger("size").getValueOr(0) == 9);
  CHECK(zero->getArray("holes")->size() == 2);
  CHECK(zero->getArray("suggestions")->empty());
}

TEST_CASE("bit-fields off a byte boundary: align is their storage unit's", "[cli]") {
  const std::string dir = scratch_dir("bitfield_align");
  write_text(dir + "/flags.c", "struct flags { unsigned char a:1; unsigned char b:3; "
                               "unsigned short c:12; };\n"
                               "struct flags h;\n");
  ToolRun r = structs({dir + "/flags.c", "--format", "json", "--"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json::Value doc = parse(r.out);
  const json::Object *flags = find_record(*doc.getAsObject(), "flags");
  REQUIRE(flags);
  std::vector<int64_t> aligns;
  for (const json::Value &f : *flags->getArray("fields"))
    aligns.push_back(f.getAsObject()->getInteger("align").getValueOr(-1));
  CHECK(aligns == std::vector<int64_t>{1, 1, 2});
}

TEST_CASE("a [[no_unique_address]] member takes its data size, as gcc lays it out", "[cli]") {
  const std::string dir = scratch_dir("nua");
  write_text(dir + "/nua.cpp", "struct NP { NP() {} int i; char c; };\n"
                               "struct ViaNua { [[no_unique_address]] NP np; char d; };\n"
                               "ViaNua b;\n"
                               "static_assert(sizeof(ViaNua) == 8 && "
                               "__builtin_offsetof(ViaNua, d) == 5);\n");
  ToolRun r = structs({dir + "/nua.cpp", "--line-size", "64", "--", "-std=c++20"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("np;                  /*     0     5 */") != std::string::npos);
  CHECK(r.out.find("d;                   /*     5     1 */") != std::string::npos);
  CHECK(r.out.find("/* sum members: 6, holes: 0, sum holes: 0 */") != std::string::npos);
  CHECK(r.out.find("/* padding: 2 */") != std::string::npos);
}

TEST_CASE("cache line boundaries: one comment per member, at the line it starts on", "[cli]") {
  // As pahole prints them: a member after one that crossed many lines gets
  // one comment, for its own line.
  const std::string dir = scratch_dir("boundary");
  write_text(dir + "/big.c", "struct big { char name[100]; double w[17]; char rng[5000]; "
                             "char tail; };\nstruct big g;\n");
  ToolRun r = structs({dir + "/big.c", "--line-size", "64", "--"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  size_t comments = 0;
  for (size_t at = r.out.find("/* --- cacheline"); at != std::string::npos;
       at = r.out.find("/* --- cacheline", at + 1))
    ++comments;
  CHECK(comments == 3);
  CHECK(r.out.find("/* --- cacheline 1 boundary (64 bytes) was 40 bytes ago --- */\n"
                   "\tdouble") != std::string::npos);
  CHECK(r.out.find("/* --- cacheline 3 boundary (192 bytes) was 48 bytes ago --- */\n"
                   "\tchar") != std::string::npos);
  CHECK(r.out.find("/* --- cacheline 81 boundary (5184 bytes) was 56 bytes ago --- */\n"
                   "\tchar") != std::string::npos);
}

TEST_CASE("a file that is not C or C++ says so", "[cli]") {
  const std::string dir = scratch_dir("not_c");
  write_text(dir + "/script.py", "print('hello')\n");
  ToolRun r = structs({dir + "/script.py", "--", "-std=c++17"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("script.py: not a C or C++ source or header (by its name); to compile it as "
                   "one, give its language after --, e.g. -- -x c++") != std::string::npos);
  CHECK(r.err.find("expected exactly one compiler job") == std::string::npos);
  // Given its language, it is compiled as such (and here fails as C++).
  ToolRun forced = structs({dir + "/script.py", "--", "-x", "c++"});
  CHECK(forced.exit_code == 1);
  CHECK(forced.err.find("not a C or C++ source") == std::string::npos);
}

TEST_CASE("failed[] holds absolute paths", "[cli]") {
  const std::string dir = scratch_dir("failed_paths");
  write_text(dir + "/ok.c", "struct ok { int a; };\nstruct ok o;\n");
  write_text(dir + "/bad.c", "struct bad { int a; } b = ;\n");
  ToolRun r =
      structs({"ok.c", "bad.c", "missing.c", "--keep-going", "--format", "json", "--"}, dir);
  CHECK(r.exit_code == 1);
  json::Value doc = parse(r.out);
  std::vector<std::string> failed;
  for (const json::Value &f : *doc.getAsObject()->getArray("failed"))
    failed.push_back(text(f.getAsString()));
  CHECK(failed == std::vector<std::string>{dir + "/bad.c", dir + "/missing.c"});
}

// A .h with a C++ standard after --: clang's driver called the standard
// "not allowed with 'C'" and parsed the header as C++ anyway, exit 0.
TEST_CASE("structs: a .h given a C++ standard is a C++ header", "[cli]") {
  const std::string dir = scratch_dir("cxx_header");
  write_text(dir + "/box.h", "struct Box { long k; bool open; };\n"
                             "inline Box *make_box() { return new Box{1, true}; }\n");
  ToolRun r = run_tool({MEMLAYOUT_BIN, "structs", dir + "/box.h", "--", "-std=c++17"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("error:") == std::string::npos);
  CHECK(r.out.find("struct Box {") != std::string::npos);
}
