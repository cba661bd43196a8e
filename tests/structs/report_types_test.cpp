// `memlayout report` with a type map: a program's groups named by the
// record its call sites allocate, hot prefixes through a named member, the
// map found beside the program, and what goes wrong said clearly.
#include "programs/typed_nodes.h"
#include "run_tool.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace structs_test;
namespace json = llvm::json;

// A string member's value, "<none>" when absent.
std::string text(llvm::Optional<llvm::StringRef> s) { return s ? s->str() : "<none>"; }

struct Recorded {
  std::string dir, program, trace, map;
};

// `binary` copied into a scratch directory as `name`, the map of `source`
// (compiled with `flags`) beside it, and one trace of it.
Recorded record_program(const std::string &name, const char *binary, const char *source,
                        std::vector<std::string> flags) {
  Recorded out;
  // One directory per process: ctest runs each test case in its own.
  out.dir = scratch_dir("report_" + name + "." + std::to_string(getpid()));
  out.program = out.dir + "/" + name;
  out.trace = out.dir + "/" + name + ".trace";
  out.map = out.program + ".memlayout-types.json";
  std::filesystem::copy_file(binary, out.program);
  std::vector<std::string> structs = {MEMLAYOUT_BIN, "structs", source,  "--format",
                                      "json",        "-o",      out.map, "--"};
  structs.insert(structs.end(), flags.begin(), flags.end());
  ToolRun s = run_tool(structs);
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  ToolRun rec = run_tool({MEMLAYOUT_BIN, "record", "-o", out.trace, "--", out.program});
  INFO(rec.err);
  REQUIRE(rec.exit_code == 0);
  return out;
}

const Recorded &recorded() {
  static const Recorded r = record_program("typed_alloc", TYPED_ALLOC_BIN, TYPED_ALLOC_SRC,
                                           {"-std=c++17", "-I" TYPED_ALLOC_DIR});
  return r;
}

// `memlayout report TRACE --format json EXTRA...`, parsed.
json::Value report_of(const std::string &trace, std::vector<std::string> extra,
                      int expect_exit = 0) {
  std::vector<std::string> args = {MEMLAYOUT_BIN, "report", trace, "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  ToolRun r = run_tool(args);
  INFO(r.err);
  REQUIRE(r.exit_code == expect_exit);
  llvm::Expected<json::Value> v = json::parse(r.out);
  if (!v)
    FAIL("not JSON (" << llvm::toString(v.takeError()) << "):\n" << r.out);
  return std::move(*v);
}

json::Value report(std::vector<std::string> extra, int expect_exit = 0) {
  return report_of(recorded().trace, std::move(extra), expect_exit);
}

// The first group whose string member `key` is `value`.
const json::Object *group_where(const json::Value &doc, const char *key, const std::string &value) {
  for (const json::Value &g : *doc.getAsObject()->getArray("groups"))
    if (text(g.getAsObject()->getString(key)) == value)
      return g.getAsObject();
  return nullptr;
}

const json::Object *group(const json::Value &doc, const std::string &name) {
  return group_where(doc, "name", name);
}

} // namespace

TEST_CASE("groups named by the type their site allocates, map beside the program", "[report]") {
  json::Value doc = report({});
  const json::Object *node = group(doc, "typed::Node");
  REQUIRE(node);
  CHECK(text(node->getString("type")) == "typed::Node");
  CHECK(*node->getInteger("requested_size") == sizeof(typed::Node));
  CHECK(*node->getInteger("objects") >= 4000);
  const json::Object *desc = group(doc, "typed::Desc");
  REQUIRE(desc);
  CHECK(*desc->getInteger("requested_size") == sizeof(typed::Desc));
  bool noted = false;
  for (const json::Value &n : *doc.getAsObject()->getArray("notes"))
    noted |= n.getAsString()->contains("groups named by type from");
  CHECK(noted);
}

// `v.push_back(new Twig{...})`: the buffer the vector grows inside push_back
// (the standard library's frames) is not a Twig, though its size is a
// multiple of one; it was named and typed Twig.
TEST_CASE("a container's buffer is not the type newed on its line", "[report]") {
  json::Value doc = report({});
  size_t twigs = 0;
  for (const json::Value &g : *doc.getAsObject()->getArray("groups")) {
    const json::Object &o = *g.getAsObject();
    if (text(o.getString("type")) != "typed::Twig")
      continue;
    INFO(text(o.getString("name")));
    CHECK(*o.getInteger("requested_size") == sizeof(typed::Twig));
    twigs += static_cast<size_t>(*o.getInteger("objects"));
  }
  CHECK(twigs == 4000);
}

TEST_CASE("report --types none names groups by call site again", "[report]") {
  json::Value doc = report({"--types", "none"});
  CHECK_FALSE(group(doc, "typed::Node"));
  CHECK_FALSE(group(doc, "typed::Desc"));
}

TEST_CASE("report --hot TYPE=FIELD: the prefix through that member", "[report]") {
  json::Value doc = report({"--types", recorded().map, "--hot", "Node=left"});
  const json::Object *node = group(doc, "typed::Node");
  REQUIRE(node);
  CHECK(*node->getInteger("hot_bytes") == offsetof(typed::Node, left) + sizeof(typed::Node *));
  json::Value bytes = report({"--hot", "typed::Desc=8"});
  CHECK(*group(bytes, "typed::Desc")->getInteger("hot_bytes") == 8);
  // Through the last member: the whole object, asked for, is reported so
  // (null would read as "not asked").
  json::Value whole = report({"--types", recorded().map, "--hot", "Node=payload"});
  node = group(whole, "typed::Node");
  REQUIRE(node);
  CHECK(node->getInteger("hot_bytes").getValueOr(0) == sizeof(typed::Node));
}

TEST_CASE("type map errors: the member, the record, the file", "[report]") {
  auto fails = [](std::vector<std::string> extra, const char *says) {
    std::vector<std::string> args = {MEMLAYOUT_BIN, "report", recorded().trace};
    args.insert(args.end(), extra.begin(), extra.end());
    ToolRun r = run_tool(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(says) != std::string::npos);
  };
  fails({"--hot", "Node=nope"}, "no such member (Node has key, left, right, value, payload)");
  fails({"--hot", "Leaf=key"}, "no record named Leaf");
  fails({"--types", "none", "--hot", "Node=key"}, "a field needs a type map");
  fails({"--types", "/nonexistent/map.json"}, "/nonexistent/map.json");
  const std::string other = recorded().dir + "/report.json";
  write_text(other, "{\"schema\": \"memlayout.report/1\", \"groups\": []}\n");
  fails({"--types", other}, "not a type map");
}

// The interposer routes by call site: a type= rule becomes the functions
// that allocate the type. make_node allocates nothing else: nothing to say.
TEST_CASE("a type rule whose functions allocate only its type routes without a warning",
          "[rules]") {
  ToolRun r = run_tool({MEMLAYOUT_BIN, "run", "--segregate", "type=typed::Node,pool=nodes", "--",
                        recorded().program});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("also allocate") == std::string::npos);
  // `new typed::Node` asks for sizeof(Node): the rule says so.
  CHECK(r.err.find("function=make_node,size=" + std::to_string(sizeof(typed::Node)) +
                   ",pool=nodes (--segregate type=typed::Node") != std::string::npos);
}

// A class template's instantiations are functions of their own: a type=
// rule for Item<int> routes Box<int>::put's and not Box<long>::put's, though
// one line allocates both. make_shared<Entry> asks for its control block
// (libstdc++: 16 bytes of counts, then the Entry), which size= says, so
// the string make_entry also allocates stays out. A file:line rule on the
// make_shared line, whose code is all inlined from <memory> and
// <basic_string.h> (GCC leaves the line one empty row), names make_entry.
TEST_CASE("type rules tell instantiations and sizes apart, file rules find inlined lines",
          "[rules]") {
  const std::string dir = scratch_dir("report_type_keys." + std::to_string(getpid()));
  const std::string source = dir + "/keys.cpp";
  write_text(source,
             "#include <cstdio>\n#include <memory>\n#include <string>\n#include <vector>\n"
             "template <class T> struct Item {\n  T key;\n  Item *next;\n  char pad[24];\n};\n"
             "template <class T> struct Box {\n  Item<T> *head = nullptr;\n"
             "  void put(T k) { head = new Item<T>{k, head, {}}; }\n"
             "  ~Box() {\n    while (head) {\n      Item<T> *n = head->next;\n"
             "      delete head;\n      head = n;\n    }\n  }\n};\n"
             "struct Entry {\n  Entry(std::string n, long v) : name(std::move(n)), value(v) {}\n"
             "  std::string name;\n  long value;\n};\n"
             "std::shared_ptr<Entry> make_entry(long v) {\n"
             "  return std::make_shared<Entry>(\"an entry name longer than fifteen \" + "
             "std::to_string(v), v);\n}\n"
             "int main() {\n  Box<int> a;\n  Box<long> b;\n"
             "  for (int i = 0; i < 300; ++i)\n    a.put(i);\n"
             "  for (long i = 0; i < 200; ++i)\n    b.put(i);\n"
             "  std::vector<std::shared_ptr<Entry>> es;\n"
             "  for (long i = 0; i < 100; ++i)\n    es.push_back(make_entry(i));\n"
             "  long sum = 0;\n  for (auto &e : es)\n"
             "    sum += e->value + static_cast<long>(e->name.size());\n"
             "  std::printf(\"%ld\\n\", sum);\n}\n");
  const std::string program = dir + "/keys";
  ToolRun cc = run_tool({"/usr/bin/c++", "-std=c++20", "-O2", "-g", source, "-o", program});
  INFO(cc.err);
  REQUIRE(cc.exit_code == 0);
  const std::string map = program + ".memlayout-types.json";
  ToolRun s = run_tool(
      {MEMLAYOUT_BIN, "structs", source, "--format", "json", "-o", map, "--", "-std=c++20", "-O2"});
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  auto run_with = [&](const std::string &spec) {
    ToolRun r = run_tool({MEMLAYOUT_BIN, "run", "--segregate", spec, "--", program});
    INFO(spec << "\n" << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "8540\n");
    return r.err;
  };
  std::string item = run_with("type=Item<int>,pool=items");
  CHECK(item.find("function=Box<int>::put,size=40,pool=items") != std::string::npos);
  CHECK(item.find("): 300 allocations") != std::string::npos);
  CHECK(item.find("also allocate") == std::string::npos);
  std::string entry = run_with("type=Entry,pool=entries");
  CHECK(entry.find("function=make_entry,size=56,pool=entries") != std::string::npos);
  CHECK(entry.find("): 100 allocations") != std::string::npos);
  std::string line = run_with("file=keys.cpp:27,pool=line");
  CHECK(line.find("function=make_entry,pool=line") != std::string::npos);
  CHECK(line.find("): 200 allocations") != std::string::npos);
}

// A function that allocates two types: the rule for one routes the other
// too, and run names it, with its line, from the type map.
TEST_CASE("a type rule names the other types its functions allocate", "[rules]") {
  const std::string dir = scratch_dir("report_type_strays." + std::to_string(getpid()));
  write_text(dir + "/pair.c",
             "#include <stdio.h>\n#include <stdlib.h>\n"
             "struct edge { long from, to; };\nstruct vertex { long id; struct edge *out; };\n"
             "struct vertex *make_vertex(long id) {\n"
             "  struct vertex *v = malloc(sizeof *v);\n"
             "  if (v) {\n    v->id = id;\n    v->out = malloc(sizeof *v->out);\n  }\n"
             "  return v;\n}\n"
             "int main(void) {\n  long sum = 0;\n  for (long i = 0; i < 100; ++i) {\n"
             "    struct vertex *v = make_vertex(i);\n    sum += v->id;\n    free(v->out);\n"
             "    free(v);\n  }\n  printf(\"%ld\\n\", sum);\n  return 0;\n}\n");
  ToolRun cc = run_tool({"/usr/bin/cc", "-O2", "-g", dir + "/pair.c", "-o", dir + "/pair"});
  INFO(cc.err);
  REQUIRE(cc.exit_code == 0);
  const std::string map = dir + "/pair.types.json";
  ToolRun s = run_tool(
      {MEMLAYOUT_BIN, "structs", dir + "/pair.c", "--format", "json", "-o", map, "--", "-O2"});
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  ToolRun r = run_tool({MEMLAYOUT_BIN, "run", "--types", map, "--segregate",
                        "type=vertex,pool=vertices", "--", dir + "/pair"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "4950\n");
  CHECK(r.err.find("type=vertex is allocated in make_vertex, which the type map says also "
                   "allocates edge (") != std::string::npos);
  CHECK(r.err.find("pair.c:9)") != std::string::npos);
}

// One header, two translation units, two layouts: each group's --hot goes
// through the layout its own call site's unit gave the record, and a member
// that layout lacks is said, not dropped in silence.
TEST_CASE("report --hot through the layout each call site's unit gave the record", "[report]") {
  const std::string dir = scratch_dir("report_variants." + std::to_string(getpid()));
  write_text(dir + "/entry.h", "struct entry {\n"
                               "  long key;\n"
                               "#ifdef WIDE\n"
                               "  char note[40];\n"
                               "  long extra;\n"
                               "#endif\n"
                               "  void *value;\n"
                               "};\n");
  for (const char *side : {"wide", "narrow"})
    write_text(dir + "/" + side + ".c",
               std::string("#include <stdlib.h>\n#include \"entry.h\"\nstruct entry *make_") +
                   side +
                   "(long k) {\n  struct entry *e = malloc(sizeof *e);\n  if (e) {\n    e->key = "
                   "k;\n    e->value = 0;\n  }\n  return e;\n}\n");
  write_text(dir + "/main.c",
             "#include <stdio.h>\nstruct entry;\nstruct entry *make_wide(long);\n"
             "struct entry *make_narrow(long);\nvoid *keep[4000];\n"
             "int main(void) {\n  for (long i = 0; i < 2000; ++i) {\n"
             "    keep[2 * i] = make_wide(i);\n    keep[2 * i + 1] = make_narrow(i);\n  }\n"
             "  printf(\"%p\\n\", keep[3999] ? (void *)1 : 0);\n  return 0;\n}\n");
  auto command = [&](const std::string &file, const std::string &flags) {
    return "{\"directory\": \"" + dir + "\", \"file\": \"" + dir + "/" + file +
           "\", \"command\": \"/usr/bin/cc -O2 -g " + flags + " -c " + dir + "/" + file + "\"}";
  };
  write_text(dir + "/compile_commands.json",
             "[" + command("wide.c", "-DWIDE") + ",\n" + command("narrow.c", "") + "]\n");
  for (const auto &[file, flags] : {std::pair<std::string, std::string>{"wide.c", "-DWIDE"},
                                    {"narrow.c", ""},
                                    {"main.c", ""}}) {
    std::vector<std::string> cc = {
        "/usr/bin/cc", "-O2", "-g", "-c", dir + "/" + file, "-o", dir + "/" + file + ".o"};
    if (!flags.empty())
      cc.push_back(flags);
    ToolRun c = run_tool(cc);
    INFO(c.err);
    REQUIRE(c.exit_code == 0);
  }
  ToolRun link = run_tool({"/usr/bin/cc", dir + "/main.c.o", dir + "/wide.c.o", dir + "/narrow.c.o",
                           "-o", dir + "/entries"});
  REQUIRE(link.exit_code == 0);
  const std::string map = dir + "/entries.types.json", trace = dir + "/entries.trace";
  // The narrow layout first: the wide group needs layout 2.
  ToolRun s = run_tool({MEMLAYOUT_BIN, "structs", dir + "/narrow.c", dir + "/wide.c", "-p", dir,
                        "--format", "json", "-o", map});
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  ToolRun rec = run_tool({MEMLAYOUT_BIN, "record", "-o", trace, "--", dir + "/entries"});
  INFO(rec.err);
  REQUIRE(rec.exit_code == 0);
  ToolRun r = run_tool(
      {MEMLAYOUT_BIN, "report", trace, "--types", map, "--hot", "entry=extra", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  llvm::Expected<json::Value> doc = json::parse(r.out);
  REQUIRE(bool(doc));
  const json::Object *wide = nullptr, *narrow = nullptr;
  for (const json::Value &g : *doc->getAsObject()->getArray("groups")) {
    const json::Object *o = g.getAsObject();
    if (text(o->getString("type")) != "entry")
      continue;
    (o->getInteger("requested_size").getValueOr(0) == 64 ? wide : narrow) = o;
  }
  REQUIRE(wide);
  REQUIRE(narrow);
  CHECK(wide->getInteger("hot_bytes").getValueOr(0) == 56); // through extra, at 48
  CHECK_FALSE(narrow->getInteger("hot_bytes"));
  bool said = false;
  for (const json::Value &n : *doc->getAsObject()->getArray("notes")) {
    llvm::StringRef note = *n.getAsString();
    // Which group, and which record of that name (one per file in C).
    if (note.contains("which has no member extra: measured whole")) {
      said = true;
      CHECK(note.contains("[group " + std::to_string(narrow->getInteger("id").getValueOr(0)) +
                          "]'s objects are entry ("));
    }
  }
  CHECK(said);
}

namespace {

// wrapper_alloc.c, its map and one trace: allocation through the program's
// own wrappers.
const Recorded &recorded_wrappers() {
  static const Recorded r =
      record_program("wrapper_alloc", WRAPPER_ALLOC_BIN, WRAPPER_ALLOC_SRC, {"-std=gnu11"});
  return r;
}

json::Value wrappers_report(std::vector<std::string> extra) {
  return report_of(recorded_wrappers().trace, std::move(extra));
}

const json::Object *typed_group(const json::Value &doc, const std::string &type) {
  return group_where(doc, "type", type);
}

} // namespace

// `struct entry *e = fl_get(&entries)`: a site named by the callee, whatever
// its name, which types the group the report's detected wrapper leaves at
// that line, so --hot entry=value measures it.
TEST_CASE("a group allocated through the program's own free list is typed", "[report]") {
  json::Value doc = wrappers_report({"--hot", "entry=value"});
  const json::Object *entry = typed_group(doc, "entry");
  REQUIRE(entry);
  CHECK(text(entry->getString("name")) == "entry");
  CHECK(text(entry->getObject("site")->getString("function")) == "entry_new");
  CHECK(*entry->getInteger("requested_size") == 72);
  CHECK(*entry->getInteger("objects") == 5000);
  CHECK(entry->getInteger("hot_bytes").getValueOr(0) == 32); // through value, at 24
}

// zcalloc has one caller: the report keeps it as the site, by design, and
// the map's site at its call in create_client says what its calloc
// allocates: clients, whose lock makes their shared lines a finding.
TEST_CASE("a one-caller allocator's objects are typed by its caller's site", "[report]") {
  json::Value doc = wrappers_report({});
  const json::Object *c = typed_group(doc, "client");
  REQUIRE(c);
  CHECK(text(c->getObject("site")->getString("function")) == "zcalloc");
  CHECK(*c->getInteger("requested_size") == 40);
  const int64_t id = *c->getInteger("id");
  bool false_sharing = false;
  for (const json::Value &f : *doc.getAsObject()->getArray("findings")) {
    const json::Object *o = f.getAsObject();
    if (text(o->getString("kind")) != "false_sharing")
      continue;
    for (const json::Value &g : *o->getArray("groups"))
      false_sharing |= g.getAsInteger() == id;
  }
  CHECK(false_sharing);
  bool noted = false;
  for (const json::Value &n : *doc.getAsObject()->getArray("notes"))
    noted |= n.getAsString()->contains("typed client by the type map's site at its call in "
                                       "create_client (wrapper_alloc.c:");
  CHECK(noted);
  // Looked through, the caller is the site, typed by the same site of the map.
  json::Value through = wrappers_report({"--wrapper", "zcalloc"});
  c = typed_group(through, "client");
  REQUIRE(c);
  CHECK(text(c->getObject("site")->getString("function")) == "create_client");
}

// Row locks allocated on their own, back to back, by one thread: the map
// has no record of the C library's pthread_mutex_t, yet its sites say the
// type, and the object is the lock.
TEST_CASE("a lock allocated on its own is named and judged a lock", "[report]") {
  const std::string dir = scratch_dir("report_bare_locks." + std::to_string(getpid()));
  write_text(dir + "/rows.c",
             "#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
             "static void *xmalloc(size_t n) { void *p = malloc(n); if (!p) abort(); return p; }\n"
             "pthread_mutex_t *locks[256];\n"
             "int main(void) {\n"
             "  for (int i = 0; i < 256; ++i) {\n"
             "    locks[i] = xmalloc(sizeof(pthread_mutex_t));\n"
             "    pthread_mutex_init(locks[i], NULL);\n"
             "  }\n"
             "  printf(\"%d\\n\", pthread_mutex_lock(locks[7]));\n"
             "  return 0;\n}\n");
  ToolRun cc =
      run_tool({"/usr/bin/cc", "-O2", "-g", dir + "/rows.c", "-o", dir + "/rows", "-pthread"});
  INFO(cc.err);
  REQUIRE(cc.exit_code == 0);
  const std::string map = dir + "/rows.types.json", trace = dir + "/rows.trace";
  ToolRun s = run_tool(
      {MEMLAYOUT_BIN, "structs", dir + "/rows.c", "--format", "json", "-o", map, "--", "-O2"});
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  ToolRun rec = run_tool({MEMLAYOUT_BIN, "record", "-o", trace, "--", dir + "/rows"});
  INFO(rec.err);
  REQUIRE(rec.exit_code == 0);
  json::Value doc = report_of(trace, {"--types", map, "--at", "end"});
  const json::Object *locks = group(doc, "pthread_mutex_t");
  REQUIRE(locks);
  CHECK(*locks->getInteger("objects") == 256);
  bool judged = false;
  for (const json::Value &f : *doc.getAsObject()->getArray("findings")) {
    const json::Object &o = *f.getAsObject();
    if (text(o.getString("kind")) == "false_sharing")
      judged |= text(o.getString("message")).find("holds a lock") != std::string::npos;
  }
  CHECK(judged);
}
