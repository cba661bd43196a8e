// Allocation sites on code shaped like the field's (tests/programs/sites): the
// BST study's int-lf pattern built -O2/-O3 with static inline constructors,
// allocating through a pool that is inlined, out of line, a tail call, two
// layers deep or merged by LTO, and in C++ through inline member functions,
// new and std::make_unique. With no hints the report must name the
// constructors and flag their interleaving; advise's rules, applied by `run`
// and `record --rules`, must bring each to the whole cache and route exactly
// the objects the report counted.
#include "report_json_support.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace mlt;

namespace {

struct Case {
  const char *program;
  const char *node, *op;                   // site functions, as reports name them
  std::vector<std::string> looked_through; // wrappers the node's site is found through
};

std::vector<std::string> looked_through(const llvm::json::Object &group) {
  std::vector<std::string> out;
  if (const auto *a = group.getArray("looked_through"))
    for (const auto &w : *a)
      out.push_back(w.getAsObject()->getString("function").getValueOr("").str());
  return out;
}

bool flags_underutilization(const llvm::json::Object &report, int64_t group) {
  for (const auto &f : *report.getArray("findings")) {
    const auto *o = f.getAsObject();
    if (o->getString("kind").getValueOr("") != "set_underutilization")
      continue;
    for (const auto &g : *o->getArray("groups"))
      if (g.getAsInteger().getValueOr(-1) == group)
        return true;
  }
  return false;
}

long long rule_allocations(const llvm::json::Object &report, const std::string &fn) {
  if (const auto *rules = report.getArray("rules"))
    for (const auto &r : *rules) {
      const auto *o = r.getAsObject();
      if (o->getString("rule").getValueOr("").find("function=" + fn + ",") != llvm::StringRef::npos)
        return o->getInteger("allocations").getValueOr(-1);
    }
  return -1;
}

} // namespace

TEST_CASE("sites.field_code_end_to_end", "[sites]") {
  const Case c =
      GENERATE(Case{"bst_inline", "create_node", "create_child_op", {"pool_get"}},
               Case{"bst_wrapped", "create_node", "create_child_op", {"pool_get"}},
               Case{"bst_tail", "create_node", "create_child_op", {}},
               Case{"bst_nested", "create_node", "create_child_op", {"pool_raw_alloc", "pool_get"}},
               Case{"bst_lto", "create_node", "create_child_op", {"pool_get"}},
               Case{"lf_tree",
                    "LfTree<long>::new_node(long, long)",
                    "LfTree<long>::new_child_op(LfTree<long>::Node*, LfTree<long>::Node*)",
                    {}});
  INFO("program " << c.program);
  std::string dir = work_dir(std::string("sites_") + c.program);
  std::string before = dir + "/before.trace", after = dir + "/after.trace";
  std::string rules = dir + "/rules.txt";
  const std::string n = "20000";
  RunResult direct = run({program(c.program), n});
  REQUIRE(direct.exit_code() == 0);

  // 1. No hints: the constructors name the groups, on half the sets.
  RunResult rec = record({"-o", before, "--allocator", "jemalloc"}, {program(c.program), n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value b = json_of({memlayout_bin(), "report", before, "--format", "json"});
  const auto *node = group_by_site(*b.getAsObject(), c.node);
  const auto *op = group_by_site(*b.getAsObject(), c.op);
  REQUIRE(node);
  REQUIRE(op);
  CHECK(l1_fraction(*node) < 0.6);
  CHECK(l1_fraction(*op) < 0.6);
  CHECK(flags_underutilization(*b.getAsObject(), node->getInteger("id").getValueOr(-1)));
  std::vector<std::string> through = looked_through(*node);
  for (const auto &w : c.looked_through)
    CHECK(std::find(through.begin(), through.end(), w) != through.end());
  const long long node_objects = node->getInteger("objects").getValueOr(-1);
  const long long op_objects = op->getInteger("objects").getValueOr(-1);
  CHECK(node_objects > 10000);

  // 2. advise writes a rule per constructor, checked against the groups.
  RunResult adv = run({memlayout_bin(), "advise", before, "-o", rules});
  INFO("advise stderr: " << adv.err);
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(rules);
  INFO(text);
  CHECK(text.find("function=" + std::string(c.node) + ",") != std::string::npos);
  CHECK(text.find("function=" + std::string(c.op) + ",") != std::string::npos);
  CHECK(text.find("not written") == std::string::npos);

  // 3. run applies them: the program's output is its own, and each rule
  // routed exactly the objects the report counted.
  RunResult ran = run({memlayout_bin(), "run", "--allocator", "jemalloc", "--rules", rules, "--",
                       program(c.program), n});
  INFO("run stderr: " << ran.err);
  CHECK(ran.exit_code() == 0);
  CHECK(ran.out == direct.out);
  CHECK(routed_by(ran.err, c.node) == node_objects);
  CHECK(routed_by(ran.err, c.op) == op_objects);
  CHECK(ran.err.find("routed nothing") == std::string::npos);

  // 4. Recorded under them: both on (nearly) all the sets, and the trace
  // says what each rule routed.
  rec = record({"-o", after, "--allocator", "jemalloc", "--rules", rules}, {program(c.program), n});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  llvm::json::Value a = json_of({memlayout_bin(), "report", after, "--format", "json"});
  const auto *node_after = group_by_site(*a.getAsObject(), c.node);
  const auto *op_after = group_by_site(*a.getAsObject(), c.op);
  REQUIRE(node_after);
  REQUIRE(op_after);
  CHECK(l1_fraction(*node_after) >= 0.9);
  CHECK(l1_fraction(*op_after) >= 0.9);
  CHECK(rule_allocations(*a.getAsObject(), c.node) == node_objects);
  CHECK(rule_allocations(*a.getAsObject(), c.op) == op_objects);
}

TEST_CASE("sites.not_wrapper_and_wrapper_options", "[sites]") {
  std::string dir = work_dir("sites_options");
  std::string trace = dir + "/w.trace";
  RunResult rec =
      record({"-o", trace, "--allocator", "jemalloc"}, {program("bst_wrapped"), "5000"});
  REQUIRE(rec.exit_code() == 0);
  // Told it is not a wrapper, the pool is the site again: one group.
  llvm::json::Value r =
      json_of({memlayout_bin(), "report", trace, "--format", "json", "--not-wrapper", "pool_get"});
  CHECK(group_by_site(*r.getAsObject(), "pool_get"));
  CHECK_FALSE(group_by_site(*r.getAsObject(), "create_node"));
  // A rule naming the wrapper itself routes nothing, and run says why.
  RunResult ran = run({memlayout_bin(), "run", "--segregate", "function=pool_get,pool=p", "--",
                       program("bst_wrapped"), "5000"});
  CHECK(ran.exit_code() == 0);
  CHECK(ran.err.find("names an allocation wrapper") != std::string::npos);
  CHECK(ran.err.find("routed nothing: pool_get is an allocation wrapper") != std::string::npos);
  CHECK(ran.err.find("close names: pool_get") == std::string::npos); // not itself
  // With not-wrapper it routes every allocation of the pool.
  ran = run({memlayout_bin(), "run", "--not-wrapper", "pool_get", "--segregate",
             "function=pool_get,pool=p", "--", program("bst_wrapped"), "5000"});
  CHECK(ran.exit_code() == 0);
  CHECK(routed_by(ran.err, "pool_get") > 8000);
  // A misspelt rule routes nothing and the warning offers the inlined names.
  ran = run({memlayout_bin(), "run", "--segregate", "function=create_nod,pool=p", "--",
             program("bst_wrapped"), "5000"});
  INFO(ran.err);
  CHECK(ran.err.find("close names: create_node (inlined)") != std::string::npos);
}

TEST_CASE("sites.compare_runs_both_sides", "[sites]") {
  std::string dir = work_dir("sites_compare");
  std::string out = dir + "/compare.json";
  RunResult r = run({memlayout_bin(), "compare", "--segregate", "function=create_node,pool=nodes",
                     "-r", "2", "-w", "0", "--allocator", "jemalloc", "--export-json", out, "--",
                     program("bst_wrapped"), "20000", "20000"});
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  CHECK(r.out.find("B/A, per round") != std::string::npos);
  auto parsed = llvm::json::parse(read_file(out));
  REQUIRE(static_cast<bool>(parsed));
  const auto *o = parsed->getAsObject();
  CHECK(o->getString("schema").getValueOr("") == "memlayout.compare/1");
  CHECK(o->getObject("without_rules")->getArray("runs")->size() == 2);
  CHECK(o->getObject("with_rules")->getObject("wall_s")->getNumber("median").getValueOr(0) > 0);
  CHECK(o->getObject("ratio")->getObject("cpu")->getNumber("median").getValueOr(0) > 0);
  const auto *rules = o->getArray("rules");
  REQUIRE(rules->size() == 1);
  CHECK((*rules)[0].getAsObject()->getNumber("allocations_per_run").getValueOr(0) > 15000);
  // Peak RSS is the program's: a small one is not charged memlayout-full's
  // ~50 MiB, as when it was forked from there.
  const int64_t rss = o->getObject("without_rules")->getInteger("max_rss_kib").getValueOr(-1);
  CHECK(rss > 0);
  CHECK(rss < 30 * 1024);
  // A program that cannot start is a message, not a timing.
  r = run({memlayout_bin(), "compare", "--segregate", "function=x,pool=p", "-r", "1", "--",
           dir + "/no-such-program"});
  CHECK(r.exit_code() != 0);
  CHECK(r.err.find("no-such-program: No such file or directory") != std::string::npos);
  // A program that fails is not timed.
  r = run({memlayout_bin(), "compare", "--segregate", "function=x,pool=p", "-r", "1", "--",
           "/bin/false"});
  CHECK(r.exit_code() == 1);
  CHECK(r.err.find("did not succeed") != std::string::npos);
}

TEST_CASE("sites.bundled_tree_inlined_constructors", "[sites]") {
  // The trees' new_node/new_descriptor carry no noinline: at -O2 they are
  // folded into insert, and the record allocator into them.
  std::string dir = work_dir("sites_bench_int_lf");
  std::string before = dir + "/before.trace", after = dir + "/after.trace";
  std::string rules = dir + "/rules.txt";
  std::vector<std::string> bench{MLT_BENCH, "--tree",     "int-lf", "--threads",
                                 "1",       "--duration", "0",      "--key-range",
                                 "100000",  "--prefill",  "50000"};
  RunResult rec = record({"-o", before, "--allocator", "jemalloc"}, bench);
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value b = json_of({memlayout_bin(), "report", before, "--format", "json"});
  const std::string node = "memlayout::trees::IntLf<memlayout::trees::IntLfBaselineLayout>::"
                           "new_node(long, long)";
  const std::string desc = "memlayout::trees::IntLf<memlayout::trees::IntLfBaselineLayout>::"
                           "new_descriptor()";
  const auto *n = group_by_site(*b.getAsObject(), node);
  const auto *d = group_by_site(*b.getAsObject(), desc);
  REQUIRE(n);
  REQUIRE(d);
  CHECK(l1_fraction(*n) < 0.7);
  CHECK(flags_underutilization(*b.getAsObject(), n->getInteger("id").getValueOr(-1)));
  const long long nodes = n->getInteger("objects").getValueOr(-1);
  CHECK(nodes >= 50000);
  RunResult adv = run({memlayout_bin(), "advise", before, "-o", rules});
  REQUIRE(adv.exit_code() == 0);
  rec = record({"-o", after, "--allocator", "jemalloc", "--rules", rules}, bench);
  INFO(rec.err);
  REQUIRE(rec.exit_code() == 0);
  CHECK(routed_by(rec.err, node) == nodes);
  llvm::json::Value a = json_of({memlayout_bin(), "report", after, "--format", "json"});
  const auto *n_after = group_by_site(*a.getAsObject(), node);
  const auto *d_after = group_by_site(*a.getAsObject(), desc);
  REQUIRE(n_after);
  REQUIRE(d_after);
  CHECK(l1_fraction(*n_after) >= 0.9);
  CHECK(l1_fraction(*d_after) >= 0.9);
}

TEST_CASE("sites.compare_reads_the_same_input_every_run", "[sites]") {
  // A pipe is read once: kept aside, it is given to every run whole.
  RunOptions o;
  for (int i = 1; i <= 1000; ++i)
    o.stdin_data += std::to_string(i) + "\n";
  RunResult r = run({memlayout_bin(), "compare", "--segregate", "size=8,pool=x", "-r", "2", "-w",
                     "1", "--show-output", "--", "/usr/bin/wc", "-l"},
                    o);
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  size_t whole = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    whole += line == "1000";
  CHECK(whole == 6); // both sides, a warm-up and two measured runs each
}

// The standard containers allocate for the code that fills them: each
// container's nodes are a group named after that function, not after
// _Rb_tree::_M_get_node (one group for every std::map of the program), and a
// rule naming the function routes exactly those nodes.
TEST_CASE("sites.std_containers_named_by_their_users", "[sites]") {
  std::string dir = work_dir("sites_ledger");
  std::string trace = dir + "/ledger.trace";
  RunResult direct = run({program("ledger"), "12000"});
  REQUIRE(direct.exit_code() == 0);
  CHECK(direct.out.rfind("12000 3000 12000 6000 ", 0) == 0);
  RunResult rec = record({"-o", trace}, {program("ledger"), "12000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const llvm::json::Object &r = *v.getAsObject();
  const std::pair<const char *, int64_t> expected[] = {{"load_accounts(Ledger&, long)", 12000},
                                                       {"load_audit(Ledger&, long)", 3000},
                                                       {"queue_transfers(Ledger&, long)", 6000}};
  for (const auto &[fn, objects] : expected) {
    INFO(fn);
    const auto *g = group_by_site(r, fn);
    REQUIRE(g);
    CHECK(g->getInteger("objects").getValueOr(-1) == objects);
  }
  for (const auto &g : *r.getArray("groups")) {
    std::string name = g.getAsObject()->getString("name").getValueOr("").str();
    CHECK(name.find("_M_get_node") == std::string::npos);
    CHECK(name.find("_M_allocate_node") == std::string::npos);
  }
  RunResult ran = run({memlayout_bin(), "run", "--segregate", "function=load_audit,pool=audit",
                       "--", program("ledger"), "12000"});
  INFO(ran.err);
  CHECK(ran.out == direct.out);
  CHECK(routed_by(ran.err, "load_audit") == 3000);
}

// file=PATH:LINE names the code at that line: in a static inline
// constructor folded into its caller at -O3 (and calling an inlined pool),
// the constructor, as the report names the site, not the function it was
// folded into, and exactly what function=create_node routes.
TEST_CASE("sites.file_line_rule_on_inlined_code", "[sites]") {
  auto routed = [](const std::string &rule, const std::string &fn) {
    RunResult r =
        run({memlayout_bin(), "run", "--segregate", rule, "--", program("bst_inline"), "20000"});
    INFO(rule << ": " << r.err);
    CHECK(r.exit_code() == 0);
    return routed_by(r.err, fn);
  };
  // The lines of the two allocations, from the program's source.
  std::string source = std::string(__FILE__);
  source =
      read_file(source.substr(0, source.rfind("/integration/")) + "/programs/sites/bst_main.c");
  auto line_of = [&](const std::string &text) {
    size_t at = source.find(text);
    REQUIRE(at != std::string::npos);
    return std::to_string(std::count(source.begin(), source.begin() + static_cast<long>(at), '\n') +
                          1);
  };
  const std::string node_line = line_of("node_t *n = pool_get(sizeof *n);");
  const std::string op_line = line_of("operation_t *op = pool_get(sizeof *op);");
  const long long by_function = routed("function=create_node,pool=n", "create_node");
  CHECK(by_function > 10000);
  CHECK(routed("file=bst_main.c:" + node_line + ",pool=n", "create_node") == by_function);
  CHECK(routed("file=bst_main.c:" + op_line + ",pool=n", "create_child_op") > 10000);
}

// GCC's line table gives a one-line constructor's line to loop instructions
// of its caller that lie outside the inlined ranges: the rule routes the
// constructor's objects, not the caller's own index as well.
TEST_CASE("sites.file_line_rule_leaves_the_callers_own_allocations", "[sites]") {
  std::string source = std::string(__FILE__);
  source = read_file(source.substr(0, source.rfind("/integration/")) +
                     "/programs/sites/oneline_ctors.c");
  size_t at = source.find("static inline item_t *make_item");
  REQUIRE(at != std::string::npos);
  const std::string line =
      std::to_string(std::count(source.begin(), source.begin() + static_cast<long>(at), '\n') + 1);
  RunResult direct = run({program("oneline_ctors"), "20000"});
  RunResult r =
      run({memlayout_bin(), "run", "--segregate", "file=oneline_ctors.c:" + line + ",pool=it", "--",
           program("oneline_ctors"), "20000"});
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(r.out == direct.out);
  CHECK(routed_by(r.err, "make_item") == 20000);
  CHECK(r.err.find("function=main") == std::string::npos);
}

// dump --symbolize names each allocation's site as the report does, with the
// wrappers only the recorded stacks show (slab_take, a clone called by two
// inlined constructors).
TEST_CASE("sites.dump_names_sites_as_the_report_does", "[sites]") {
  std::string dir = work_dir("sites_dump");
  std::string trace = dir + "/t.trace";
  REQUIRE(record({"-o", trace}, {program("oneline_ctors"), "2000"}).exit_code() == 0);
  RunResult d = run({memlayout_bin(), "dump", trace, "--symbolize"});
  REQUIRE(d.exit_code() == 0);
  auto count = [&](const std::string &what) {
    size_t n = 0;
    for (size_t at = d.out.find(what); at != std::string::npos; at = d.out.find(what, at + 1))
      ++n;
    return n;
  };
  CHECK(count("make_item (oneline_ctors.c:") == 2000);
  CHECK(count("make_edit (oneline_ctors.c:") == 2000);
  CHECK(count("slab_take") == 0);
}

// --follow-children labels the programs the command names, so a rule naming
// an inlined constructor routes in a program a shell starts.
TEST_CASE("sites.follow_children_routes_inlined_sites_of_named_programs", "[sites]") {
  const std::string prog = program("oneline_ctors");
  RunResult r =
      run({memlayout_bin(), "run", "--follow-children", "--segregate", "function=make_item,pool=it",
           "--", "/bin/sh", "-c", prog + " 1000; " + prog + " 500"});
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(routed_by(r.err, "make_item") == 1500);
}

// The standard library allocates for its callers, inlined into them and
// often without linkage names in DWARF (std::function's _M_create for a
// lambda): the report names the callers, as the interposer routes them.
TEST_CASE("sites.standard_library_allocates_for_its_callers", "[sites]") {
  std::string dir = work_dir("sites_library");
  std::string trace = dir + "/t.trace";
  REQUIRE(record({"-o", trace}, {program("library_sites"), "4000"}).exit_code() == 0);
  RunResult rep = run({memlayout_bin(), "report", trace, "--format", "json"});
  REQUIRE(rep.exit_code() == 0);
  auto parsed = llvm::json::parse(rep.out);
  REQUIRE(static_cast<bool>(parsed));
  const llvm::json::Object &r = *parsed->getAsObject();
  auto group_of = [&](const std::string &fn) -> const llvm::json::Object * {
    for (const auto &g : *r.getArray("groups"))
      if (g.getAsObject()
              ->getObject("site")
              ->getString("function")
              .getValueOr("")
              .startswith(fn + "("))
        return g.getAsObject();
    return nullptr;
  };
  for (const auto &g : *r.getArray("groups")) {
    std::string name = g.getAsObject()->getString("name").getValueOr("").str();
    INFO(name);
    CHECK(name.find("_M_create") == std::string::npos);
    CHECK(name.find("operator+") == std::string::npos);
    CHECK(name.find("allocate") == std::string::npos);
  }
  for (const auto &[fn, objects] : std::vector<std::pair<std::string, int64_t>>{
           {"record_order", 4000}, {"label_order", 4000}}) {
    INFO(fn);
    const auto *g = group_of(fn);
    REQUIRE(g);
    CHECK(g->getInteger("objects").getValueOr(-1) == objects);
    RunResult ran = run({memlayout_bin(), "run", "--segregate", "function=" + fn + ",pool=p", "--",
                         program("library_sites"), "4000"});
    INFO(ran.err);
    CHECK(routed_by(ran.err, fn) == objects);
  }
  CHECK(group_of("book_orders"));
  // --hot names a C++ function as rules do: without its parameters.
  RunResult hot =
      run({memlayout_bin(), "report", trace, "--format", "json", "--hot", "record_order=16"});
  REQUIRE(hot.exit_code() == 0);
  auto hot_parsed = llvm::json::parse(hot.out);
  REQUIRE(static_cast<bool>(hot_parsed));
  bool found = false;
  for (const auto &g : *hot_parsed->getAsObject()->getArray("groups"))
    if (g.getAsObject()->getObject("site")->getString("function").getValueOr("") ==
        "record_order(long)") {
      found = true;
      CHECK(g.getAsObject()->getInteger("hot_bytes").getValueOr(0) == 16);
    }
  CHECK(found);
}

// Under jemalloc a 48-byte latch and a 33-byte name allocated by one
// function share the 48-byte class: advise tells them apart by requested
// size, and the rule routes the latches alone.
TEST_CASE("sites.requested_sizes_separate_one_class", "[sites]") {
  std::string dir = work_dir("sites_latch_names");
  std::string before = dir + "/before.trace", after = dir + "/after.trace";
  std::string rules = dir + "/rules.txt";
  const std::string n = "20000";
  RunResult direct = run({program("latch_names"), n});
  REQUIRE(direct.exit_code() == 0);
  auto latches = [](const llvm::json::Object &report) -> const llvm::json::Object * {
    for (const auto &g : *report.getArray("groups")) {
      const auto *o = g.getAsObject();
      if (o->getInteger("requested_size").getValueOr(0) == 48 &&
          o->getInteger("objects").getValueOr(0) == 20000)
        return o;
    }
    return nullptr;
  };

  RunResult rec = record({"-o", before, "--allocator", "jemalloc"}, {program("latch_names"), n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value b = json_of({memlayout_bin(), "report", before, "--format", "json"});
  const auto *latch = latches(*b.getAsObject());
  REQUIRE(latch);
  CHECK(latch->getInteger("size_class").getValueOr(0) == 48);
  CHECK(latch->getInteger("requested_min").getValueOr(0) == 48);
  CHECK(latch->getInteger("requested_max").getValueOr(0) == 48);
  CHECK(latch->getNumber("straddle_fraction").getValueOr(0) > 0.3);

  // A rule by the latches' line routes the whole function, names too:
  // replay says so before anything runs.
  std::string source = std::string(__FILE__);
  source =
      read_file(source.substr(0, source.rfind("/integration/")) + "/programs/sites/latch_names.c");
  size_t at = source.find("latch_t *l = malloc(sizeof *l);");
  REQUIRE(at != std::string::npos);
  std::string by_line = dir + "/by_line.txt";
  {
    std::ofstream f(by_line);
    f << "file=latch_names.c:"
      << std::count(source.begin(), source.begin() + static_cast<long>(at), '\n') + 1
      << ",pool=latches,align=64\n";
  }
  RunResult predicted = run({memlayout_bin(), "replay", before, "--rules", by_line});
  INFO("replay stderr: " << predicted.err);
  CHECK(predicted.exit_code() == 0);
  CHECK(predicted.err.find("routes the whole of build, as `run` and `record` will: 20000 of its "
                           "40000 allocations are from other lines or types: build (") !=
        std::string::npos);
  size_t name_at = source.find("char *name = malloc(33);");
  REQUIRE(name_at != std::string::npos);
  CHECK(predicted.err.find(
            "latch_names.c:" +
            std::to_string(
                std::count(source.begin(), source.begin() + static_cast<long>(name_at), '\n') + 1) +
            ")") != std::string::npos);

  RunResult adv = run({memlayout_bin(), "advise", before, "-o", rules});
  INFO("advise stderr: " << adv.err);
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(rules);
  INFO(text);
  CHECK(text.find("function=build,size=34-48,") != std::string::npos);
  CHECK(text.find("not written") == std::string::npos);

  rec = record({"-o", after, "--allocator", "jemalloc", "--rules", rules},
               {program("latch_names"), n});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  llvm::json::Value a = json_of({memlayout_bin(), "report", after, "--format", "json"});
  const auto *routed = latches(*a.getAsObject());
  REQUIRE(routed);
  CHECK(routed->getNumber("straddle_fraction").getValueOr(1) == 0);
  CHECK(routed->getString("name").getValueOr("").startswith("build.34-48"));
  CHECK(rule_allocations(*a.getAsObject(), "build") > 0);

  // advise of the trace recorded under them keeps them: a rules file
  // without them would undo the fix.
  RunResult again = run({memlayout_bin(), "advise", after});
  REQUIRE(again.exit_code() == 0);
  INFO(again.out);
  CHECK(again.out.find("# in force when the trace was recorded: routed 20000 allocations\n"
                       "function=build,size=34-48,pool=build.34-48,align=64\n") !=
        std::string::npos);
  CHECK(again.out.find("nothing to change beyond the rules in force") != std::string::npos);

  // Recorded with both kinds in one pool, as a user might first try: the
  // new rules narrow it and come first; the rule in force, which would
  // route nothing after them, stays as a comment.
  std::string shared = dir + "/shared.trace";
  rec =
      record({"-o", shared, "--allocator", "jemalloc", "--segregate", "function=build,pool=shared"},
             {program("latch_names"), n});
  REQUIRE(rec.exit_code() == 0);
  RunResult narrowed = run({memlayout_bin(), "advise", shared});
  REQUIRE(narrowed.exit_code() == 0);
  INFO(narrowed.out);
  size_t latch_rule = narrowed.out.find("\nfunction=build,size=34-48,");
  size_t old_rule = narrowed.out.find("replaced by the rules above: function=build,pool=shared");
  CHECK(latch_rule != std::string::npos);
  CHECK(old_rule != std::string::npos);
  CHECK(latch_rule < old_rule);
  CHECK(narrowed.out.find("\nfunction=build,pool=shared") == std::string::npos);
}

// Lambdas are named as GCC, c++filt and the rules name them, whether the
// compiler inlined them (their names then come from the debug info's
// closure types) or kept them out of line (from the mangled name), and a
// rule that names one routes it alone.
TEST_CASE("sites.lambdas_named_as_gcc_names_them", "[sites]") {
  std::string dir = work_dir("sites_lambdas");
  std::string trace = dir + "/lambdas.trace";
  RunResult direct = run({program("lambdas"), "4000"});
  REQUIRE(direct.exit_code() == 0);
  RunResult rec = record({"-o", trace}, {program("lambdas"), "4000"});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const llvm::json::Object &r = *v.getAsObject();
  const std::pair<const char *, int64_t> expected[] = {
      {"main::{lambda(long)#1}::operator()", 4000},
      {"main::{lambda(long)#2}::operator()", 4000},
      {"load(long)::{lambda(char const*, unsigned long)#1}::operator()", 2000}};
  for (const auto &[fn, objects] : expected) {
    INFO(fn);
    long long found = 0;
    for (const auto &g : *r.getArray("groups")) {
      const auto *o = g.getAsObject();
      std::string f = o->getObject("site")->getString("function").getValueOr("").str();
      if (f.rfind(fn, 0) == 0) // out of line: "(char const*, unsigned long) const" follows
        found += o->getInteger("objects").getValueOr(0);
    }
    // The loader's lambda also grows the notes' vector: its buffer is one more.
    CHECK(found >= objects);
    CHECK(found <= objects + 1);
  }
  for (const auto &g : *r.getArray("groups"))
    CHECK(g.getAsObject()->getString("name").getValueOr("").find("anonymous") ==
          llvm::StringRef::npos);
  RunResult ran = run({memlayout_bin(), "run", "--segregate",
                       "function=main::{lambda(long)#2}::operator(),pool=fills", "--",
                       program("lambdas"), "4000"});
  INFO(ran.err);
  CHECK(ran.out == direct.out);
  CHECK(routed_by(ran.err, "main::{lambda(long)#2}::operator()") == 4000);
}

// Static and anonymous-namespace functions: their DWARF has no linkage name,
// the report names them by their symbols, with parameters; rules written
// that way (as advise writes them) route in the run as in the replay.
TEST_CASE("sites.file_local_functions_named_with_parameters_route", "[sites]") {
  std::string dir = work_dir("sites_local_functions");
  std::string trace = dir + "/local.trace";
  RunResult direct = run({program("local_functions"), "300"});
  REQUIRE(direct.exit_code() == 0);
  REQUIRE(record({"-o", trace}, {program("local_functions"), "300"}).exit_code() == 0);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  auto objects_of = [&](const std::string &prefix) {
    long long n = 0;
    for (const auto &g : *v.getAsObject()->getArray("groups")) {
      const auto *o = g.getAsObject();
      if (o->getObject("site")->getString("function").getValueOr("").startswith(prefix))
        n += o->getInteger("objects").getValueOr(0);
    }
    return n;
  };
  CHECK(objects_of("fill(Shelf*, int)") == 300);
  CHECK(objects_of("(anonymous namespace)::stock(Shelf&, int, int)") == 600);
  const std::string fill = "fill(Shelf*, int)";
  const std::string stock = "(anonymous namespace)::stock(Shelf&, int, int)";
  RunResult ran =
      run({memlayout_bin(), "run", "--segregate", "function=" + fill + ",pool=fills", "--segregate",
           "function=" + stock + ",pool=stocks", "--", program("local_functions"), "300"});
  INFO(ran.err);
  CHECK(ran.out == direct.out);
  CHECK(routed_by(ran.err, fill) == 300);
  CHECK(routed_by(ran.err, stock) == 600);
  CHECK(ran.err.find("matches no function") == std::string::npos);
}

// The program rebuilt since recording: every name the report gives comes
// from another build. report says so (dump --symbolize always did).
TEST_CASE("sites.a_rebuilt_program_is_named_in_the_report", "[sites]") {
  std::string dir = work_dir("sites_rebuilt");
  std::string exe = dir + "/prog", trace = dir + "/prog.trace";
  REQUIRE(run({"/bin/cp", program("lambdas"), exe}).exit_code() == 0);
  REQUIRE(record({"-o", trace}, {exe, "100"}).exit_code() == 0);
  llvm::json::Value same = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  auto notes_mention = [](const llvm::json::Value &v, const std::string &what) {
    for (const llvm::json::Value &n : *v.getAsObject()->getArray("notes"))
      if (n.getAsString().getValueOr("").contains(what))
        return true;
    return false;
  };
  CHECK_FALSE(notes_mention(same, "differs from the trace's"));
  REQUIRE(run({"/bin/cp", program("cxx_alloc"), exe}).exit_code() == 0);
  llvm::json::Value rebuilt = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  CHECK(notes_mention(rebuilt, exe + ": build-id"));
  CHECK(notes_mention(rebuilt, "the file changed since recording"));
  // advise's rules name what those symbols say: it warns too.
  RunResult advise = run({memlayout_bin(), "advise", trace, "-o", dir + "/rules"});
  CHECK(advise.exit_code() == 0);
  CHECK(advise.err.find("warning: " + exe + ": build-id") != std::string::npos);
}

// Typed constructors compiled to `jmp malloc` leave no frame: the first
// frame returns into main. The DWARF call site there names the constructor,
// which report, advise, replay and the interposer's rules take as the site.
TEST_CASE("sites.tail_called_constructors", "[sites]") {
  std::string dir = work_dir("sites_tail_ctors");
  std::string trace = dir + "/t.trace", rules = dir + "/rules.txt";
  const std::string n = "20000";
  RunResult direct = run({program("tail_ctors"), n});
  REQUIRE(direct.exit_code() == 0);
  RunResult rec = record({"-o", trace, "--allocator", "jemalloc"}, {program("tail_ctors"), n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *node = group_by_site(*r.getAsObject(), "new_node");
  const auto *desc = group_by_site(*r.getAsObject(), "new_desc");
  REQUIRE(node);
  REQUIRE(desc);
  CHECK(node->getInteger("objects").getValueOr(-1) == 20000);
  CHECK(desc->getInteger("objects").getValueOr(-1) == 20000);
  CHECK(node->getObject("site")->getString("file").getValueOr("").endswith("tail_ctors.c"));
  CHECK(node->getObject("site")->getInteger("line").getValueOr(0) > 0);
  // main keeps only its own two arrays.
  for (const auto &g : *r.getAsObject()->getArray("groups")) {
    const auto *o = g.getAsObject();
    if (o->getObject("site")->getString("function").getValueOr("") == "main")
      CHECK(o->getInteger("objects").getValueOr(-1) == 1);
  }

  RunResult adv = run({memlayout_bin(), "advise", trace, "-o", rules});
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(rules);
  INFO(text);
  CHECK(text.find("function=main,") == std::string::npos);
  CHECK((text.find("function=new_node,") != std::string::npos ||
         text.find("function=new_desc,") != std::string::npos));

  // Rules naming the constructors route every object; one naming main only
  // main's own allocations.
  RunResult ran =
      run({memlayout_bin(), "run", "--allocator", "jemalloc", "--segregate",
           "function=new_node,pool=nodes", "--segregate", "function=new_desc,pool=descs",
           "--segregate", "function=main,pool=arrays", "--", program("tail_ctors"), n});
  INFO("run stderr: " << ran.err);
  CHECK(ran.exit_code() == 0);
  CHECK(ran.out == direct.out);
  CHECK(routed_by(ran.err, "new_node") == 20000);
  CHECK(routed_by(ran.err, "new_desc") == 20000);
  CHECK(routed_by(ran.err, "main") == 2);

  // replay decides sites as the report does.
  std::string two = dir + "/two.rules";
  {
    std::ofstream out(two);
    out << "function=new_node,pool=nodes\nfunction=new_desc,pool=descs\n";
  }
  llvm::json::Value rp =
      json_of({memlayout_bin(), "replay", trace, "--rules", two, "--format", "json"});
  const auto *replayed = rp.getAsObject()->getArray("rules");
  REQUIRE(replayed);
  REQUIRE(replayed->size() == 2);
  for (const auto &x : *replayed)
    CHECK(x.getAsObject()->getInteger("allocations").getValueOr(-1) == 20000);
}

// A stripped library's static helpers between its wrappers have no name, as
// in Debian's libsqlite3 (?? -> sqlite3Malloc -> ?? -> sqlite3DbMallocZero
// -> sqlite3FindFunction): the report looks through each unnamed frame that
// a wrapper above clears, and the interposer must route what replay
// predicts, live and recorded, by advise's rules and by hand-written ones.
// A stripped executable (no symbols at all): each allocating return
// address is a site of its own, named by the first named caller, glibc's
// __libc_start_call_main. Every site was named after _start, the outermost
// frame: __libc_start_main was judged part of the allocator (the __libc_
// prefix of __libc_malloc), and the three sites were one name.
TEST_CASE("sites.a_stripped_executable_keeps_its_sites_apart", "[sites]") {
  std::string dir = work_dir("sites_stripped_executable");
  std::string trace = dir + "/t.trace";
  REQUIRE(record({"-o", trace}, {program("nodebug_wrapper_stripped"), "2000"}).exit_code() == 0);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  std::set<std::string> names;
  for (const auto &g : *v.getAsObject()->getArray("groups")) {
    const auto *o = g.getAsObject();
    std::string name = o->getString("name").getValueOr("").str();
    if (name.find("nodebug_wrapper_stripped+") == std::string::npos)
      continue; // the C library's own (stdio's buffer)
    INFO(name);
    CHECK(name.rfind("__libc_start_call_main -> ?? (", 0) == 0);
    names.insert(name);
  }
  // xalloc's call (new_conn's and new_buf's objects) and main's calloc.
  CHECK(names.size() == 2);
}

TEST_CASE("sites.unnamed_frames_in_a_stripped_library", "[sites]") {
  std::string dir = work_dir("sites_stripped_wrappers");
  std::string trace = dir + "/s.trace", advised = dir + "/advised.rules",
              mine = dir + "/mine.rules";
  const std::string prog = program("stripped_wrappers_main"), n = "20000";
  const std::vector<std::string> wrappers = {"--wrapper", "xmalloc_like", "--wrapper",
                                             "db_malloc_zero"};
  auto with_wrappers = [&](std::vector<std::string> argv) {
    argv.insert(argv.end(), wrappers.begin(), wrappers.end());
    return argv;
  };
  RunResult direct = run({prog, n});
  REQUIRE(direct.exit_code() == 0);
  RunResult rec = record({"-o", trace, "--allocator", "jemalloc"}, {prog, n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r =
      json_of(with_wrappers({memlayout_bin(), "report", trace, "--format", "json"}));
  const auto *records = group_by_site(*r.getAsObject(), "lib_new_record");
  const auto *index = group_by_site(*r.getAsObject(), "lib_new_index");
  REQUIRE(records);
  REQUIRE(index);
  CHECK(records->getInteger("objects").getValueOr(-1) == 20000);
  CHECK(index->getInteger("objects").getValueOr(-1) == 20000);
  std::vector<std::string> through = looked_through(*records);
  CHECK(std::find(through.begin(), through.end(), "xmalloc_like") != through.end());
  CHECK(std::find(through.begin(), through.end(), "db_malloc_zero") != through.end());

  RunResult adv = run(with_wrappers({memlayout_bin(), "advise", trace, "-o", advised}));
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(advised);
  INFO(text);
  CHECK(text.find("wrapper=xmalloc_like") != std::string::npos);
  CHECK(text.find("wrapper=db_malloc_zero") != std::string::npos);
  CHECK((text.find("function=lib_new_record,") != std::string::npos ||
         text.find("function=lib_new_index,") != std::string::npos));
  {
    std::ofstream out(mine);
    out << "wrapper=xmalloc_like\nwrapper=db_malloc_zero\n"
           "function=lib_new_record,pool=records\nfunction=lib_new_index,pool=index\n"
           "function=main,pool=arrays\n";
  }

  for (const std::string &rules : {advised, mine}) {
    INFO("rules " << rules);
    llvm::json::Value rp =
        json_of({memlayout_bin(), "replay", trace, "--rules", rules, "--format", "json"});
    const auto *predicted = rp.getAsObject()->getArray("rules");
    REQUIRE(predicted);
    RunResult ran =
        run({memlayout_bin(), "run", "--allocator", "jemalloc", "--rules", rules, "--", prog, n});
    INFO("run stderr: " << ran.err);
    CHECK(ran.exit_code() == 0);
    CHECK(ran.out == direct.out);
    std::string after = dir + "/after.trace";
    RunResult again = record({"-o", after, "--allocator", "jemalloc", "--rules", rules}, {prog, n});
    REQUIRE(again.exit_code() == 0);
    llvm::json::Value recorded = json_of({memlayout_bin(), "report", after, "--format", "json"});
    long long routed = 0;
    for (const char *fn : {"lib_new_record", "lib_new_index", "main"}) {
      long long want = rule_allocations(*rp.getAsObject(), fn);
      if (want < 0)
        continue; // advise wrote no rule for it
      INFO("function=" << fn);
      CHECK(routed_by(ran.err, fn) == want);
      CHECK(rule_allocations(*recorded.getAsObject(), fn) == want);
      routed += want;
    }
    CHECK(routed >= 20000);
  }
  llvm::json::Value rp =
      json_of({memlayout_bin(), "replay", trace, "--rules", mine, "--format", "json"});
  CHECK(rule_allocations(*rp.getAsObject(), "lib_new_record") == 20000);
  CHECK(rule_allocations(*rp.getAsObject(), "lib_new_index") == 20000);
  CHECK(rule_allocations(*rp.getAsObject(), "main") == 2);
}

// Debug info in a separate file that the stripped library's .gnu_debuglink
// names (no build-id): the report names the static constructor from it, and
// a rule naming that function routes what replay says it would.
TEST_CASE("sites.a_library_whose_debug_info_a_debuglink_names", "[sites]") {
  std::string dir = work_dir("sites_debuglink");
  std::string trace = dir + "/d.trace", rules = dir + "/d.rules";
  const std::string prog = program("debuglink_main"), n = "10000";
  RunResult direct = run({prog, n});
  REQUIRE(direct.exit_code() == 0);
  RunResult rec = record({"-o", trace}, {prog, n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *entries = group_by_site(*r.getAsObject(), "new_entry");
  REQUIRE(entries);
  CHECK(entries->getInteger("objects").getValueOr(-1) == 10000);
  {
    std::ofstream out(rules);
    out << "function=new_entry,pool=entries\n";
  }
  llvm::json::Value rp =
      json_of({memlayout_bin(), "replay", trace, "--rules", rules, "--format", "json"});
  CHECK(rule_allocations(*rp.getAsObject(), "new_entry") == 10000);
  RunResult ran = run({memlayout_bin(), "run", "--rules", rules, "--", prog, n});
  INFO("run stderr: " << ran.err);
  CHECK(ran.exit_code() == 0);
  CHECK(ran.out == direct.out);
  CHECK(routed_by(ran.err, "new_entry") == 10000);
  CHECK(ran.err.find("matches no function") == std::string::npos);
}

// A list node and a map node allocated on one line, in one glibc chunk
// size: two calls, two groups, told apart by their columns (merged, the map
// nodes' 48 bytes were taken for all and half the findings went missing).
TEST_CASE("sites.two_allocations_on_one_line_are_two_groups", "[sites]") {
  std::string dir = work_dir("sites_one_line");
  std::string trace = dir + "/l.trace";
  RunResult rec = record({"-o", trace}, {program("one_line_sites"), "20000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r =
      json_of({memlayout_bin(), "report", trace, "--format", "json", "--types", "none"});
  std::map<long long, std::string> by_size; // requested size -> group name
  std::set<long long> lines, columns;
  for (const llvm::json::Value &v : *r.getAsObject()->getArray("groups")) {
    const llvm::json::Object &g = *v.getAsObject();
    const llvm::json::Object *site = g.getObject("site");
    if (!site || site->getString("function").getValueOr("") != "main" ||
        g.getInteger("objects").getValueOr(0) != 20000)
      continue;
    by_size[g.getInteger("requested_size").getValueOr(0)] = g.getString("name")->str();
    lines.insert(site->getInteger("line").getValueOr(0));
    columns.insert(site->getInteger("column").getValueOr(0));
  }
  INFO("groups of main: " << by_size.size());
  REQUIRE(by_size.size() == 2);
  CHECK(by_size.count(48) == 1); // the map's node
  CHECK(by_size.count(56) == 1); // the list's
  CHECK(lines.size() == 1);
  CHECK(columns.size() == 2);
  CHECK(by_size[48] != by_size[56]);
  CHECK(by_size[48].find("one_line_sites.cpp:" + std::to_string(*lines.begin()) + ":") !=
        std::string::npos);
}

// Wrappers defined in a shared library: the program's call sites show their
// callers. grab_mem (two callers) is looked through as in the one-file
// build; grab_zero has one caller and is a site of its own, which the
// warning of a rule naming make_desc says.
TEST_CASE("sites.wrappers_in_a_shared_library", "[sites]") {
  const char *prog = GENERATE("lib_wrappers_main", "one_file_wrappers");
  INFO("program " << prog);
  std::string dir = work_dir(std::string("sites_") + prog);
  std::string trace = dir + "/w.trace";
  const std::string n = "5000";
  RunResult rec = record({"-o", trace, "--allocator", "jemalloc"}, {program(prog), n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *node = group_by_site(*r.getAsObject(), "make_node");
  REQUIRE(node);
  CHECK(node->getInteger("objects").getValueOr(-1) == 5000);
  std::vector<std::string> through = looked_through(*node);
  CHECK(std::find(through.begin(), through.end(), "grab_mem") != through.end());
  CHECK_FALSE(group_by_site(*r.getAsObject(), "grab_mem"));
  const auto *zero = group_by_site(*r.getAsObject(), "grab_zero");
  REQUIRE(zero);
  CHECK(zero->getInteger("objects").getValueOr(-1) == 5000);

  RunResult ran = run({memlayout_bin(), "run", "--segregate", "function=make_node,pool=nodes",
                       "--segregate", "function=make_desc,pool=descs", "--", program(prog), n});
  INFO("run stderr: " << ran.err);
  CHECK(ran.exit_code() == 0);
  CHECK(routed_by(ran.err, "make_node") == 5000);
  // make_desc routed nothing, and the warning says why.
  CHECK(ran.err.find("the sites it names made no allocation") == std::string::npos);
  CHECK(ran.err.find("make_desc made no allocation of its own this run; it calls grab_zero, "
                     "which allocates and is a site of its own") != std::string::npos);
  CHECK(ran.err.find("declare wrapper=grab_zero") != std::string::npos);
  // Declared a wrapper, it routes.
  ran = run({memlayout_bin(), "run", "--wrapper", "grab_zero", "--segregate",
             "function=make_desc,pool=descs", "--", program(prog), n});
  CHECK(routed_by(ran.err, "make_desc") == 5000);
}

// A release build without debug information: GCC specializes a wrapper
// called with constant arguments into a clone, which the symbol table names
// `xcalloc.constprop.0`. It is xcalloc: looked through like it, so that the
// table is main's, as it is with -g (it was a group of its own named after
// the clone, and --wrapper xcalloc did not reach it).
TEST_CASE("sites.a_wrappers_clone_is_the_wrapper", "[sites]") {
  std::string dir = work_dir("sites_wrapper_clone");
  std::string trace = dir + "/t.trace";
  std::string prog = build_c_program(
      dir, "clone",
      "#include <stdio.h>\n#include <stdlib.h>\n"
      "__attribute__((noinline)) static void *xcalloc(size_t n, size_t size) {\n"
      "  void *p = calloc(n, size);\n"
      "  if (!p) {\n    fputs(\"xcalloc: out of memory\\n\", stderr);\n    abort();\n  }\n"
      "  return p;\n}\n"
      "int main(void) {\n"
      "  long *table = xcalloc(1000, sizeof *table);\n"
      "  for (int i = 0; i < 1000; ++i)\n    table[i] = i;\n"
      "  long sum = 0;\n  for (int i = 0; i < 1000; ++i)\n    sum += table[i];\n"
      "  printf(\"%ld\\n\", sum);\n  free(table);\n  return 0;\n}\n",
      {"-O2", "-g0"});
  RunResult nm = run({"/usr/bin/nm", prog});
  INFO(nm.out);
  REQUIRE(nm.out.find("xcalloc.constprop.") != std::string::npos); // what this test is about
  RunResult rec = record({"-o", trace}, {prog});
  INFO(rec.err);
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == "499500\n");
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const llvm::json::Object *table = nullptr;
  for (const auto &g : *v.getAsObject()->getArray("groups"))
    if (g.getAsObject()->getInteger("requested_size").getValueOr(0) == 8000)
      table = g.getAsObject();
  REQUIRE(table != nullptr);
  CHECK(table->getString("name").getValueOr("") == "main");
  std::vector<std::string> through = looked_through(*table);
  REQUIRE(through.size() == 1);
  CHECK(through[0].rfind("xcalloc.constprop.", 0) == 0);
}

// Stacks recorded one frame deep end in the wrapper: the callers that tell
// the sites apart are not in the trace. The report says so, and its fixes
// match by size, since a rule naming the wrapper would route nothing (the
// interposer looks through it): advise's rule must route under record what
// replay says it does. It used to be function=xmalloc, which replay counted
// and record refused.
TEST_CASE("sites.stacks_too_shallow_to_leave_the_wrapper", "[sites]") {
  std::string dir = work_dir("sites_shallow_stacks");
  std::string trace = dir + "/t.trace", advised = dir + "/advised.rules";
  std::string prog = build_c_program(
      dir, "shallow",
      "#include <stdio.h>\n#include <stdlib.h>\n"
      "__attribute__((noinline)) void *xmalloc(size_t n) {\n"
      "  void *p = malloc(n);\n  if (!p)\n    abort();\n  return p;\n}\n"
      "struct node { long key; struct node *next; char pad[40]; };\n"
      "__attribute__((noinline)) struct node *new_node(long key, struct node *next) {\n"
      "  struct node *n = xmalloc(sizeof *n);\n  n->key = key;\n  n->next = next;\n"
      "  return n;\n}\n"
      "int main(void) {\n  struct node *list = NULL;\n"
      "  for (long i = 0; i < 3000; ++i)\n    list = new_node(i, list);\n"
      "  long sum = 0;\n  for (struct node *n = list; n; n = n->next)\n"
      "    sum += n->key;\n  printf(\"%ld\\n\", sum);\n  return 0;\n}\n",
      {"-O2", "-g"});
  RunResult rec = record({"-o", trace, "--stack-depth", "1"}, {prog});
  INFO(rec.err);
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const llvm::json::Object *nodes = nullptr;
  for (const auto &g : *v.getAsObject()->getArray("groups"))
    if (g.getAsObject()->getInteger("objects").getValueOr(0) == 3000)
      nodes = g.getAsObject();
  REQUIRE(nodes != nullptr);
  CHECK(nodes->getString("name").getValueOr("").startswith("xmalloc"));
  bool said = false;
  for (const auto &n : *v.getAsObject()->getArray("notes"))
    said = said || n.getAsString().getValueOr("").contains(
                       "every frame of the recorded stacks is allocator code or a wrapper "
                       "(recorded 1 frame deep)");
  CHECK(said);
  RunResult adv = run({memlayout_bin(), "advise", trace, "-o", advised});
  INFO(adv.err);
  REQUIRE(adv.exit_code() == 0);
  std::string rules = read_file(advised);
  INFO(rules);
  CHECK(rules.find("function=xmalloc") == std::string::npos);
  CHECK(rules.find("size=56,") != std::string::npos);
  RunResult applied = record({"-o", dir + "/applied.trace", "--rules", advised}, {prog});
  INFO(applied.err);
  REQUIRE(applied.exit_code() == 0);
  CHECK(applied.err.find("): 3000 allocations") != std::string::npos);
}
