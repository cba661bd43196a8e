// Segregation end to end, as a user runs it: the BST study's int-lf pattern
// recorded under jemalloc, `advise` turning its findings into rules, the
// program re-run and re-recorded under them (nodes back on all cache sets),
// `replay` predicting the same offline, `diff` showing the change; bad rules.
#include "report_json_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <fstream>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <map>
#include <sstream>

using namespace mlt;

namespace {

bool has_kind(const llvm::json::Object &report, const std::string &kind) {
  for (const auto &f : *report.getArray("findings"))
    if (f.getAsObject()->getString("kind").getValueOr("") == kind)
      return true;
  return false;
}

} // namespace

TEST_CASE("segregate.int_lf_end_to_end", "[segregate]") {
  std::string dir = work_dir("segregate_intlf");
  std::string before = dir + "/before.trace", after = dir + "/after.trace";
  std::string rules = dir + "/rules.txt";
  RunResult direct = run({program("node_descriptor"), "40000"});
  REQUIRE(direct.exit_code() == 0);

  // 1. Recorded as the study ran it: nodes on half the L1 sets.
  RunResult rec =
      record({"-o", before, "--allocator", "jemalloc"}, {program("node_descriptor"), "40000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value b = json_of({memlayout_bin(), "report", before, "--format", "json"});
  const auto *node_before = group_by_site(*b.getAsObject(), "mlr_new_node");
  REQUIRE(node_before);
  CHECK(l1_fraction(*node_before) < 0.6);
  CHECK(has_kind(*b.getAsObject(), "set_underutilization"));

  // 2. advise: a rules file with a pool for the nodes.
  RunResult adv = run({memlayout_bin(), "advise", before, "-o", rules});
  INFO("advise stderr: " << adv.err);
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(rules);
  INFO(text);
  CHECK(text.find("function=mlr_new_node") != std::string::npos);
  CHECK(text.find("pool=") != std::string::npos);

  // 3. run applies the rules without recording: same output, same status.
  RunResult ran = run({memlayout_bin(), "run", "--allocator", "jemalloc", "--rules", rules, "--",
                       program("node_descriptor"), "40000"});
  CHECK(ran.exit_code() == 0);
  CHECK(ran.out == direct.out);

  // 4. Recorded under the rules: the nodes' group is named by its pool and
  // uses all the L1 sets.
  rec = record({"-o", after, "--allocator", "jemalloc", "--rules", rules},
               {program("node_descriptor"), "40000"});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  llvm::json::Value a = json_of({memlayout_bin(), "report", after, "--format", "json"});
  const auto *node_after = group_by_site(*a.getAsObject(), "mlr_new_node");
  REQUIRE(node_after);
  CHECK(l1_fraction(*node_after) > 0.9);
  CHECK(node_after->getString("name").getValueOr("").find("mlr_new_node") != llvm::StringRef::npos);

  // 5. replay predicts it from the first trace alone.
  llvm::json::Value p =
      json_of({memlayout_bin(), "replay", before, "--rules", rules, "--format", "json"});
  const auto *node_replayed = group_by_site(*p.getAsObject(), "mlr_new_node");
  REQUIRE(node_replayed);
  CHECK(l1_fraction(*node_replayed) > 0.9);
  const auto *desc_replayed = group_by_site(*p.getAsObject(), "mlr_new_descriptor");
  REQUIRE(desc_replayed);
  CHECK(p.getAsObject()->getString("allocator").getValueOr("") == "jemalloc");
  // What each rule routed, as a recording under the rules lists it.
  CHECK(p.getAsObject()->getString("rules_from").getValueOr("") == "replay");
  const llvm::json::Array *replayed_rules = p.getAsObject()->getArray("rules");
  REQUIRE(replayed_rules);
  uint64_t routed = 0;
  for (const auto &rule : *replayed_rules)
    routed += static_cast<uint64_t>(rule.getAsObject()->getInteger("allocations").getValueOr(0));
  CHECK(routed >= 40000); // the nodes, at least
  // advise of the prediction keeps them, as the replay's, not the recording's.
  std::string predicted = dir + "/predicted.json", kept_rules = dir + "/kept.rules";
  std::ofstream(predicted) << llvm::formatv("{0}", p).str();
  RunResult kept = run({memlayout_bin(), "advise", predicted, "-o", kept_rules});
  CHECK(kept.exit_code() == 0);
  CHECK(read_file(kept_rules).find("# applied by the replay: routed") != std::string::npos);
  // diff against the prediction says it is one, and whose rules it lists.
  RunResult against = run({memlayout_bin(), "diff", before, predicted});
  REQUIRE(against.exit_code() == 0);
  CHECK(against.out.find("B: " + predicted + " (replay's prediction;") != std::string::npos);
  CHECK(against.out.find("Rules the replay applied in B:") != std::string::npos);
  RunResult against_json = run({memlayout_bin(), "diff", before, predicted, "--format", "json"});
  auto dj = llvm::json::parse(against_json.out);
  REQUIRE(bool(dj));
  CHECK(dj->getAsObject()->getObject("b")->getString("rules_from").getValueOr("") == "replay");
  CHECK_FALSE(dj->getAsObject()->getObject("a")->get("rules_from"));
  // A report given where the trace belongs says what to give instead.
  std::string saved = dir + "/before.json";
  std::ofstream(saved) << llvm::formatv("{0}", b).str();
  RunResult wrong = run({memlayout_bin(), "replay", saved, "--rules", rules});
  CHECK(wrong.exit_code() == 2);
  CHECK(wrong.err.find("is a report (JSON), not a trace") != std::string::npos);
  // A report whose words hold a newline (crafted, or damaged) must not put
  // a line into the rules file that reads back as a rule.
  llvm::json::Value crafted = b;
  auto *first = (*crafted.getAsObject()->getArray("findings"))[0].getAsObject();
  (*first)["message"] = "fine\nfunction=evil,pool=evil";
  std::string crafted_path = dir + "/crafted.json", crafted_rules = dir + "/crafted.rules";
  std::ofstream(crafted_path) << llvm::formatv("{0}", crafted).str();
  RunResult adv_crafted = run({memlayout_bin(), "advise", crafted_path, "-o", crafted_rules});
  CHECK(adv_crafted.exit_code() == 0);
  std::string written = read_file(crafted_rules);
  CHECK(written.find("\nfunction=evil") == std::string::npos);
  CHECK(written.find("fine function=evil,pool=evil") != std::string::npos); // kept, as a comment
  // Against another allocator than the trace's, the report names that one.
  llvm::json::Value glibc = json_of({memlayout_bin(), "replay", before, "--rules", rules,
                                     "--allocator", "native", "--format", "json"});
  CHECK(glibc.getAsObject()->getString("allocator").getValueOr("") == "native");

  // 6. diff shows the finding resolved.
  RunResult d = run({memlayout_bin(), "diff", before, after, "--format", "json"});
  INFO("diff stderr: " << d.err);
  REQUIRE(d.exit_code() == 0);
  CHECK(d.out.find("set_underutilization") != std::string::npos);
}

TEST_CASE("segregate.replay_of_threads_keeps_the_main_heap", "[segregate]") {
  // The buckets are made by the main thread before it starts two workers.
  // The replay worker starts its threads first, and glibc takes each one's
  // DTV from the main heap: unless the worker pads it back, the buckets land
  // 32 bytes off, and the replay's straddle is the opposite of the recording's.
  std::string dir = work_dir("segregate_replay_threads");
  std::string trace = dir + "/t.trace", rules = dir + "/none.rules";
  std::ofstream(rules) << "# no rule: the replay must give the recorded layout\n";
  RunResult rec = record({"-o", trace}, {program("bucket_table"), "2", "4000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value recorded = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  llvm::json::Value replayed =
      json_of({memlayout_bin(), "replay", trace, "--rules", rules, "--format", "json"});
  for (const char *fn : {"main", "worker"}) {
    INFO(fn);
    const auto *a = group_by_site(*recorded.getAsObject(), fn);
    const auto *b = group_by_site(*replayed.getAsObject(), fn);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->getInteger("objects") == b->getInteger("objects"));
    CHECK(std::abs(*a->getNumber("straddle_fraction") - *b->getNumber("straddle_fraction")) < 0.02);
    CHECK(std::abs(*a->getNumber("lines_per_object") - *b->getNumber("lines_per_object")) < 0.02);
  }
}

// Threads that ended before the analysed moment end in the replay where they
// ended: their caches go back to the allocator, and the threads after them
// take over their arenas, as in the program. The worker kept every thread to
// the end, and the later waves' blocks landed in arenas of their own.
TEST_CASE("segregate.replay_ends_threads_where_they_ended", "[segregate]") {
  std::string dir = work_dir("segregate_replay_waves");
  std::string trace = dir + "/w.trace", rules = dir + "/none.rules";
  std::ofstream(rules) << "# no rule: the replay must give the recorded layout\n";
  // One worker a wave: which of two racing workers takes which arena is the
  // program's chance, not the replay's to repeat.
  RunResult rec = record({"-o", trace}, {program("thread_waves"), "3", "1", "3000"});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == "4500 blocks kept\n");
  llvm::json::Value recorded = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  llvm::json::Value replayed =
      json_of({memlayout_bin(), "replay", trace, "--rules", rules, "--format", "json"});
  auto waves = [](const llvm::json::Value &report) {
    std::map<int64_t, const llvm::json::Object *> by_class;
    for (const auto &g : *report.getAsObject()->getArray("groups")) {
      const auto *o = g.getAsObject();
      if (o->getObject("site")->getString("function").getValueOr("") == "wave_worker")
        by_class[o->getInteger("size_class").getValueOr(0)] = o;
    }
    return by_class;
  };
  auto a = waves(recorded), b = waves(replayed);
  REQUIRE(a.size() >= 2);
  REQUIRE(a.size() == b.size());
  for (const auto &[size_class, ga] : a) {
    INFO("size class " << size_class);
    REQUIRE(b.count(size_class));
    const auto *gb = b.at(size_class);
    CHECK(ga->getInteger("objects") == gb->getInteger("objects"));
    CHECK(ga->getInteger("pages_4k") == gb->getInteger("pages_4k"));
    CHECK(ga->getNumber("straddle_fraction") == gb->getNumber("straddle_fraction"));
    CHECK(l1_fraction(*ga) == l1_fraction(*gb));
  }
}

// Replaying a trace that was recorded under rules starts from the program's
// allocator and applies only the rules given: it said nothing of that, and
// named the groups after the recording's pools (their tags), over a layout
// those pools did not make, with findings that asked for the rules in force.
TEST_CASE("segregate.replay_of_a_trace_recorded_under_rules_says_so", "[segregate]") {
  std::string dir = work_dir("segregate_replay_recorded_rules");
  std::string trace = dir + "/pooled.trace";
  RunResult rec = record({"-o", trace, "--segregate", "function=mlr_new_descriptor,pool=descs"},
                         {program("node_descriptor"), "3000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value recorded = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  CHECK(group_by_name(*recorded.getAsObject(), "descs"));
  RunResult replayed = run({memlayout_bin(), "replay", trace, "--segregate",
                            "function=no_such_function,pool=x", "--format", "json"});
  REQUIRE(replayed.exit_code() == 0);
  CHECK(replayed.err.find("was recorded under 1 rule (function=mlr_new_descriptor,pool=descs)") !=
        std::string::npos);
  auto v = llvm::json::parse(replayed.out);
  REQUIRE(bool(v));
  const auto *report = v->getAsObject();
  CHECK_FALSE(group_by_name(*report, "descs"));
  CHECK(group_by_site(*report, "mlr_new_descriptor"));
  bool noted = false;
  if (const auto *notes = report->getArray("notes"))
    for (const auto &n : *notes)
      noted = noted || n.getAsString().getValueOr("").contains("was recorded under 1 rule");
  CHECK(noted);
}

// A site the report finds through a wrapper that only the recorded stacks
// show (a program without debug information, as Debian's redis-server with
// zmalloc): `run` reads no trace and routes it only where the wrapper is
// declared. replay predicted that it routed all of it.
TEST_CASE("segregate.replay_routes_through_trace_wrappers_only_when_declared", "[segregate]") {
  std::string dir = work_dir("segregate_replay_trace_wrappers");
  std::string trace = dir + "/t.trace";
  const std::string prog = program("nodebug_wrapper"), n = "3000";
  RunResult rec = record({"-o", trace}, {prog, n});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value rep = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *conns = group_by_site(*rep.getAsObject(), "new_conn");
  REQUIRE(conns);
  CHECK(conns->getInteger("objects").getValueOr(-1) == 3000);

  auto replay_routed = [&](const std::vector<std::string> &extra, std::string *err) {
    std::vector<std::string> args{
        memlayout_bin(), "replay", trace, "--segregate", "function=new_conn,pool=conns",
        "--format",      "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = run(args);
    *err = r.err;
    auto v = llvm::json::parse(r.out);
    if (r.exit_code() != 0 || !v)
      return int64_t{-1};
    const auto *rules = v->getAsObject()->getArray("rules");
    return rules && rules->size() == 1
               ? (*rules)[0].getAsObject()->getInteger("allocations").getValueOr(-1)
               : int64_t{-1};
  };
  std::string err;
  CHECK(replay_routed({}, &err) == 0);
  INFO(err);
  CHECK(err.find("the report finds 3000 more") != std::string::npos);
  CHECK(err.find("through xalloc") != std::string::npos);
  CHECK(err.find("matched no allocation") == std::string::npos);
  RunResult ran =
      run({memlayout_bin(), "run", "--segregate", "function=new_conn,pool=conns", "--", prog, n});
  CHECK(ran.exit_code() == 0);
  CHECK(ran.err.find("routed nothing") != std::string::npos);
  CHECK(ran.err.find("--wrapper NAME") != std::string::npos);

  // Declared, the wrapper is looked through by both, alike.
  CHECK(replay_routed({"--wrapper", "xalloc"}, &err) == 3000);
  CHECK(err.find("the report finds") == std::string::npos);
  ran = run({memlayout_bin(), "run", "--wrapper", "xalloc", "--segregate",
             "function=new_conn,pool=conns", "--", prog, n});
  INFO(ran.err);
  CHECK(ran.exit_code() == 0);
  CHECK(routed_by(ran.err, "new_conn") == 3000);
}

TEST_CASE("segregate.inline_rule_and_pad", "[segregate]") {
  std::string dir = work_dir("segregate_pad");
  std::string trace = dir + "/pad.trace";
  RunResult rec = record({"-o", trace, "--segregate", "function=mlr_new_descriptor,pad=192"},
                         {program("node_descriptor"), "5000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *desc = group_by_site(*r.getAsObject(), "mlr_new_descriptor");
  REQUIRE(desc);
  CHECK(desc->getInteger("size_class").getValueOr(0) >= 192);
  CHECK(desc->getInteger("requested_size").getValueOr(0) == 64);
}

// A rule that pads or aligns without a pool serves aligned requests from the
// program's allocator: each api's contract must hold there too (pvalloc's
// whole pages: a block of the requested size was overrun by its caller).
TEST_CASE("segregate.aligned_apis_under_pad_and_align", "[segregate]") {
  const std::string rule =
      GENERATE(as<std::string>{}, "function=mlt_alloc_aligned,pad=128",
               "function=mlt_alloc_aligned,align=64", "function=mlt_alloc_aligned,pool=aligned");
  std::string dir = work_dir("segregate_aligned");
  RunResult direct = run({program("alloc_threads"), dir + "/direct.log"});
  REQUIRE(direct.exit_code() == 0);
  RunResult routed = run({memlayout_bin(), "run", "--segregate", rule, "--",
                          program("alloc_threads"), dir + "/routed.log"});
  INFO(rule << "\n" << routed.err);
  CHECK(routed.exit_code() == 0);
  CHECK(routed.out == direct.out);
  CHECK(routed.err.find("rule 1 " + rule) != std::string::npos);
  CHECK(routed.err.find("routed nothing") == std::string::npos);
}

// Members of a class template instantiated with a lambda have no linkage
// name in GCC's debug info: their scopes come from the declaration's
// parents, so a rule naming TaskQueue::push routes what push allocates
// (it matched nothing: the function was known as plain "push").
TEST_CASE("segregate.members_of_a_template_on_a_lambda", "[segregate]") {
  RunResult direct = run({program("task_queue"), "5000"});
  REQUIRE(direct.exit_code() == 0);
  RunResult routed = run({memlayout_bin(), "run", "--segregate", "function=TaskQueue::push,pool=q",
                          "--", program("task_queue"), "5000"});
  INFO(routed.err);
  CHECK(routed.out == direct.out);
  CHECK(routed.err.find("function=TaskQueue::push,pool=q): 5000 allocations") != std::string::npos);
  // Another class's push is not this one.
  RunResult other = run({memlayout_bin(), "run", "--segregate", "function=Other::push,pool=q", "--",
                         program("task_queue"), "5000"});
  CHECK(other.err.find("matches no function") != std::string::npos);
}

TEST_CASE("segregate.bad_rules", "[segregate]") {
  std::string dir = work_dir("segregate_bad");
  std::string rules = dir + "/bad.rules";
  {
    FILE *f = std::fopen(rules.c_str(), "w");
    REQUIRE(f);
    std::fputs("# fine\nfunction=mlr_new_node,pool=nodes\n\nsize=64,pool=x,colour=red\n", f);
    std::fclose(f);
  }
  RunResult r =
      run({memlayout_bin(), "run", "--rules", rules, "--", program("node_descriptor"), "10"});
  CHECK(r.exit_code() == 2);
  CHECK(r.err.find(rules + ":4:16: unknown key 'colour'") != std::string::npos);

  r = run({memlayout_bin(), "record", "--segregate", "function=f,align=3", "--",
           program("node_descriptor"), "10"});
  CHECK(r.exit_code() == 2);
  CHECK(r.err.find("power of two") != std::string::npos);

  // A function that matches nothing: a warning listing close names, and the
  // program still runs.
  r = run({memlayout_bin(), "run", "--segregate", "function=mlr_new_nod,pool=n", "--",
           program("node_descriptor"), "10"});
  CHECK(r.exit_code() == 0);
  CHECK(r.err.find("matches no function") != std::string::npos);
  CHECK(r.err.find("mlr_new_node") != std::string::npos);

  // A directory is not a rules file with no rules, for any command.
  std::string trace = dir + "/nothing.trace";
  REQUIRE(record({"-o", trace}, {"/bin/true"}).exit_code() == 0);
  for (std::vector<std::string> argv :
       {std::vector<std::string>{memlayout_bin(), "run", "--rules", dir, "--", "/bin/true"},
        {memlayout_bin(), "record", "--rules", dir, "--", "/bin/true"},
        {memlayout_bin(), "replay", trace, "--rules", dir}}) {
    r = run(argv);
    INFO(argv[1] << ": " << r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find("cannot read the rules file '" + dir + "': Is a directory") !=
          std::string::npos);
  }
  // A file that never ends is refused at a bound, not read until memory runs out.
  for (const auto &argv :
       {std::vector<std::string>{memlayout_bin(), "run", "--rules", "/dev/zero", "--", "/bin/true"},
        {memlayout_bin(), "replay", trace, "--rules", "/dev/zero"}}) {
    RunOptions quick;
    quick.timeout_s = 20;
    r = run(argv, quick);
    INFO(argv[1] << ": " << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find("the rules file '/dev/zero' is longer than 4 MiB") != std::string::npos);
  }
  // A trace that allocated nothing replays to an empty report.
  r = run({memlayout_bin(), "replay", trace, "--segregate", "size=64,pool=x"});
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(r.out.find("0 operations") != std::string::npos);
}

TEST_CASE("segregate.api_pools_recorded", "[segregate]") {
  // A program that makes its own pools: recorded in both allocator modes,
  // its pool allocations and cross-thread pool frees are in the trace and
  // its groups are named by pool.
  const std::string allocator = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(allocator);
  std::string dir = work_dir("segregate_api_" + allocator);
  std::string trace = dir + "/api.trace";
  RunResult direct = run({program("seg_pools"), "20000"});
  REQUIRE(direct.exit_code() == 0);
  CHECK(direct.out == "99990000 10000\n");
  RunResult rec = record({"-o", trace, "--allocator", allocator}, {program("seg_pools"), "20000"});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  llvm::json::Value v =
      json_of({memlayout_bin(), "report", trace, "--format", "json", "--at", "peak"});
  const llvm::json::Object &r = *v.getAsObject();
  const llvm::json::Object *nodes = nullptr, *descs = nullptr;
  for (const auto &g : *r.getArray("groups")) {
    const auto *o = g.getAsObject();
    if (o->getString("name").getValueOr("") == "nodes")
      nodes = o;
    if (o->getString("name").getValueOr("") == "descriptors")
      descs = o;
  }
  REQUIRE(nodes);
  REQUIRE(descs);
  CHECK(nodes->getInteger("objects").getValueOr(0) == 20000);
  // One call site, two pools: a group for each, named by it.
  for (const char *table : {"table-a", "table-b"}) {
    long long rows = 0;
    for (const auto &g : *r.getArray("groups"))
      if (g.getAsObject()->getString("name").getValueOr("") == table)
        rows += g.getAsObject()->getInteger("objects").getValueOr(0);
    CHECK(rows == 10000);
  }
  CHECK(l1_fraction(*nodes) > 0.9);
  // At the end, the other thread's frees are in: half the nodes are left;
  // the destroyed tables' rows, never freed one by one, are gone with them.
  llvm::json::Value e =
      json_of({memlayout_bin(), "report", trace, "--format", "json", "--at", "end"});
  long long end_nodes = 0, end_rows = 0;
  for (const auto &g : *e.getAsObject()->getArray("groups")) {
    const auto *o = g.getAsObject();
    std::string name(o->getString("name").getValueOr(""));
    if (name == "nodes")
      end_nodes += o->getInteger("objects").getValueOr(0);
    if (name == "table-a" || name == "table-b")
      end_rows += o->getInteger("objects").getValueOr(0);
  }
  CHECK(end_nodes == 10000);
  CHECK(end_rows == 0);
  RunResult dump = run({memlayout_bin(), "dump", trace, "--format", "jsonl"});
  REQUIRE(dump.exit_code() == 0);
  size_t ranges = 0;
  for (size_t at = 0; (at = dump.out.find("\"ev\":\"free_range\"", at)) != std::string::npos; ++at)
    ++ranges;
  CHECK(ranges == 2);
  // A pool object's tag carries its allocation's time: a thread switched
  // out (or due a clock sample) between the two stamped the tag later, and
  // a report at a moment in between grouped the object by its call site.
  Dump events = mlt::dump(trace, false);
  REQUIRE(events.error.empty());
  size_t tags = 0, later = 0;
  std::map<uint64_t, const Event *> last_alloc; // tid -> its last allocation
  for (const Event &ev : events.events) {
    if (ev.ev == "alloc")
      last_alloc[ev.tid] = &ev;
    else if (ev.ev == "tag" && last_alloc.count(ev.tid) && last_alloc[ev.tid]->ptr == ev.ptr) {
      ++tags;
      later += ev.ts_ns != last_alloc[ev.tid]->ts_ns;
    }
  }
  CHECK(tags >= 40000);
  CHECK(later == 0);
}

// Objects rules routed into pools, recorded: grouped by pool and by the
// pool's own classes, as the replay of the same rules groups them. Two
// pools of one site whose classes coincide were one group named by the
// site; a pool's objects were grouped by glibc's classes of the requests.
TEST_CASE("segregate.recorded_rule_pools_group_by_pool_and_its_classes", "[segregate]") {
  std::string dir = work_dir("segregate_rule_pools");
  auto groups_of = [](const llvm::json::Value &v) {
    std::map<std::string, std::vector<std::pair<long long, long long>>> out; // name -> (class, n)
    for (const auto &g : *v.getAsObject()->getArray("groups")) {
      const auto *o = g.getAsObject();
      out[std::string(o->getString("name").getValueOr(""))].emplace_back(
          o->getInteger("size_class").getValueOr(0), o->getInteger("objects").getValueOr(0));
    }
    for (auto &[name, classes] : out)
      std::sort(classes.begin(), classes.end());
    return out;
  };
  RunResult direct = run({program("two_classes"), "4000", "40", "56"});
  REQUIRE(direct.exit_code() == 0);
  // Two pools, both in a 64-byte class under jemalloc.
  std::string two = dir + "/two.trace";
  RunResult rec = record({"-o", two, "--allocator", "jemalloc", "--segregate",
                          "function=make_record,size=33-48,pool=small,align=64", "--segregate",
                          "function=make_record,size=49-64,pool=big"},
                         {program("two_classes"), "4000", "40", "56"});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  auto recorded =
      groups_of(json_of({memlayout_bin(), "report", two, "--format", "json", "--at", "peak"}));
  using Classes = std::vector<std::pair<long long, long long>>;
  CHECK(recorded["small"] == Classes{{64, 2000}});
  CHECK(recorded["big"] == Classes{{64, 2000}});
  for (const auto &[name, classes] : recorded)
    CHECK(name.rfind("make_record", 0) != 0); // no group left named by the site
  // One pool, native: the pool's classes (32 and 64), not glibc's (48).
  RunResult plain = run({program("two_classes"), "4000"});
  std::string one = dir + "/one.trace";
  REQUIRE(record({"-o", one, "--segregate", "function=make_record,size=1-64,pool=one,align=32"},
                 {program("two_classes"), "4000"})
              .exit_code() == 0);
  auto pooled = groups_of(json_of({memlayout_bin(), "report", one, "--format", "json"}));
  CHECK(pooled["one"] == Classes{{32, 2000}, {64, 2000}});
  // What the replay of the plain run predicts for the same rule.
  std::string alone = dir + "/alone.trace";
  REQUIRE(record({"-o", alone}, {program("two_classes"), "4000"}).exit_code() == 0);
  auto predicted =
      groups_of(json_of({memlayout_bin(), "replay", alone, "--segregate",
                         "function=make_record,size=1-64,pool=one,align=32", "--format", "json"}));
  CHECK(predicted["one"] == pooled["one"]);
  CHECK(plain.exit_code() == 0);
}

TEST_CASE("segregate.file_rule", "[segregate]") {
  // A file:line rule resolves through the program's line tables to the
  // function with code there; a file with no code warns and matches nothing.
  std::string dir = work_dir("segregate_file");
  std::string trace = dir + "/file.trace";
  RunResult rec = record({"-o", trace, "--allocator", "jemalloc", "--segregate",
                          "file=node_descriptor.c:24,pool=nodes"},
                         {program("node_descriptor"), "5000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  bool named = false;
  for (const auto &g : *r.getAsObject()->getArray("groups"))
    named = named || g.getAsObject()->getString("name").getValueOr("") == "nodes";
  CHECK(named);

  RunResult none = run({memlayout_bin(), "run", "--segregate", "file=no_such_file.c,pool=x", "--",
                        program("node_descriptor"), "10"});
  CHECK(none.exit_code() == 0);
  CHECK(none.err.find("matches nothing") != std::string::npos);
}

// A program killed by a signal still reports what its rules routed, under
// record and under run, and dies as it would have.
TEST_CASE("segregate.counts_after_a_fatal_signal", "[segregate]") {
  std::string dir = work_dir("segregate_signal");
  for (const char *command : {"record", "run"}) {
    std::vector<std::string> argv = {memlayout_bin(), command};
    if (std::string(command) == "record")
      argv.insert(argv.end(), {"-o", dir + "/t.trace"});
    argv.insert(argv.end(), {"--segregate", "function=mlx_exit_alloc,pool=x", "--",
                             program("exit_paths"), "term", dir + "/log"});
    RunResult r = run(argv);
    INFO(command << ": " << r.err);
    CHECK(r.term_signal() == SIGTERM); // memlayout dies as the program did
    CHECK(r.err.find("rule 1 function=mlx_exit_alloc,pool=x (--segregate "
                     "function=mlx_exit_alloc,pool=x): ") != std::string::npos);
    CHECK(r.err.find("wrote no rule counts") == std::string::npos);
  }
}

// Key destructors that allocate through a routed site in each of glibc's
// four rounds, the key created after the pools started (main's first block
// is routed): after jemalloc let go of the thread it serves no pool, and the
// blocks came from outside the pool; the program's free of them aborted in
// glibc (every run). The program's own allocator serves those now, as it
// would without the rule. 20 runs: a thread whose first pool allocation came
// in a destructor crashed jemalloc in 7 of 20 while its cleanup was put off
// to glibc's last round (alloc/jemalloc/tsd_key.cpp).
TEST_CASE("segregate.key_destructors_in_the_last_round_run_unchanged", "[segregate]") {
  std::string dir = work_dir("segregate_key_rounds");
  RunResult direct = run({program("key_rounds"), "16"});
  REQUIRE(direct.exit_code() == 0);
  REQUIRE(direct.out == "last-round destructors: 16 of 16\n");
  for (int round = 0; round < 5; ++round)
    for (const char *command : {"run", "record"}) {
      std::vector<std::string> argv = {memlayout_bin(), command};
      if (std::string(command) == "record")
        argv.insert(argv.end(), {"-o", dir + "/k.trace"});
      argv.insert(argv.end(), {"--segregate", "function=again,pool=nodes", "--segregate",
                               "function=main,pool=nodes", "--", program("key_rounds"), "16"});
      RunResult r = run(argv);
      INFO(command << " round " << round << ": " << r.err);
      CHECK(r.exit_code() == 0);
      CHECK(r.out == direct.out);
      CHECK(r.err.find("rule 1 function=again,pool=nodes (--segregate "
                       "function=again,pool=nodes): ") != std::string::npos);
    }
}

// A program with a small alternate signal stack (4 KiB, the kernel's minimum
// is about 3.3) dies of SIGTERM: the recorder's handler, which runs on that
// stack, overflowed it finishing the trace, and the program died of SIGSEGV.
// Without room there it finishes the trace on a stack of its own (it left
// the trace without the events it held: every Rust program's crash).
TEST_CASE("segregate.a_small_alternate_stack_dies_of_its_signal", "[segregate]") {
  std::string dir = work_dir("small_altstack");
  RunResult direct = run({program("exit_paths"), "term_altstack", dir + "/log"});
  REQUIRE(direct.term_signal() == SIGTERM);
  for (int round = 0; round < 3; ++round) {
    RunResult rec =
        record({"-o", dir + "/t.trace"}, {program("exit_paths"), "term_altstack", dir + "/log"});
    INFO(rec.err);
    CHECK(rec.term_signal() == SIGTERM);
    Dump d = dump(dir + "/t.trace");
    REQUIRE(d.error == "");
    REQUIRE(d.end);
    CHECK(d.end->getString("reason").getValueOr("") == "signal");
    CHECK(d.end_int("exit_status") == SIGTERM);
    std::vector<std::string> missing = missing_from_dump(read_log(dir + "/log"), d);
    INFO(join(missing));
    CHECK(missing.empty());
  }
}

// A program killed by SIGKILL writes no counts: run says so, naming the
// signal (it used to guess "killed (SIGKILL), or it replaced itself by
// exec" whatever the program died of).
TEST_CASE("segregate.no_counts_after_sigkill_names_the_signal", "[segregate]") {
  std::string dir = work_dir("segregate_sigkill");
  RunResult r = run({memlayout_bin(), "run", "--segregate", "function=mlx_exit_alloc,pool=x", "--",
                     program("exit_paths"), "kill", dir + "/log"});
  INFO(r.err);
  CHECK(r.term_signal() == SIGKILL);
  CHECK(r.err.find("the program wrote no rule counts: it died of SIGKILL") != std::string::npos);
  CHECK(r.err.find("exec") == std::string::npos);
}

// A program that ends by the raw exit_group system call (Go's os.Exit) runs
// no exit handler: run said it had replaced itself by exec.
TEST_CASE("segregate.no_counts_after_a_raw_exit_group", "[segregate]") {
  std::string dir = work_dir("segregate_exit_group");
  RunResult r = run({memlayout_bin(), "run", "--segregate", "function=mlx_exit_alloc,pool=x", "--",
                     program("exit_paths"), "exit_group", dir + "/log"});
  INFO(r.err);
  CHECK(r.exit_code() == 8);
  CHECK(r.err.find("the program wrote no rule counts: it ended by a raw exit_group system call "
                   "(as Go's os.Exit does)") != std::string::npos);
  CHECK(r.err.find("exec") == std::string::npos);
}

// A program a script starts is not the script: run says the rules did not
// reach it, and takes them there with --follow-children.
TEST_CASE("segregate.run_through_a_shell", "[segregate]") {
  std::string prog = program("node_descriptor");
  std::string name = prog.substr(prog.rfind('/') + 1);
  std::vector<std::string> shell = {"/bin/sh", "-c", "'" + prog + "' 100; true"};
  std::vector<std::string> argv = {memlayout_bin(), "run", "--segregate",
                                   "function=mlr_new_node,pool=n", "--"};
  argv.insert(argv.end(), shell.begin(), shell.end());
  RunResult r = run(argv);
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(r.err.find("memlayout: the command started 1 program that the rules did not reach: " +
                   name + " (--follow-children takes them there)") != std::string::npos);

  argv.insert(argv.begin() + 2, "--follow-children");
  RunResult followed = run(argv);
  INFO(followed.err);
  CHECK(followed.exit_code() == 0);
  CHECK(followed.err.find("did not reach") == std::string::npos);
  CHECK(followed.err.find("rule 1 function=mlr_new_node,pool=n (--segregate "
                          "function=mlr_new_node,pool=n): 100 allocations") != std::string::npos);
}

// A plugin dlopen'ed by a relative path ("./libplugin.so", as the loader then
// names it) is labelled for the rules like one opened by its full path.
TEST_CASE("segregate.plugin_opened_by_a_relative_path", "[segregate]") {
  std::string dir = work_dir("segregate_relative_plugin");
  const std::string plugin = plugin_path();
  const std::string plugin_dir = plugin.substr(0, plugin.rfind('/'));
  const std::string relative = "./" + plugin.substr(plugin.rfind('/') + 1);
  RunOptions in_plugin_dir;
  in_plugin_dir.cwd = plugin_dir;
  RunResult r = run({memlayout_bin(), "run", "--segregate", "function=mlp_plugin_make,pool=p", "--",
                     program("dlopen_main"), relative, dir + "/log"},
                    in_plugin_dir);
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(routed_by(r.err, "mlp_plugin_make") == 16);
}

// A program that loads and closes a plugin again and again: each dlopen
// labelled every module's code for the rules afresh, reading all their
// symbols (15-20 ms a dlopen, 70x its cost); modules labelled before keep
// their labels, and the plugin, reloaded, is still routed every time.
TEST_CASE("segregate.plugin_loaded_again_and_again", "[segregate]") {
  std::string dir = work_dir("segregate_plugin_reloads");
  RunResult r = run({memlayout_bin(), "run", "--segregate", "function=mlp_plugin_make,pool=p", "--",
                     program("dlopen_main"), plugin_path(), dir + "/log", "reload=200"});
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(r.out == "plugin: 16 records of 112 bytes\n");
  CHECK(routed_by(r.err, "mlp_plugin_make") == 216);

  // Threads (more than the CPUs) look labels up while the reloads replace
  // the tables they read, and replaced tables are unmapped.
  RunResult busy =
      run({memlayout_bin(), "run", "--segregate", "function=mlp_main_make,pool=m", "--segregate",
           "function=mlp_plugin_make,pool=p", "--", program("dlopen_main"), plugin_path(),
           dir + "/log2", "reload=300", "allocators=4"});
  INFO(busy.err);
  REQUIRE(busy.exit_code() == 0);
  size_t at = busy.out.find("mlp_main_make: ");
  REQUIRE(at != std::string::npos);
  long made = std::stol(busy.out.substr(at + 15));
  CHECK(made > 0);
  CHECK(routed_by(busy.err, "mlp_main_make") == made);
  CHECK(routed_by(busy.err, "mlp_plugin_make") == 316);
}

namespace {

// The findings of a JSON report about the group of site `fn`, by kind.
std::vector<std::string> kinds_about(const llvm::json::Object &report, const std::string &fn) {
  std::vector<std::string> kinds;
  const auto *g = group_by_site(report, fn);
  if (!g)
    return kinds;
  int64_t id = g->getInteger("id").getValueOr(-1);
  for (const auto &f : *report.getArray("findings")) {
    const auto *o = f.getAsObject();
    for (const auto &gid : *o->getArray("groups"))
      if (gid.getAsInteger().getValueOr(-2) == id)
        kinds.push_back(o->getString("kind").getValueOr("").str());
  }
  return kinds;
}

bool contains(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

} // namespace

// A user's sweep: the rules advise wrote fixed their findings and made new
// ones, which replay showed. (a) 256-byte buckets with a hot first line,
// straddling under glibc: align=64 in a pool of the 256-byte class put
// them on a quarter of the L1 sets. (b) 101-byte notes at one line offset,
// spread over 4x their pages: a pool's 112-byte class put half of them
// across a line. The rules now carry what keeps both away, and advise
// checks them by a replay before writing them.
// A large program (node: 36 wrappers, 74 rules) got a rules file that its
// own replay and `run` refused whole (at most 64 rules, 32 wrapper
// declarations): advise writes the most severe that fit and says which not.
TEST_CASE("segregate.advise_keeps_within_what_run_takes", "[segregate]") {
  std::string dir = work_dir("segregate_advise_limits");
  std::string trace = dir + "/t.trace", big = dir + "/big.json", rules = dir + "/rules.txt";
  REQUIRE(record({"-o", trace}, {program("fix_layouts"), "notes", "4000"}).exit_code() == 0);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  llvm::json::Object &r = *v.getAsObject();
  // One finding with a rule and its group, cloned into 100 sites of their
  // own; the first 40 found through a wrapper each.
  const llvm::json::Object *finding = nullptr;
  for (const auto &f : *r.getArray("findings"))
    if (!f.getAsObject()->getString("rule").getValueOr("").empty() && !finding)
      finding = f.getAsObject();
  REQUIRE(finding);
  int64_t gid = (*finding->getArray("groups"))[0].getAsInteger().getValueOr(-1);
  const llvm::json::Object *group = nullptr;
  for (const auto &g : *r.getArray("groups"))
    if (g.getAsObject()->getInteger("id").getValueOr(-2) == gid)
      group = g.getAsObject();
  REQUIRE(group);
  llvm::json::Array groups, findings;
  for (int i = 0; i < 100; ++i) {
    std::string fn = "site_" + std::to_string(i);
    llvm::json::Object g = *group;
    g["id"] = 1000 + i;
    g["name"] = fn + " (t.c:" + std::to_string(i + 1) + ")";
    llvm::json::Object site = *g.getObject("site");
    site["function"] = fn;
    site["line"] = i + 1;
    g["site"] = std::move(site);
    llvm::json::Array through;
    if (i < 40)
      through.push_back(llvm::json::Object{{"function", "wrap_" + std::to_string(i)},
                                           {"decided", "trace"},
                                           {"evidence", "returns memory to its callers"}});
    g["looked_through"] = std::move(through);
    groups.push_back(std::move(g));
    llvm::json::Object f = *finding;
    f["groups"] = llvm::json::Array{1000 + i};
    f["rule"] = "function=" + fn + ",pool=p" + std::to_string(i) + ",align=64";
    findings.push_back(std::move(f));
  }
  r["groups"] = std::move(groups);
  r["findings"] = std::move(findings);
  std::ofstream(big) << llvm::formatv("{0}", v).str();
  RunResult adv = run({memlayout_bin(), "advise", big, "-o", rules});
  INFO(adv.err);
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(rules);
  size_t rule_lines = 0, wrapper_lines = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    rule_lines += line.rfind("function=", 0) == 0;
    wrapper_lines += line.rfind("wrapper=", 0) == 0;
  }
  CHECK(rule_lines == 64);
  CHECK(wrapper_lines == 32);
  CHECK(adv.err.find("past the 32 declarations `run` takes") != std::string::npos);
  CHECK(adv.err.find("`run` takes at most 64 rules") != std::string::npos);
  RunResult ran = run({memlayout_bin(), "run", "--rules", rules, "--", "/bin/true"});
  INFO(ran.err);
  CHECK(ran.exit_code() == 0);
}

TEST_CASE("segregate.advised_rules_make_no_new_finding", "[segregate]") {
  struct Case {
    const char *mode, *site;
    std::vector<std::string> hot; // --hot for report, advise and replay
    const char *fixed, *avoided;  // the finding fixed, the one the fix must not make
    const char *rule_has;
  };
  const Case c =
      GENERATE(Case{"buckets",
                    "new_bucket",
                    {"--hot", "new_bucket=64"},
                    "line_straddle",
                    "set_underutilization",
                    "pad=320"},
               Case{"notes", "new_note", {}, "page_spread", "line_straddle", "align=64"});
  INFO(c.mode);
  std::string dir = work_dir(std::string("segregate_no_new_finding_") + c.mode);
  std::string trace = dir + "/t.trace", rules = dir + "/rules.txt";
  RunResult rec = record({"-o", trace}, {program("fix_layouts"), c.mode, "4000"});
  REQUIRE(rec.exit_code() == 0);
  auto with_hot = [&](std::vector<std::string> argv) {
    argv.insert(argv.end(), c.hot.begin(), c.hot.end());
    return argv;
  };
  llvm::json::Value before =
      json_of(with_hot({memlayout_bin(), "report", trace, "--format", "json"}));
  std::vector<std::string> had = kinds_about(*before.getAsObject(), c.site);
  REQUIRE(contains(had, c.fixed));
  REQUIRE_FALSE(contains(had, c.avoided));

  RunResult adv = run(with_hot({memlayout_bin(), "advise", trace, "-o", rules}));
  INFO("advise stderr: " << adv.err);
  REQUIRE(adv.exit_code() == 0);
  std::string text = read_file(rules);
  INFO(text);
  std::string rule_line;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(std::string("function=") + c.site + ",", 0) == 0)
      rule_line = line;
  REQUIRE(!rule_line.empty());
  CHECK(rule_line.find(c.rule_has) != std::string::npos);
  CHECK(rule_line.find("align=64") != std::string::npos);
  // The replay advise ran found nothing the rules would make.
  CHECK(adv.err.find("warning") == std::string::npos);

  llvm::json::Value after =
      json_of(with_hot({memlayout_bin(), "replay", trace, "--rules", rules, "--format", "json"}));
  std::vector<std::string> now = kinds_about(*after.getAsObject(), c.site);
  INFO("after: " << now.size() << " findings");
  CHECK_FALSE(contains(now, c.fixed));
  CHECK_FALSE(contains(now, c.avoided));
  CHECK_FALSE(contains(now, "line_straddle"));
  CHECK_FALSE(contains(now, "set_underutilization"));
}

// jemalloc serves aligned_alloc(4096, 256) from its 4096-byte class, so the
// stride equals the class: the report blamed the class ("no padding gives
// ... or make them smaller than a page") where the program's alignment is
// the cause, as the same trace under glibc says.
TEST_CASE("segregate.page_aligned_buffers_blame_the_alignment", "[segregate]") {
  const std::string allocator = GENERATE(as<std::string>{}, "jemalloc", "native");
  INFO(allocator);
  std::string dir = work_dir("segregate_aligned_diagnosis_" + allocator);
  std::string trace = dir + "/t.trace";
  RunResult rec =
      record({"-o", trace, "--allocator", allocator}, {program("fix_layouts"), "aligned", "100"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value r = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *g = group_by_site(*r.getAsObject(), "new_iobuf");
  REQUIRE(g);
  CHECK(l1_fraction(*g) < 0.1);
  bool seen = false;
  for (const auto &f : *r.getAsObject()->getArray("findings")) {
    const auto *o = f.getAsObject();
    if (o->getString("kind").getValueOr("") != "set_underutilization")
      continue;
    seen = true;
    std::string fix = o->getString("fix").getValueOr("").str();
    INFO(fix);
    CHECK(fix.find("the program asks for these objects aligned") != std::string::npos);
    CHECK(fix.find("smaller than a page") == std::string::npos);
    CHECK(o->getString("rule").getValueOr("").empty());
  }
  CHECK(seen);
}

// A string buffer born in sb_init and grown by realloc in sb_grow: the report
// groups it under sb_grow, so a rule naming sb_grow must route it there, live
// as in the replay, and its bytes must move with it.
TEST_CASE("segregate.buffers_grown_by_realloc_move_to_the_pool", "[segregate]") {
  std::string dir = work_dir("segregate_realloc");
  std::string trace = dir + "/sb.trace", under = dir + "/under.trace";
  RunResult direct = run({program("string_builder"), "20000"});
  REQUIRE(direct.exit_code() == 0);
  RunResult rec = record({"-o", trace}, {program("string_builder"), "20000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value b = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const auto *grown = group_by_site(*b.getAsObject(), "sb_grow");
  REQUIRE(grown); // where they were last grown, not where they began

  for (const char *allocator : {"native", "jemalloc"}) {
    INFO("allocator " << allocator);
    RunResult ran =
        run({memlayout_bin(), "run", "--allocator", allocator, "--segregate",
             "function=sb_grow,pool=strings", "--", program("string_builder"), "20000"});
    INFO("run stderr: " << ran.err);
    CHECK(ran.exit_code() == 0);
    CHECK(ran.out == direct.out);                  // every buffer's text came along
    CHECK(routed_by(ran.err, "sb_grow") == 20000); // each buffer, at its first growth there
  }
  llvm::json::Value p = json_of({memlayout_bin(), "replay", trace, "--segregate",
                                 "function=sb_grow,pool=strings", "--format", "json"});
  const auto *replayed = p.getAsObject()->getArray("rules");
  REQUIRE(replayed);
  REQUIRE(replayed->size() == 1);
  CHECK((*replayed)[0].getAsObject()->getInteger("allocations").getValueOr(-1) == 20000);

  // Recorded under the rule: the buffers are the pool's, off the records' lines.
  rec = record({"-o", under, "--segregate", "function=sb_grow,pool=strings"},
               {program("string_builder"), "20000"});
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == direct.out);
  llvm::json::Value a = json_of({memlayout_bin(), "report", under, "--format", "json"});
  uint64_t pooled = 0;
  for (const auto &g : *a.getAsObject()->getArray("groups")) {
    const auto *o = g.getAsObject();
    if (o->getString("name").getValueOr("") == "strings")
      pooled += static_cast<uint64_t>(o->getInteger("objects").getValueOr(0));
  }
  CHECK(pooled == 20000);
}

// A program that caps its address space after it starts: pools are made at
// their rule's first allocation, within an eighth of the cap, so the program
// gets what it would without the rules (before, 64 GiB reserved at start
// left it none: every allocation failed; under jemalloc it crashed).
TEST_CASE("segregate.a_program_that_caps_its_address_space", "[segregate]") {
  RunResult direct = run({program("rlimit_as"), "512"});
  REQUIRE(direct.exit_code() == 0);
  REQUIRE(direct.out == "64 buffers, 1000 records\n");
  for (const char *allocator : {"native", "jemalloc"}) {
    INFO("allocator " << allocator);
    RunResult ran = run({memlayout_bin(), "run", "--allocator", allocator, "--segregate",
                         "size=100,pool=records", "--", program("rlimit_as"), "512"});
    INFO("run stderr: " << ran.err);
    CHECK(ran.exit_code() == 0);
    CHECK(ran.out == direct.out);
    CHECK(ran.err.find("size=100,pool=records): 1000 allocations") != std::string::npos);
    CHECK(ran.err.find("cannot create pool") == std::string::npos);
  }
  // Recorded, after allocating before the cap: the recorder's tables grow
  // as they fill (its stack table reserved 1 GiB at the first allocation,
  // and every allocation after a 128 MiB cap failed).
  RunResult capped = run({program("rlimit_as"), "128", "5000"});
  REQUIRE(capped.out == "64 buffers, 1000 records\n");
  std::string trace = work_dir("segregate_rlimit_as") + "/t.trace";
  RunResult rec = record({"-o", trace}, {program("rlimit_as"), "128", "5000"});
  INFO(rec.err);
  CHECK(rec.exit_code() == 0);
  CHECK(rec.out == capped.out);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  CHECK(group_by_site(*v.getAsObject(), "main"));
}
