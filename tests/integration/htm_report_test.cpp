// Aborted transactions end to end: memlayout-bench's HTM trees recorded
// under `memlayout record` (the emulator writing its aborts through the
// annotation interface), `memlayout report` naming the B+tree leaf and the
// offsets its false conflicts strike, Euno-B+Tree's scattered leaves without
// that finding, and `memlayout diff` listing it as resolved.
#include "report_json_support.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

using namespace mlt;

namespace {

// A put-heavy run with the hottest keys next to each other (one leaf), in
// lockstep: threads overlap as on cores of their own, on any machine.
std::string record_tree(const std::string &dir, const std::string &tree) {
  std::string path = dir + "/" + tree + ".trace";
  RunOptions opts;
  opts.timeout_s = 100;
  RunResult r = record({"-o", path},
                       {MLT_BENCH,
                        "--tree",
                        tree,
                        "--layout",
                        "fixed",
                        "--threads",
                        "4",
                        "--duration",
                        "3",
                        "--key-range",
                        "20000",
                        "--prefill",
                        "1.0",
                        "--ops",
                        "50/0/0/50",
                        "--dist",
                        "zipf-adjacent:0.99",
                        "--htm",
                        "emulate",
                        "--htm-schedule",
                        "lockstep"},
                       opts);
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  return path;
}

std::string group_name(const llvm::json::Object &report, int64_t id) {
  for (const auto &g : *report.getArray("groups"))
    if (g.getAsObject()->getInteger("id") == id)
      return g.getAsObject()->getString("name").getValueOr("").str();
  return "";
}

// The htm_false_conflict finding on a group whose name contains `part`.
const llvm::json::Object *false_conflict_on(const llvm::json::Object &report,
                                            const std::string &part) {
  for (const auto &f : *report.getArray("findings")) {
    const auto *o = f.getAsObject();
    if (o->getString("kind").getValueOr("") != "htm_false_conflict")
      continue;
    for (const auto &id : *o->getArray("groups"))
      if (group_name(report, *id.getAsInteger()).find(part) != std::string::npos)
        return o;
  }
  return nullptr;
}

} // namespace

TEST_CASE("htm report: htm-bptree's leaf has false conflicts, Euno-B+Tree's not; diff shows it",
          "[integration][htm]") {
  std::string dir = work_dir("htm_report");
  std::string htm = record_tree(dir, "htm-bptree");
  std::string euno = record_tree(dir, "euno-bptree");

  llvm::json::Value a =
      json_of({memlayout_bin(), "report", htm, "--at", "mark:measured", "--format", "json"});
  const llvm::json::Object &ra = *a.getAsObject();
  const llvm::json::Object *h = ra.getObject("htm");
  REQUIRE(h);
  CHECK(h->getInteger("transactions").getValueOr(0) > 10000);
  CHECK(h->getObject("conflicts")->getInteger("false").getValueOr(0) > 0);
  const llvm::json::Object *f = false_conflict_on(ra, "HtmBptree::new_leaf");
  REQUIRE(f);
  const llvm::json::Object *metric = f->getObject("metric");
  double rate_htm = metric->getNumber("false_per_1000_transactions").getValueOr(0);
  CHECK(rate_htm >= 1.0);
  // The hot offsets are the leaf's payloads: in the fixed layout they start
  // at byte 192 (keys 64..191, count and link on the first line).
  CHECK(metric->getNumber("hot_offset").getValueOr(0) >= 192);
  CHECK(f->getString("message").getValueOr("").contains("offsets"));

  llvm::json::Value b =
      json_of({memlayout_bin(), "report", euno, "--at", "mark:measured", "--format", "json"});
  const llvm::json::Object &rb = *b.getAsObject();
  REQUIRE(rb.getObject("htm"));
  // Gone, or much smaller: the updates of neighbouring keys sorted into the
  // reserved entries still share lines (docs/trees.md).
  const llvm::json::Object *g = false_conflict_on(rb, "EunoBptree::new_leaf");
  if (g)
    CHECK(g->getObject("metric")->getNumber("false_per_1000_transactions").getValueOr(1e9) <=
          rate_htm / 2);

  llvm::json::Value d =
      json_of({memlayout_bin(), "diff", htm, euno, "--at", "mark:measured", "--format", "json"});
  const llvm::json::Object &diff = *d.getAsObject();
  bool resolved = false;
  for (const auto &r : *diff.getObject("findings")->getArray("resolved"))
    resolved |= r.getAsObject()->getString("kind").getValueOr("") == "htm_false_conflict";
  CHECK(resolved); // htm-bptree's leaf finding matches no group of B
  const llvm::json::Object *rate =
      diff.getObject("totals")->getObject("htm_false_conflicts_per_1000");
  REQUIRE(rate);
  CHECK(rate->getString("verdict").getValueOr("") == "better");
}
