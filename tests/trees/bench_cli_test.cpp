// memlayout-bench and ycsb-lite as a user runs them: short runs read back as
// JSON, the prefill-only mode, text output, bad arguments.
#include "map.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace memlayout::trees;

namespace {

struct Outcome {
  int status = -1; // exit status, or -1 when it did not exit normally
  std::string out, err;
};

std::string slurp(FILE *f) {
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    s.append(buf, n);
  return s;
}

Outcome run_tool(const char *tool, const std::string &args) {
  char err_path[] = "/tmp/memlayout-bench-test.XXXXXX";
  int err_fd = mkstemp(err_path);
  REQUIRE(err_fd >= 0);
  close(err_fd);
  std::string cmd = std::string(tool) + " " + args + " 2>" + err_path;
  Outcome o;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  o.out = slurp(p);
  int raw = pclose(p);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (FILE *e = fopen(err_path, "r")) {
    o.err = slurp(e);
    fclose(e);
  }
  unlink(err_path);
  return o;
}

Outcome run_bench(const std::string &args) { return run_tool(MLT_BENCH, args); }
Outcome run_ycsb(const std::string &args) { return run_tool(MLT_YCSB, args); }

llvm::json::Object parse_object(const std::string &text) {
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) {
    std::string why = llvm::toString(v.takeError());
    FAIL("not JSON (" << why << "): " << text);
  }
  llvm::json::Object *o = v->getAsObject();
  REQUIRE(o);
  return std::move(*o);
}

// Fields read back, with a value no valid output has when missing.
std::string str(const llvm::json::Object &j, const char *key) {
  auto v = j.getString(key);
  return v ? v->str() : "<missing>";
}
int64_t integer(const llvm::json::Object &j, const char *key) {
  auto v = j.getInteger(key);
  return v ? *v : -1;
}
double number(const llvm::json::Object &j, const char *key) {
  auto v = j.getNumber(key);
  return v ? *v : -1;
}

} // namespace

TEST_CASE("bench cli: short runs of two trees give the contract's JSON", "[bench]") {
  for (const char *tree : {"ticket", "edge-ext-lf"}) {
    if (!find_tree(tree)) {
      WARN("tree " << tree << " is not registered");
      continue;
    }
    for (const char *variant :
         {"--layout baseline --alloc malloc",
          "--layout fixed --alloc segregated --dist zipf:0.9 --noise --pin"}) {
      INFO(tree << " " << variant);
      Outcome o = run_bench(std::string("--tree ") + tree + " " + variant +
                            " --threads 2 --duration 0.2 --key-range 4096 --check --format json");
      REQUIRE(o.status == 0);
      llvm::json::Object j = parse_object(o.out);
      CHECK(str(j, "schema") == "memlayout.bench/1");
      CHECK(str(j, "tree") == tree);
      CHECK(integer(j, "threads") == 2);
      CHECK(str(j, "check") == "ok");
      CHECK(str(j, "layout") ==
            (std::string(variant).find("fixed") != std::string::npos ? "fixed" : "baseline"));
      CHECK(integer(j, "prefill") == 2048);
      // Timed by the workers that did it: an insert takes more than 10 ns
      // (timed from the main thread, a prefill it slept through took 1 us).
      CHECK(number(j, "prefill_s") > 2048 * 10e-9);
      CHECK(number(j, "prefill_s") < 5);
      double duration = number(j, "duration_s");
      CHECK(duration >= 0.19);
      CHECK(duration < 5);
      int64_t ops = integer(j, "ops");
      CHECK(ops > 0);
      CHECK(number(j, "mops") == Approx(static_cast<double>(ops) / duration / 1e6).epsilon(0.01));
      const llvm::json::Array *threads = j.getArray("per_thread");
      REQUIRE(threads);
      REQUIRE(threads->size() == 2);
      int64_t sum = 0;
      for (const llvm::json::Value &t : *threads)
        sum += integer(*t.getAsObject(), "ops");
      CHECK(sum == ops);
      // Either counts, or why there are none.
      CHECK((j.getObject("counters") != nullptr || j.getString("counters_unavailable").hasValue()));
      const llvm::json::Array *records = j.getArray("records");
      REQUIRE(records);
      CHECK_FALSE(records->empty());
    }
  }
}

TEST_CASE("bench cli: --duration 0 prefills and exits", "[bench]") {
  Outcome o = run_bench("--tree ticket --duration 0 --key-range 10000 --prefill 3000 --threads 2 "
                        "--check --format json");
  REQUIRE(o.status == 0);
  llvm::json::Object j = parse_object(o.out);
  CHECK(integer(j, "ops") == 0);
  CHECK(integer(j, "prefill") == 3000);
  CHECK(str(j, "check") == "ok");
}

TEST_CASE("bench cli: --linearizable checks every operation it ran", "[bench]") {
  Outcome o = run_bench("--tree ticket --threads 4 --duration 0.1 --key-range 8 --ops 20/40/40 "
                        "--linearizable --format json");
  REQUIRE(o.status == 0);
  llvm::json::Object j = parse_object(o.out);
  CHECK(str(j, "check") == "ok");
  CHECK(integer(j, "ops") > 0);
  CHECK(integer(j, "history_ops") == integer(j, "ops"));
  o = run_bench("--tree ticket --duration 0.05 --key-range 8 --linearizable");
  REQUIRE(o.status == 0);
  CHECK(o.out.find(" operations checked for linearizability") != std::string::npos);
  CHECK(run_bench("--tree ticket --linearizable=yes").status == 2);
}

// The history holds 2 Mi operations: a run that fills it checks less than
// it ran, and said nothing of it.
TEST_CASE("bench cli: --linearizable says when the history filled and workers stopped early",
          "[bench]") {
  Outcome o = run_bench("--tree ticket --threads 2 --duration 2 --key-range 64 --linearizable "
                        "--format json");
  REQUIRE(o.status == 0);
  llvm::json::Object j = parse_object(o.out);
  CHECK(str(j, "check") == "ok");
  CHECK(integer(j, "history_ops") == 2 << 20);
  const llvm::json::Object *full = j.getObject("history_full");
  REQUIRE(full);
  CHECK(integer(*full, "threads") >= 1);
  auto after = full->getNumber("first_stopped_after_s");
  REQUIRE(after);
  CHECK(*after > 0);
  CHECK(*after < 2);
  Outcome short_run = run_bench("--tree ticket --duration 0.02 --key-range 64 --linearizable "
                                "--format json");
  REQUIRE(short_run.status == 0);
  llvm::json::Object s = parse_object(short_run.out);
  const llvm::json::Object *none = s.getObject("history_full");
  REQUIRE(none);
  CHECK(integer(*none, "threads") == 0);
  CHECK(integer(s, "history_ops") == integer(s, "ops"));
  Outcome text = run_bench("--tree ticket --threads 2 --duration 2 --key-range 64 --linearizable");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("filled their share of the history and stopped early") != std::string::npos);
}

TEST_CASE("bench cli: text output has the table, the check and the counters' fate", "[bench]") {
  Outcome o = run_bench("--tree ticket --threads 2 --duration 0.1 --check");
  REQUIRE(o.status == 0);
  CHECK_THAT(o.out, Catch::Contains("Mops/s"));
  CHECK_THAT(o.out, Catch::Contains("check: ok"));
  bool counters_reported = o.out.find("llc_misses:") != std::string::npos ||
                           o.out.find("hardware counters unavailable: ") != std::string::npos;
  CHECK(counters_reported);
}

TEST_CASE("bench cli: --list names every registered tree", "[bench]") {
  Outcome o = run_bench("--list");
  REQUIRE(o.status == 0);
  for (const TreeInfo &t : all_trees())
    CHECK_THAT(o.out, Catch::Contains(std::string(t.name) + "\t"));
}

TEST_CASE("bench cli: bad arguments exit 2 naming the option", "[bench]") {
  Outcome o = run_bench("--tree ticket --threads many");
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("--threads"));
  CHECK(o.out.empty());
  Outcome t = run_bench("--tree fir");
  CHECK(t.status == 2);
  CHECK_THAT(t.err, Catch::Contains("no tree named 'fir'"));
  Outcome u = run_bench("--tree ticket --frobnicate");
  CHECK(u.status == 2);
  CHECK_THAT(u.err, Catch::Contains("--frobnicate"));
}

// euno-bptree's baseline leaf counts a segment's entries in one byte: with
// 16 KiB of 16-byte entries per node a segment held 256, its count wrapped
// to 0, and --check found 9744 of 10000 keys.
TEST_CASE("bench cli: a node too large for euno-bptree's baseline counts is refused", "[bench]") {
  Outcome o = run_bench("--tree euno-bptree --node-bytes 16384 --key-range 20000 --duration 0 "
                        "--check");
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("--node-bytes: euno-bptree's baseline leaf counts"));
  CHECK_THAT(o.err, Catch::Contains("at most 16383 bytes of 16-byte entries"));
  Outcome largest = run_bench("--tree euno-bptree --node-bytes 16383 --key-range 20000 "
                              "--duration 0 --check");
  INFO(largest.err);
  CHECK(largest.status == 0);
  CHECK_THAT(largest.out, Catch::Contains("check: ok"));
  Outcome fixed = run_bench("--tree euno-bptree --layout fixed --node-bytes 16384 --key-range "
                            "20000 --duration 0 --check");
  INFO(fixed.err);
  CHECK(fixed.status == 0);
  Outcome ycsb = run_ycsb("--tree euno-bptree --node-bytes 16384 --rows 2000 --duration 0");
  CHECK(ycsb.status == 2);
  CHECK_THAT(ycsb.err, Catch::Contains("--node-bytes"));
}

TEST_CASE("ycsb-lite: transactions on a tree-indexed table lose no update", "[ycsb]") {
  for (const char *variant : {"--alloc malloc", "--alloc segregated --pad-locks --layout fixed"}) {
    INFO(variant);
    Outcome o = run_ycsb(std::string("--tree ticket --threads 2 --duration 0.3 --rows 20000 "
                                     "--read-pct 50 --check --format json ") +
                         variant);
    REQUIRE(o.status == 0);
    llvm::json::Object j = parse_object(o.out);
    CHECK(str(j, "schema") == "memlayout.ycsb-lite/1");
    CHECK(str(j, "tree") == "ticket");
    CHECK(integer(j, "rows") == 20000);
    CHECK(integer(j, "txn_rows") == 16);
    CHECK(integer(j, "txns") > 0);
    CHECK(number(j, "txn_per_s") > 0);
    CHECK(str(j, "check") == "ok");
    const llvm::json::Array *threads = j.getArray("per_thread");
    REQUIRE(threads);
    CHECK(threads->size() == 2);
    // Timed by the workers: the main thread, timing it, could come back to
    // its clock with the load nearly done (1,000 rows "in 6 us").
    CHECK(number(j, "load_s") >= 20000 * 10e-9);
  }
}

TEST_CASE("ycsb-lite: load-only runs and text output", "[ycsb]") {
  Outcome load = run_ycsb("--tree ticket --duration 0 --rows 5000 --check");
  REQUIRE(load.status == 0);
  CHECK_THAT(load.out, Catch::Contains("load only"));
  CHECK_THAT(load.out, Catch::Contains("check: ok"));
  Outcome run = run_ycsb("--tree ticket --duration 0.1 --rows 5000 --threads 2");
  REQUIRE(run.status == 0);
  CHECK_THAT(run.out, Catch::Contains("txn/s"));
  CHECK_THAT(run.out, Catch::Contains("48-byte row locks"));
}

TEST_CASE("ycsb-lite: bad arguments exit 2 naming the option", "[ycsb]") {
  Outcome a = run_ycsb("--tree ticket --rows 0");
  CHECK(a.status == 2);
  CHECK_THAT(a.err, Catch::Contains("--rows"));
  Outcome b = run_ycsb("--tree ticket --rows 10 --txn-rows 16");
  CHECK(b.status == 2);
  CHECK_THAT(b.err, Catch::Contains("--txn-rows"));
  Outcome c = run_ycsb("--rows 10");
  CHECK(c.status == 2);
  CHECK_THAT(c.err, Catch::Contains("--tree is required"));
  Outcome d = run_ycsb("--tree ticket --theta zero");
  CHECK(d.status == 2);
  CHECK_THAT(d.err, Catch::Contains("--theta"));
}

TEST_CASE("bench cli: the HTM trees with puts and scans, their htm statistics in JSON",
          "[bench][htm]") {
  for (const char *tree : {"htm-bptree", "euno-bptree"})
    for (const char *variant : {"--layout baseline", "--layout fixed --alloc segregated",
                                "--htm-schedule lockstep --key-bytes 24 --value-bytes 40"}) {
      INFO(tree << " " << variant);
      Outcome o = run_bench(std::string("--tree ") + tree +
                            " --threads 3 --duration 0.3 --key-range 3000 --ops 40/10/10/35/5 "
                            "--scan-length 20 --dist zipf-adjacent:0.9 --check --format json " +
                            variant);
      REQUIRE(o.status == 0);
      llvm::json::Object j = parse_object(o.out);
      CHECK(str(j, "check") == "ok");
      const llvm::json::Object *mix = j.getObject("ops_mix");
      REQUIRE(mix);
      CHECK(integer(*mix, "put") == 35);
      CHECK(integer(*mix, "scan") == 5);
      CHECK(str(j, "dist") == "zipf-adjacent:0.9");
      const llvm::json::Object *h = j.getObject("htm");
      REQUIRE(h);
      CHECK((str(*h, "backend") == "emulate" || str(*h, "backend") == "rtm"));
      CHECK(str(*h, "of") == "run");
      CHECK(integer(*h, "commits") > 0);
      const llvm::json::Object *aborts = h->getObject("aborts");
      REQUIRE(aborts);
      for (const char *k : {"conflict", "capacity", "explicit", "other"})
        CHECK(integer(*aborts, k) >= 0);
      const llvm::json::Object *conflicts = h->getObject("conflicts");
      REQUIRE(conflicts);
      CHECK(integer(*conflicts, "true") >= 0);
      CHECK(integer(*conflicts, "false") >= 0);
      CHECK(integer(*h, "fallbacks") >= 0);
      const llvm::json::Array *regions = h->getArray("regions");
      REQUIRE(regions);
      CHECK(regions->size() == (std::string(tree) == "euno-bptree" ? 2u : 1u));
      const llvm::json::Array *threads = j.getArray("per_thread");
      REQUIRE(threads);
      int64_t puts = 0, scans = 0;
      for (const llvm::json::Value &t : *threads) {
        puts += integer(*t.getAsObject(), "puts");
        scans += integer(*t.getAsObject(), "scans");
      }
      // Lockstep hands the turn over at every access: on a loaded machine a
      // short run gets through few operations.
      if (std::string(variant).find("lockstep") == std::string::npos) {
        CHECK(puts > 0);
        CHECK(scans > 0);
      }
    }
}

TEST_CASE("bench cli: --duration 0 gives the prefill's transactions, said so", "[bench][htm]") {
  Outcome o =
      run_bench("--tree htm-bptree --threads 2 --duration 0 --key-range 2000 --format json");
  REQUIRE(o.status == 0);
  llvm::json::Object j = parse_object(o.out);
  CHECK(integer(j, "ops") == 0);
  const llvm::json::Object *h = j.getObject("htm");
  REQUIRE(h);
  CHECK(str(*h, "of") == "prefill");
  CHECK(integer(*h, "commits") > 0); // the prefill's inserts ran in transactions
  Outcome text = run_bench("--tree htm-bptree --threads 2 --duration 0 --key-range 2000");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("of the prefill's inserts") != std::string::npos);
}

TEST_CASE("bench cli: HTM options are checked and refused where they do not apply",
          "[bench][htm]") {
  Outcome a = run_bench("--tree ticket --ops 50/0/0/50");
  CHECK(a.status == 2);
  CHECK_THAT(a.err, Catch::Contains("put and scan need an HTM tree"));
  Outcome b = run_bench("--tree ticket --htm emulate");
  CHECK(b.status == 2);
  CHECK_THAT(b.err, Catch::Contains("apply to htm-bptree and euno-bptree"));
  Outcome c = run_bench("--tree htm-bptree --htm-l1 63x8");
  CHECK(c.status == 2);
  CHECK_THAT(c.err, Catch::Contains("power of two"));
  Outcome d = run_bench("--tree euno-bptree --key-bytes 12");
  CHECK(d.status == 2);
  CHECK_THAT(d.err, Catch::Contains("--key-bytes"));
  Outcome e = run_bench("--tree euno-bptree --euno-control sometimes");
  CHECK(e.status == 2);
  CHECK_THAT(e.err, Catch::Contains("adaptive, always or never"));
  Outcome f = run_bench("--tree htm-bptree --ops 50/0/0/40/5/5");
  CHECK(f.status == 2);
  CHECK_THAT(f.err, Catch::Contains("--ops"));
  Outcome g = run_bench("--tree htm-bptree --htm rtm --duration 0.1 --key-range 100");
  if (g.status == 2) // this CPU has no usable RTM: the message says which test failed
    CHECK_THAT(g.err, Catch::Contains("RTM"));
  else
    CHECK(g.status == 0);
}

TEST_CASE("ycsb-lite: over either HTM tree, with its statistics", "[ycsb][htm]") {
  for (const char *tree : {"htm-bptree", "euno-bptree"}) {
    INFO(tree);
    Outcome o = run_ycsb(std::string("--tree ") + tree +
                         " --threads 2 --duration 0.3 --rows 20000 --read-pct 50 --check "
                         "--format json --htm emulate");
    REQUIRE(o.status == 0);
    llvm::json::Object j = parse_object(o.out);
    CHECK(str(j, "check") == "ok");
    CHECK(integer(j, "txns") > 0);
    const llvm::json::Object *h = j.getObject("htm");
    REQUIRE(h);
    CHECK(str(*h, "backend") == "emulate");
    CHECK(str(*h, "of") == "run");
    CHECK(integer(*h, "commits") > 0);
    // The run's transactions only: the load's 20,000 inserts were counted
    // in, 0.3 s on two threads under the emulator make fewer.
    CHECK(integer(*h, "commits") + integer(*h, "fallbacks") <=
          integer(j, "txns") * 16 * (std::string(tree) == "euno-bptree" ? 2 : 1));
    Outcome load = run_ycsb(std::string("--tree ") + tree +
                            " --rows 3000 --duration 0 --format json --htm emulate");
    REQUIRE(load.status == 0);
    llvm::json::Object lj = parse_object(load.out);
    const llvm::json::Object *lh = lj.getObject("htm");
    REQUIRE(lh);
    CHECK(str(*lh, "of") == "load");
    CHECK(integer(*lh, "commits") + integer(*lh, "fallbacks") >= 3000);
  }
  Outcome bad = run_ycsb("--tree ticket --node-bytes 512");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("apply to htm-bptree"));
}
