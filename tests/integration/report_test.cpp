// `memlayout report` on a recorded program: the BST study's int-lf case found
// under jemalloc, with the fix, and not under glibc; the JSON contract; bad
// input.
#include "report_json_support.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <fstream>
#include <sstream>

using namespace mlt;

namespace {

llvm::json::Value report_json(const std::string &trace, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {memlayout_bin(), "report", trace, "--format", "json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return json_of(argv);
}

bool has_finding(const llvm::json::Object &report, const std::string &kind, int64_t group) {
  for (const auto &f : *report.getArray("findings")) {
    const auto *o = f.getAsObject();
    if (o->getString("kind").getValueOr("") != kind)
      continue;
    for (const auto &g : *o->getArray("groups"))
      if (g.getAsInteger() == group)
        return true;
  }
  return false;
}

} // namespace

TEST_CASE("report.int_lf", "[report]") {
  const std::string allocator = GENERATE(as<std::string>{}, "jemalloc", "native");
  CAPTURE(allocator);
  std::string dir = work_dir("report_intlf_" + allocator);
  std::string trace = dir + "/out.trace";
  RunResult rec =
      record({"-o", trace, "--allocator", allocator}, {program("node_descriptor"), "60000"});
  REQUIRE(rec.exit_code() == 0);
  llvm::json::Value v = report_json(trace);
  const llvm::json::Object &r = *v.getAsObject();
  CHECK(r.getString("schema").getValueOr("") == "memlayout.report/1");
  CHECK(r.getString("at").getValueOr("") == "peak");
  const auto *levels = r.getObject("cache")->getArray("levels");
  REQUIRE(levels->size() >= 2);
  for (const auto &l : *levels) {
    const auto *o = l.getAsObject();
    CHECK(o->getInteger("sets").getValueOr(0) > 0);
    CHECK(o->getInteger("line_size").getValueOr(0) == 64);
    CHECK(!o->getString("bits").getValueOr("").empty());
  }
  const auto *nodes = group_by_site(r, "mlr_new_node");
  const auto *descs = group_by_site(r, "mlr_new_descriptor");
  REQUIRE(nodes);
  REQUIRE(descs);
  CHECK(nodes->getInteger("objects").getValueOr(0) == 60000);
  CHECK(nodes->getInteger("requested_size").getValueOr(0) == 64);
  for (const char *key :
       {"id", "size_class", "bytes", "lines_per_object", "straddle_fraction", "pages_4k",
        "pages_min", "regions_2m", "cross_thread_lines", "lines_total"})
    CHECK(nodes->get(key));
  double l1 = nodes->getObject("set_effective_fraction")->getNumber("L1").getValueOr(-1);
  int64_t node_id = nodes->getInteger("id").getValueOr(-1);
  if (allocator == "jemalloc") {
    // The study: nodes on every other line, half of every level's sets.
    CHECK(nodes->getInteger("size_class").getValueOr(0) == 64);
    CHECK(l1 == Approx(0.5).margin(0.05));
    CHECK(has_finding(r, "set_underutilization", node_id));
    bool fix_segregates = false;
    for (const auto &f : *r.getArray("findings")) {
      const auto *o = f.getAsObject();
      if (o->getString("kind").getValueOr("") == "set_underutilization")
        fix_segregates |= o->getString("fix").getValueOr("").find("function=mlr_new_node,pool=") !=
                          std::string::npos;
    }
    CHECK(fix_segregates);
  } else {
    // glibc puts 16 bytes of header between them: all sets in use.
    CHECK(l1 == Approx(1.0).margin(0.05));
    CHECK_FALSE(has_finding(r, "set_underutilization", node_id));
  }
}

TEST_CASE("report.text_and_options", "[report]") {
  std::string dir = work_dir("report_text");
  std::string trace = dir + "/out.trace";
  REQUIRE(record({"-o", trace, "--allocator", "jemalloc"}, {program("node_descriptor"), "20000"})
              .exit_code() == 0);
  RunResult text = run({memlayout_bin(), "report", trace, "--top", "3"});
  REQUIRE(text.exit_code() == 0);
  // The table's columns line up, the index array's 2 500 lines included.
  {
    std::istringstream lines(run({memlayout_bin(), "report", trace}).out);
    std::string line;
    size_t header_end = std::string::npos, rows = 0;
    while (std::getline(lines, line)) {
      if (line.find("pages/min") != std::string::npos) {
        header_end = line.size();
        continue;
      }
      if (header_end == std::string::npos)
        continue;
      if (line.empty())
        break;
      INFO(line);
      CHECK(line.size() == header_end);
      ++rows;
    }
    CHECK(rows >= 3);
  }
  CHECK(text.out.find("mlr_new_node") != std::string::npos);
  CHECK(text.out.find("set_underutilization") != std::string::npos);
  CHECK(text.out.find("  caches from ") != std::string::npos); // sysfs, a file or the reference
  CHECK(text.out.find("\033[") == std::string::npos);          // no colour into a pipe
  // --hot narrows the measured bytes of one group.
  llvm::json::Value v = report_json(trace, {"--hot", "mlr_new_node=24", "--at", "end"});
  const auto *nodes = group_by_site(*v.getAsObject(), "mlr_new_node");
  REQUIRE(nodes);
  CHECK(nodes->getInteger("hot_bytes").getValueOr(0) == 24);
  CHECK(v.getAsObject()->getString("at").getValueOr("") == "end");
  // -o writes the file.
  RunResult to_file =
      run({memlayout_bin(), "report", trace, "--format", "json", "-o", dir + "/r.json"});
  CHECK(to_file.exit_code() == 0);
  CHECK(static_cast<bool>(llvm::json::parse(read_file(dir + "/r.json"))));
  // --cache FILE: another machine's geometry, and the report says so.
  {
    std::ofstream cache(dir + "/cache.txt");
    cache << "# the machine the trace came from\n"
             "L1 data    32K 8-way 64B virtual\n"
             "L2 unified 1M  16-way 64B physical\n";
  }
  llvm::json::Value other = report_json(trace, {"--cache", dir + "/cache.txt"});
  const auto *cache = other.getAsObject()->getObject("cache");
  REQUIRE(cache);
  CHECK(cache->getString("source").getValueOr("") == "file " + dir + "/cache.txt");
  const auto *levels = cache->getArray("levels");
  REQUIRE(levels);
  REQUIRE(levels->size() == 2);
  CHECK((*levels)[0].getAsObject()->getInteger("sets").getValueOr(0) == 64);
  CHECK((*levels)[1].getAsObject()->getInteger("sets").getValueOr(0) == 1024);
  // A file without L1: its L2 figures stay L2's (they went under L1's key).
  {
    std::ofstream cache(dir + "/l2.txt");
    cache << "L2 unified 1M 16-way\n";
  }
  llvm::json::Value l2 = report_json(trace, {"--cache", dir + "/l2.txt"});
  const auto *l2_nodes = group_by_site(*l2.getAsObject(), "mlr_new_node");
  REQUIRE(l2_nodes);
  const auto *sets = l2_nodes->getObject("set_effective_fraction");
  REQUIRE(sets);
  CHECK(sets->getNumber("L1") == llvm::None);
  CHECK(sets->getNumber("L2").getValueOr(0) > 0);
  CHECK(sets->getNumber("L3") == llvm::None);
  for (const llvm::json::Value &f : *l2.getAsObject()->getArray("findings"))
    if (f.getAsObject()->getString("kind").getValueOr("") == "set_underutilization")
      CHECK(f.getAsObject()->getString("message").getValueOr("").find("of the L2 sets") !=
            llvm::StringRef::npos);
}

// Output that cannot be written, or would overwrite an input: status 2, a
// message naming the file or standard output and the reason, and the input
// untouched. Each command that writes a result alike.
TEST_CASE("report.output_errors", "[report]") {
  std::string dir = work_dir("report_output_errors");
  std::string trace = dir + "/t.trace";
  REQUIRE(record({"-o", trace}, {program("node_descriptor"), "100"}).exit_code() == 0);
  const std::string original = read_file(trace);
  std::string rules = dir + "/r.rules";
  {
    std::ofstream f(rules);
    f << "function=main,pool=p\n";
  }
  struct Command {
    std::vector<std::string> args; // after memlayout; the output goes last
    std::string input;             // the one -o names in the second check
  };
  const std::vector<Command> commands = {
      {{"report", trace}, trace},
      {{"report", trace, "--format", "json"}, trace},
      {{"advise", trace, "--no-replay"}, trace},
      {{"diff", trace, trace}, trace},
      {{"replay", trace, "--rules", rules}, rules},
  };
  for (const Command &c : commands) {
    std::string line = memlayout_bin();
    for (const std::string &a : c.args)
      line += " '" + a + "'";
    INFO(line);
    RunResult full = run({"/bin/sh", "-c", line + " > /dev/full"});
    INFO(full.err);
    CHECK(full.exit_code() == 2);
    CHECK(full.err.find(": cannot write to standard output: No space left on device") !=
          std::string::npos);

    std::vector<std::string> argv = {memlayout_bin()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    argv.push_back("-o");
    argv.push_back(dir + "/./" + c.input.substr(dir.size() + 1)); // another path, same file
    RunResult same = run(argv);
    INFO(same.err);
    CHECK(same.exit_code() == 2);
    CHECK(same.err.find("refusing to write '" + argv.back() + "': it is the input '" + c.input +
                        "'") != std::string::npos);
    CHECK(read_file(trace) == original);

    argv.back() = "/proc/version";
    RunResult proc = run(argv);
    CHECK(proc.exit_code() == 2);
    CHECK(proc.err.find("cannot write '/proc/version': ") != std::string::npos);
  }
  CHECK(read_file(rules) == "function=main,pool=p\n");

  // A write cut short (here by a file size limit) leaves no partial file.
  RunOptions limited;
  limited.fsize_limit = 100;
  limited.ignore_sigxfsz = true;
  const std::string cut = dir + "/cut.json";
  RunResult full = run({memlayout_bin(), "report", trace, "--format", "json", "-o", cut}, limited);
  CHECK(full.exit_code() == 2);
  CHECK(full.err.find("cannot write '" + cut + "'") != std::string::npos);
  CHECK_FALSE(file_exists(cut));

  // compare prints its table with stdio: the same check at its end.
  for (const char *format : {"text", "json"}) {
    RunResult c = run({"/bin/sh", "-c",
                       memlayout_bin() + " compare --segregate size=16,pool=x -r 1 --format " +
                           format + " -- /bin/true > /dev/full"});
    INFO(format << ": " << c.err);
    CHECK(c.exit_code() == 2);
    CHECK(c.err.find("memlayout compare: cannot write to standard output") != std::string::npos);
  }
}

// What a command reads besides its named inputs is no place for its output
// either: the program it records or compares, the type map and cache model
// of an analysis, the recorded program whose symbols a report reads.
TEST_CASE("report.outputs_never_overwrite_what_is_read", "[report]") {
  std::string dir = work_dir("report_outputs_read");
  std::string prog = dir + "/prog", trace = dir + "/t.trace", map = dir + "/m.json";
  REQUIRE(run({"/bin/cp", program("node_descriptor"), prog}).exit_code() == 0);
  const std::string binary = read_file(prog);
  std::ofstream(map) << R"({"schema": "memlayout.structs/1", "line_size": 64, "records": [],
                            "sites": []})";
  const std::string map_text = read_file(map);
  RunResult rec = run({memlayout_bin(), "record", "-o", prog, "--", prog, "100"});
  CHECK(rec.exit_code() == 2);
  CHECK(rec.err.find("refusing to write '" + prog + "'") != std::string::npos);
  CHECK(read_file(prog) == binary);
  REQUIRE(record({"-o", trace}, {prog, "100"}).exit_code() == 0);
  const std::vector<std::vector<std::string>> writes = {
      {"report", trace, "-o", prog},
      {"report", trace, "--types", map, "-o", map},
      {"report", trace, "--format", "json", "--types", map, "-o", map},
      {"advise", trace, "--no-replay", "-o", prog},
      {"diff", trace, trace, "--types", map, "-o", map},
      {"compare", "--segregate", "size=16,pool=x", "-r", "1", "--export-json", prog, "--", prog,
       "100"},
  };
  for (const auto &w : writes) {
    std::vector<std::string> argv = {memlayout_bin()};
    argv.insert(argv.end(), w.begin(), w.end());
    RunResult r = run(argv);
    INFO(r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find("refusing to write") != std::string::npos);
  }
  CHECK(read_file(prog) == binary);
  CHECK(read_file(map) == map_text);
  // An empty -o is a mistake, not "stdout" or "the default name".
  for (const char *command : {"report", "advise", "diff"}) {
    std::vector<std::string> argv = {memlayout_bin(), command, trace};
    if (std::string(command) == "diff")
      argv.push_back(trace);
    argv.insert(argv.end(), {"-o", ""});
    RunResult r = run(argv);
    INFO(command << ": " << r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--output: takes a path, not ''") != std::string::npos);
  }
}

TEST_CASE("report.bad_input", "[report]") {
  std::string dir = work_dir("report_bad");
  RunResult none = run({memlayout_bin(), "report", dir + "/missing.trace"});
  CHECK(none.exit_code() == 2);
  CHECK(none.err.find("missing.trace") != std::string::npos);
  std::string foreign = dir + "/foreign.trace";
  {
    std::vector<std::string> argv = {"/bin/sh", "-c", "echo not a trace > " + foreign};
    REQUIRE(run(argv).exit_code() == 0);
  }
  RunResult bad = run({memlayout_bin(), "report", foreign});
  CHECK(bad.exit_code() == 2);
  CHECK(bad.err.find("not a memlayout trace") != std::string::npos);
  // A report given for the trace says what it is.
  std::string report_path = dir + "/a.json";
  std::ofstream(report_path) << R"({"schema": "memlayout.report/1", "groups": []})";
  RunResult report_json = run({memlayout_bin(), "report", report_path});
  CHECK(report_json.exit_code() == 2);
  CHECK(report_json.err.find(report_path + " is a report (JSON), not a trace") !=
        std::string::npos);
  CHECK(run({memlayout_bin(), "report", foreign, "--at", "yesterday"}).exit_code() == 2);
  CHECK(run({memlayout_bin(), "report", foreign, "--hot", "x"}).exit_code() == 2);
  for (const char *hot : {"x=-5", "x=99999999999999999999", "x=0", "x=24x", "x=2147483648"}) {
    RunResult h = run({memlayout_bin(), "report", foreign, "--hot", hot});
    INFO(hot << ": " << h.err);
    CHECK(h.exit_code() == 2);
    CHECK(h.err.find(std::string("not '") + hot + "'") != std::string::npos);
  }
  CHECK(run({memlayout_bin(), "report", foreign, "--bogus"}).exit_code() == 2);
  RunResult twice = run({memlayout_bin(), "report", foreign, "--hot", "x=8", "--hot", "x=16"});
  CHECK(twice.exit_code() == 2);
  CHECK(twice.err.find("names x twice") != std::string::npos);
  RunResult cache_dir = run({memlayout_bin(), "report", foreign, "--cache", dir});
  CHECK(cache_dir.exit_code() == 2);
  CHECK(cache_dir.err.find(dir + ": cannot read: Is a directory") != std::string::npos);
  // A FIFO (no writer): refused at once, not waited on.
  std::string fifo = dir + "/fifo";
  REQUIRE(run({"/usr/bin/mkfifo", fifo}).exit_code() == 0);
  RunOptions quick;
  quick.timeout_s = 10;
  for (const std::vector<std::string> &argv :
       {std::vector<std::string>{memlayout_bin(), "report", fifo},
        std::vector<std::string>{memlayout_bin(), "dump", fifo},
        std::vector<std::string>{memlayout_bin(), "advise", fifo},
        std::vector<std::string>{memlayout_bin(), "diff", fifo, foreign}}) {
    RunResult f = run(argv, quick);
    INFO(argv[1] << ": " << f.err);
    CHECK_FALSE(f.timed_out);
    CHECK(f.exit_code() == 2);
    CHECK(f.err.find("fifo: not a regular file") != std::string::npos);
  }
  std::string trace = dir + "/ok.trace";
  REQUIRE(record({"-o", trace}, {program("node_descriptor"), "100"}).exit_code() == 0);
  RunResult nobody = run({memlayout_bin(), "report", trace, "--hot", "nosuch=24"});
  CHECK(nobody.exit_code() == 0);
  CHECK(nobody.out.find("--hot nosuch: no group is named so") != std::string::npos);
  CHECK(nobody.err.find("memlayout report: warning: --hot nosuch: no group is named so") !=
        std::string::npos);
  RunResult mark = run({memlayout_bin(), "report", trace, "--at", "mark:nope"});
  CHECK(mark.exit_code() == 2);
  CHECK(mark.err.find("no mark named nope") != std::string::npos);

  // Damage (here the third record's magic) is not a trace cut short: status
  // 2 and a message on stderr, from report, advise and diff alike, as from
  // dump; the report of the records before it still comes out.
  std::string bytes = read_file(trace);
  size_t third = bytes.find("MLRC", bytes.find("MLRC", bytes.find("MLRC") + 4) + 4);
  REQUIRE(third != std::string::npos);
  bytes[third] = 'X';
  std::string damaged = dir + "/damaged.trace";
  {
    std::ofstream f(damaged, std::ios::binary);
    f << bytes;
  }
  std::string where = "offset " + std::to_string(third) + ": record magic mismatch";
  // report, advise and diff (against the intact trace) of one trace.
  auto each_command = [&](const std::string &t) {
    std::vector<std::pair<std::string, RunResult>> out;
    for (const char *command : {"report", "advise", "diff"}) {
      std::vector<std::string> argv = {memlayout_bin(), command, t};
      if (std::string(command) == "diff")
        argv.push_back(trace);
      out.emplace_back(command, run(argv));
    }
    return out;
  };
  for (const auto &[command, r] : each_command(damaged)) {
    INFO(command << " stderr: " << r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find("the trace is damaged: " + damaged + ": " + where) != std::string::npos);
  }
  RunResult text = run({memlayout_bin(), "report", damaged});
  CHECK(text.out.find("note: the trace is damaged (") != std::string::npos);
  // A record of a type this version does not know (a newer writer's) is
  // skipped, as the format says, but never silently: a warning on stderr
  // and a note in the report; advise and diff say it too.
  std::string unknown_type = read_file(trace);
  unknown_type[third + 4] = static_cast<char>(0xfe);
  std::string skipped = dir + "/skipped.trace";
  {
    std::ofstream f(skipped, std::ios::binary);
    f << unknown_type;
  }
  std::string skip_msg =
      skipped + ": offset " + std::to_string(third) + ": skipping record of unknown type 254";
  for (const auto &[command, r] : each_command(skipped)) {
    INFO(command << " stderr: " << r.err);
    CHECK(r.exit_code() == 0);
    CHECK(r.err.find("memlayout " + command + ": warning: " + skip_msg) != std::string::npos);
  }
  RunResult skipped_text = run({memlayout_bin(), "report", skipped});
  CHECK(skipped_text.out.find("reading the trace: " + skip_msg) != std::string::npos);
  // A trace cut short: status 1, a warning on stderr, and the rules file says so.
  std::string cut = dir + "/cut.trace";
  {
    std::ofstream f(cut, std::ios::binary);
    f << read_file(trace).substr(0, third + 10);
  }
  RunResult partial = run({memlayout_bin(), "report", cut});
  CHECK(partial.exit_code() == 1);
  CHECK(partial.err.find("memlayout report: warning: the trace is incomplete: " + cut) !=
        std::string::npos);
  RunResult cut_rules = run({memlayout_bin(), "advise", cut});
  CHECK(cut_rules.exit_code() == 1);
  CHECK(cut_rules.out.find("# the trace is incomplete (the program did not finish writing it)") !=
        std::string::npos);
  // A JSON report of it carries the damage, and what reads it back says so.
  std::string json = dir + "/damaged.json";
  CHECK(run({memlayout_bin(), "report", damaged, "--format", "json", "-o", json}).exit_code() == 2);
  RunResult advised = run({memlayout_bin(), "advise", json});
  CHECK(advised.exit_code() == 2);
  CHECK(advised.err.find(where) != std::string::npos);
}

// A group whose pages no memory snapshot mapped (a buffer freed before the
// next one) has its L2/L3 figures on the page offset's colours, while its
// levels say "from frame numbers (exact)": the group says so itself.
TEST_CASE("report.groups_on_fewer_bits_than_their_level_say_so", "[report]") {
  std::string dir = work_dir("report_short_buffer");
  std::string trace = dir + "/t.trace";
  REQUIRE(record({"-o", trace}, {program("short_buffer"), "5000"}).exit_code() == 0);
  llvm::json::Value v = json_of({memlayout_bin(), "report", trace, "--format", "json"});
  const llvm::json::Object &r = *v.getAsObject();
  const llvm::json::Array *levels = r.getObject("cache")->getArray("levels");
  REQUIRE(levels);
  std::string l2_bits;
  for (const auto &l : *levels)
    if (l.getAsObject()->getInteger("level").getValueOr(0) == 2)
      l2_bits = l.getAsObject()->getString("bits").getValueOr("").str();
  INFO("L2: " << l2_bits);
  const llvm::json::Object *scratch = nullptr, *records = nullptr;
  for (const auto &g : *r.getArray("groups")) {
    const auto *o = g.getAsObject();
    int64_t size = o->getInteger("requested_size").getValueOr(0);
    if (size == int64_t{1} << 20)
      scratch = o;
    else if (size == 32)
      records = o;
  }
  REQUIRE(scratch);
  REQUIRE(records);
  CHECK(records->getObject("set_bits")->empty());
  RunResult text = run({memlayout_bin(), "report", trace});
  if (l2_bits.find("frame numbers") != std::string::npos) {
    // Recorded with frames (root): the records' heap was in the last snapshot, the buffer not.
    const auto *bits = scratch->getObject("set_bits");
    REQUIRE(bits);
    CHECK(bits->getString("L2").getValueOr("").contains("no frame numbers"));
    CHECK(text.out.find("* L2 of group") != std::string::npos);
    CHECK(text.out.find("its pages were in no memory snapshot") != std::string::npos);
  } else {
    // Without frames every group rests on what its level says.
    CHECK(scratch->getObject("set_bits")->empty());
  }
}
