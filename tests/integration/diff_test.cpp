// `memlayout diff` on the BST study's int-lf case: the same program under
// jemalloc (nodes on every other line) and glibc (all sets used) is the
// before/after of a fix. Traces and saved reports must give the same deltas;
// bad inputs are refused with the file named.
#include "support.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <fstream>
#include <regex>

using namespace mlt;

namespace {

struct Traces {
  std::string dir, before, after; // jemalloc, native
};

// Each test records its own pair in its own directory: ctest runs the cases
// as parallel processes, and work_dir() empties the directory it names.
Traces record_pair(const std::string &name) {
  Traces t;
  t.dir = work_dir(name);
  t.before = t.dir + "/jemalloc.trace";
  t.after = t.dir + "/native.trace";
  for (auto [allocator, path] : {std::pair{"jemalloc", t.before}, std::pair{"native", t.after}}) {
    RunResult r =
        record({"-o", path, "--allocator", allocator}, {program("node_descriptor"), "60000"});
    INFO(r.err);
    REQUIRE(r.exit_code() == 0);
  }
  return t;
}

llvm::json::Value diff_json(const std::string &a, const std::string &b) {
  RunResult r = run({memlayout_bin(), "diff", a, b, "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code() == 0);
  auto parsed = llvm::json::parse(r.out);
  REQUIRE(static_cast<bool>(parsed));
  return std::move(*parsed);
}

const llvm::json::Object *group_named(const llvm::json::Object &diff, const std::string &part) {
  for (const auto &g : *diff.getArray("groups")) {
    const auto *o = g.getAsObject();
    if (o->getString("name").getValueOr("").contains(part))
      return o;
  }
  return nullptr;
}

std::optional<double> delta(const llvm::json::Object &group, const char *metric) {
  auto d = group.getObject("metrics")->getObject(metric)->getNumber("delta");
  return d ? std::optional<double>(*d) : std::nullopt;
}

bool listed(const llvm::json::Object &diff, const char *which, const std::string &kind,
            const std::string &group_part) {
  for (const auto &f : *diff.getObject("findings")->getArray(which)) {
    const auto *o = f.getAsObject();
    if (o->getString("kind").getValueOr("") != kind)
      continue;
    for (const auto &g : *o->getArray("groups"))
      if (g.getAsString().getValueOr("").contains(group_part))
        return true;
  }
  return false;
}

// Every matched group's metric deltas and the finding lists, as one string:
// two diffs of the same layouts must agree on it exactly.
std::string essence(const llvm::json::Object &diff) {
  std::string s;
  for (const auto &g : *diff.getArray("groups")) {
    const auto *o = g.getAsObject();
    s += o->getString("name").getValueOr("").str() + ":";
    for (const auto &[k, m] : *o->getObject("metrics")) {
      auto d = m.getAsObject()->getNumber("delta");
      s += " " + k.str() + "=" + (d ? std::to_string(*d) : "null") + "/" +
           m.getAsObject()->getString("verdict").getValueOr("").str();
    }
    s += "\n";
  }
  for (const char *which : {"resolved", "new", "kept"})
    for (const auto &f : *diff.getObject("findings")->getArray(which))
      s +=
          std::string(which) + " " + f.getAsObject()->getString("kind").getValueOr("").str() + "\n";
  return s;
}

std::string write(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
  return path;
}

} // namespace

TEST_CASE("diff.int_lf_fix", "[diff]") {
  const Traces t = record_pair("diff_intlf");
  llvm::json::Value v = diff_json(t.before, t.after);
  const llvm::json::Object &d = *v.getAsObject();
  CHECK(d.getString("schema").getValueOr("") == "memlayout.diff/1");
  CHECK(d.getObject("a")->getString("kind").getValueOr("") == "trace");
  CHECK(d.getObject("a")->getString("allocator").getValueOr("") == "jemalloc");
  const auto *nodes = group_named(d, "mlr_new_node");
  REQUIRE(nodes);
  CHECK(nodes->getString("matched_by").getValueOr("") == "name");
  auto l1 = delta(*nodes, "set_effective_fraction_L1");
  REQUIRE(l1);
  CHECK(*l1 == Approx(0.5).margin(0.07));
  const auto *l1m = nodes->getObject("metrics")->getObject("set_effective_fraction_L1");
  CHECK(l1m->getString("verdict").getValueOr("") == "better");
  CHECK(l1m->getString("better").getValueOr("") == "higher");
  CHECK(delta(*nodes, "objects") == 0.0);
  CHECK(listed(d, "resolved", "set_underutilization", "mlr_new_node"));
  CHECK_FALSE(listed(d, "new", "set_underutilization", "mlr_new_node"));
  CHECK(d.getObject("totals")->getObject("live_objects")->getNumber("delta").getValueOr(-1) == 0);
  // Counts are whole numbers in the JSON, as in the reports (not 60000.0).
  const std::string json =
      run({memlayout_bin(), "diff", t.before, t.after, "--format", "json"}).out;
  CHECK(std::regex_search(
      json,
      std::regex(
          R"("live_objects":\s*\{\s*"a":\s*[0-9]+,\s*"b":\s*[0-9]+,\s*"delta":\s*-?[0-9]+,)")));
  CHECK(std::regex_search(json, std::regex(R"("objects":\s*\{\s*"a":\s*60000,\s*"b":\s*60000,)")));

  // The reverse direction is the regression: worse, and the finding new.
  llvm::json::Value r = diff_json(t.after, t.before);
  const auto *back = group_named(*r.getAsObject(), "mlr_new_node");
  REQUIRE(back);
  CHECK(delta(*back, "set_effective_fraction_L1").value_or(0) == Approx(-0.5).margin(0.07));
  CHECK(back->getObject("metrics")
            ->getObject("set_effective_fraction_L1")
            ->getString("verdict")
            .getValueOr("") == "worse");
  CHECK(listed(*r.getAsObject(), "new", "set_underutilization", "mlr_new_node"));

  // Text: the change and the resolved finding, the biggest change first, no
  // colour into a pipe.
  RunResult text = run({memlayout_bin(), "diff", t.before, t.after});
  INFO(text.err);
  REQUIRE(text.exit_code() == 0);
  CHECK(text.out.find("L1 set fraction") != std::string::npos);
  CHECK(text.out.find("+0.5") != std::string::npos);
  CHECK(text.out.find("Findings resolved") != std::string::npos);
  CHECK(text.out.find("set_underutilization") != std::string::npos);
  CHECK(text.out.find("\033[") == std::string::npos);
  // -o writes the file.
  RunResult to_file = run(
      {memlayout_bin(), "diff", t.before, t.after, "--format", "json", "-o", t.dir + "/d.json"});
  CHECK(to_file.exit_code() == 0);
  CHECK(static_cast<bool>(llvm::json::parse(read_file(t.dir + "/d.json"))));
}

TEST_CASE("diff.reports_and_traces_agree", "[diff]") {
  const Traces t = record_pair("diff_agree");
  std::string a_json = t.dir + "/jemalloc.json", b_json = t.dir + "/native.json";
  for (auto [trace, json] : {std::pair{t.before, a_json}, std::pair{t.after, b_json}})
    REQUIRE(run({memlayout_bin(), "report", trace, "--format", "json", "-o", json}).exit_code() ==
            0);
  std::string traces_only = essence(*diff_json(t.before, t.after).getAsObject());
  CHECK(!traces_only.empty());
  llvm::json::Value mixed = diff_json(t.before, b_json);
  CHECK(mixed.getAsObject()->getObject("b")->getString("kind").getValueOr("") == "report");
  CHECK(essence(*mixed.getAsObject()) == traces_only);
  CHECK(essence(*diff_json(a_json, b_json).getAsObject()) == traces_only);
  // A report compared with itself: nothing changed, every finding kept.
  llvm::json::Value same = diff_json(a_json, a_json);
  for (const auto &g : *same.getAsObject()->getArray("groups"))
    CHECK(g.getAsObject()->getNumber("change").getValueOr(-1) == 0);
  CHECK(same.getAsObject()->getObject("findings")->getArray("resolved")->empty());
  CHECK(same.getAsObject()->getObject("findings")->getArray("new")->empty());
  CHECK(same.getAsObject()->getArray("only_in_a")->empty());
}

TEST_CASE("diff.bad_input", "[diff]") {
  const Traces t = record_pair("diff_bad");
  const std::string &dir = t.dir;
  auto refused = [&](const std::string &a, const std::string &b, const std::string &named,
                     const std::string &says) {
    RunResult r = run({memlayout_bin(), "diff", a, b});
    INFO(a << " vs " << b << ": " << r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find(named) != std::string::npos);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(r.out.empty());
  };
  refused(dir + "/missing.trace", t.after, "missing.trace", "cannot read");
  refused(t.before, dir + "/missing.json", "missing.json", "cannot read");
  std::string foreign = write(dir + "/foreign.txt", "not a trace\n");
  refused(t.before, foreign, "foreign.txt", "neither a memlayout trace");
  std::string other = write(dir + "/other.json", "{\"schema\": \"memlayout.diff/1\"}\n");
  refused(other, t.after, "other.json", "schema 'memlayout.diff/1'");
  std::string broken = write(dir + "/broken.json", "{\"schema\": \"memlayout.report/1\", ");
  refused(t.before, broken, "broken.json", "not JSON");
  std::string hollow = write(dir + "/hollow.json", "{\"schema\": \"memlayout.report/1\"}");
  refused(t.before, hollow, "hollow.json", "missing");
  CHECK(run({memlayout_bin(), "diff", t.before}).exit_code() == 2);
  CHECK(run({memlayout_bin(), "diff", t.before, t.after, "--bogus"}).exit_code() == 2);
  CHECK(run({memlayout_bin(), "diff", t.before, t.after, "--format", "html"}).exit_code() == 2);
  CHECK(run({memlayout_bin(), "diff", "--help"}).exit_code() == 0);
}
