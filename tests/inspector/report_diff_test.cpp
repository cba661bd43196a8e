// Report diffs on synthetic reports: how groups are matched, which way each
// metric counts as better, and findings resolved, new and kept.
#include "report_diff.h"

#include <catch2/catch.hpp>

using namespace memlayout::inspector;

namespace {

GroupReport group(uint32_t id, const std::string &name, const std::string &function,
                  uint64_t size_class, double l1) {
  GroupReport g;
  g.group.id = id;
  g.group.name = name;
  g.group.site.function = function;
  g.group.site.file = "t.c";
  g.group.site.line = id;
  g.group.size_class = size_class;
  g.group.bytes = 64 * 1000;
  g.objects = 1000;
  g.lines_per_object = 1;
  g.set_effective_fraction = {l1, 1.0, std::nullopt};
  g.pages_4k = 32;
  g.pages_min = 16;
  return g;
}

Report report(std::vector<GroupReport> groups, std::vector<Finding> findings) {
  Report r;
  r.at = "peak";
  r.levels = {{1, "Data", 64, 12, 64, 49152, "virtual", ""},
              {2, "Unified", 2048, 16, 64, 2u << 20, "physical", ""}};
  r.groups = std::move(groups);
  r.findings = std::move(findings);
  for (const auto &g : r.groups) {
    r.live_objects += g.objects;
    r.live_bytes += g.group.bytes;
  }
  return r;
}

Finding finding(const std::string &kind, std::vector<uint32_t> groups) {
  Finding f;
  f.kind = kind;
  f.severity = "high";
  f.groups = std::move(groups);
  return f;
}

const MetricDelta &metric(const GroupDelta &g, const std::string &name) {
  for (const auto &m : g.metrics)
    if (m.metric == name)
      return m;
  FAIL("no metric " << name);
  return g.metrics.front();
}

} // namespace

TEST_CASE("report_diff.segregation_fix", "[report_diff]") {
  // Before: nodes share a class with descriptors. After: nodes in a pool
  // (renamed, matched by site), descriptors unchanged, a new group appears.
  Report a = report({group(1, "make_node (t.c:1)", "make_node", 64, 0.5),
                     group(2, "make_desc (t.c:2)", "make_desc", 64, 0.5),
                     group(3, "gone (t.c:3)", "gone", 16, 1.0)},
                    {finding("set_underutilization", {1}), finding("size_class_sharing", {1, 2}),
                     finding("set_underutilization", {2})});
  GroupReport nodes = group(5, "pool:nodes", "make_node", 64, 1.0);
  nodes.group.site.line = 1;      // the same call site as A's make_node
  nodes.straddle_fraction = 0.25; // worse
  nodes.pages_4k = 16;            // page_spread 2.0 -> 1.0: better
  Report b = report({group(4, "make_desc (t.c:2)", "make_desc", 64, 0.5), nodes,
                     group(6, "fresh (t.c:6)", "fresh", 32, 1.0)},
                    {finding("set_underutilization", {4}), finding("page_spread", {6})});
  ReportDiff d = diff_reports(a, b);

  REQUIRE(d.groups.size() == 2);
  const GroupDelta &first = d.groups[0]; // the biggest change first
  CHECK(first.a->group.name == "make_node (t.c:1)");
  CHECK(first.b->group.name == "pool:nodes");
  CHECK(first.matched_by == MatchedBy::kSiteAndSizeClass);
  const MetricDelta &l1 = metric(first, "set_effective_fraction_L1");
  CHECK(l1.delta().value() == Approx(0.5));
  CHECK(l1.verdict == Verdict::kBetter);
  CHECK(metric(first, "straddle_fraction").verdict == Verdict::kWorse);
  CHECK(metric(first, "page_spread").verdict == Verdict::kBetter);
  CHECK(metric(first, "pages_4k").verdict == Verdict::kBetter); // the same objects on fewer
  CHECK(metric(first, "objects").verdict == Verdict::kSame);
  // L3 was never computable: no verdict, no delta.
  CHECK(metric(first, "set_effective_fraction_L3").verdict == Verdict::kSame);
  CHECK_FALSE(metric(first, "set_effective_fraction_L3").delta());
  CHECK(d.groups[1].matched_by == MatchedBy::kName);
  CHECK(d.groups[1].magnitude == 0);

  REQUIRE(d.only_a.size() == 1);
  CHECK(d.only_a[0]->group.name == "gone (t.c:3)");
  REQUIRE(d.only_b.size() == 1);
  CHECK(d.only_b[0]->group.name == "fresh (t.c:6)");

  // The renamed group's finding is matched through A's name: resolved.
  REQUIRE(d.resolved.size() == 2);
  CHECK(d.resolved[0].finding->kind == "set_underutilization");
  CHECK(d.resolved[0].groups == std::vector<std::string>{"make_node (t.c:1)"});
  CHECK(d.resolved[1].finding->kind == "size_class_sharing");
  REQUIRE(d.kept.size() == 1);
  CHECK(d.kept[0].groups == std::vector<std::string>{"make_desc (t.c:2)"});
  REQUIRE(d.added.size() == 1);
  CHECK(d.added[0].finding->kind == "page_spread");
  CHECK(d.live_objects.delta().value() == 0);
  CHECK(d.notes.empty());
}

TEST_CASE("report_diff.matching_passes", "[report_diff]") {
  // Two groups of one site in different classes: the name is ambiguous, so
  // site + class pairs them. A record padded in the source (48 -> 64 bytes
  // asked for, class 48 -> 64) is caught by site alone.
  Report a = report({group(1, "same", "f", 32, 1.0), group(2, "same", "f", 64, 1.0),
                     group(3, "padded (t.c:3)", "g", 48, 1.0)},
                    {});
  a.groups[1].group.site.line = 1;
  Report b = report({group(7, "same", "f", 64, 0.5), group(8, "same", "f", 32, 1.0),
                     group(9, "padded (t.c:9)", "g", 64, 1.0)},
                    {});
  b.groups[0].group.site.line = 1;
  b.groups[1].group.site.line = 1;
  b.groups[2].group.site.line = 3;
  b.levels[1].sets = 1024;
  a.groups[2].group.requested_size = 48;
  b.groups[2].group.requested_size = 64;
  ReportDiff d = diff_reports(a, b);
  REQUIRE(d.groups.size() == 3);
  CHECK(d.only_a.empty());
  CHECK(d.only_b.empty());
  for (const auto &g : d.groups) {
    if (g.a->group.id == 1)
      CHECK(g.b->group.id == 8);
    if (g.a->group.id == 2) {
      CHECK(g.b->group.id == 7);
      CHECK(g.matched_by == MatchedBy::kSiteAndSizeClass);
    }
    if (g.a->group.id == 3) {
      CHECK(g.b->group.id == 9);
      CHECK(g.matched_by == MatchedBy::kSite);
    }
  }
  // Different L2 geometry is said, not hidden.
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0].find("cache level 2") != std::string::npos);
}

TEST_CASE("report_diff.one_site_into_a_pool", "[report_diff]") {
  // Inlined code: one line allocates a map node (72 bytes) and its string
  // (34). A pool takes both into classes of its own (80 and 48): neither the
  // name nor site + class pairs them, and the site alone is ambiguous; what
  // the program asks for does.
  Report a = report(
      {group(1, "run (t.c:14)", "run", 72, 0.5), group(2, "run (t.c:14)", "run", 40, 0.5)}, {});
  Report b =
      report({group(5, "pool.run", "run", 48, 1.0), group(6, "pool.run", "run", 80, 1.0)}, {});
  for (Report *r : {&a, &b})
    for (GroupReport &g : r->groups)
      g.group.site.line = 14;
  a.groups[0].group.requested_size = b.groups[1].group.requested_size = 72;
  a.groups[1].group.requested_size = b.groups[0].group.requested_size = 34;
  ReportDiff d = diff_reports(a, b);
  REQUIRE(d.groups.size() == 2);
  CHECK(d.only_a.empty());
  CHECK(d.only_b.empty());
  for (const auto &g : d.groups) {
    CHECK(g.matched_by == MatchedBy::kSiteAndRequestedSize);
    CHECK(g.b->group.id == (g.a->group.id == 1 ? 6u : 5u));
  }
}

TEST_CASE("report_diff.size_classes_merged_into_one_pool", "[report_diff]") {
  // One line allocates records (24 bytes) and their names (28 and 50): A has
  // three groups there, B's pool one. B is compared with their union.
  Report a = report({group(1, "mk (t.c:7)", "mk", 24, 0.3), group(2, "mk (t.c:7)", "mk", 40, 0.2),
                     group(3, "mk (t.c:7)", "mk", 56, 0.4)},
                    {});
  Report b = report({group(9, "pool.mk", "mk", 64, 1.0)}, {});
  for (Report *r : {&a, &b})
    for (GroupReport &g : r->groups)
      g.group.site.line = 7;
  a.groups[0].objects = 600;
  a.groups[1].objects = 300;
  a.groups[2].objects = 100;
  a.groups[0].straddle_fraction = 0.5;
  a.groups[1].straddle_fraction = 0.2;
  a.groups[2].straddle_fraction = 0.0;
  a.groups[0].group.requested_size = b.groups[0].group.requested_size = 24;
  b.groups[0].objects = 1000;
  b.groups[0].straddle_fraction = 0;
  ReportDiff d = diff_reports(a, b);
  CHECK(d.only_a.empty());
  CHECK(d.only_b.empty());
  REQUIRE(d.groups.size() == 1);
  const GroupDelta &g = d.groups[0];
  CHECK(g.matched_by == MatchedBy::kSiteMerged);
  CHECK(g.merged_a.size() == 3);
  auto metric = [&](const std::string &name) -> const MetricDelta & {
    for (const auto &m : g.metrics)
      if (m.metric == name)
        return m;
    FAIL("no metric " << name);
    return g.metrics.front();
  };
  CHECK(*metric("objects").a == 1000); // the union's: objects kept, none lost
  CHECK(metric("objects").verdict == Verdict::kSame);
  CHECK(*metric("straddle_fraction").a == Approx((600 * 0.5 + 300 * 0.2) / 1000));
  CHECK_FALSE(metric("size_class").a.has_value()); // three classes: no one figure
  CHECK_FALSE(metric("pages_4k").a.has_value());
}

TEST_CASE("report_diff.a_pool_takes_two_of_a_lines_records", "[report_diff]") {
  // One line makes list nodes (48), hash nodes (64) and values (128); a rule
  // pooled the list nodes, aligned to 64, where the hash nodes also went. B's
  // pool group is matched with A's hash nodes by site and class first; the
  // list nodes must join it, not be reported gone.
  Report a = report({group(1, "mk (t.c:7)", "mk", 48, 0.5), group(2, "mk (t.c:7)", "mk", 64, 1.0),
                     group(3, "mk (t.c:7)", "mk", 128, 1.0)},
                    {});
  Report b =
      report({group(7, "pool.mk", "mk", 64, 1.0), group(8, "mk (t.c:7)", "mk", 128, 1.0)}, {});
  for (Report *r : {&a, &b})
    for (GroupReport &g : r->groups)
      g.group.site.line = 7;
  a.groups[0].group.requested_size = 48;
  a.groups[1].group.requested_size = b.groups[0].group.requested_size = 56;
  a.groups[2].group.requested_size = b.groups[1].group.requested_size = 128;
  a.groups[2].objects = b.groups[1].objects = 500;
  b.groups[0].objects = 2000;
  ReportDiff d = diff_reports(a, b);
  CHECK(d.only_a.empty());
  CHECK(d.only_b.empty());
  REQUIRE(d.groups.size() == 2);
  const GroupDelta *pool = d.groups[0].b == &b.groups[0] ? &d.groups[0] : &d.groups[1];
  CHECK(pool->matched_by == MatchedBy::kSiteMerged);
  CHECK(pool->merged_a.size() == 2);
  CHECK(*metric(*pool, "objects").a == 2000);

  // A B group with no room for them (as many objects as its match), or with
  // far more room than they fill: the list nodes stay A's alone.
  b.groups[0].objects = 5000;
  REQUIRE(diff_reports(a, b).only_a.size() == 1);
  b.groups[0].objects = 1000;
  ReportDiff none = diff_reports(a, b);
  REQUIRE(none.only_a.size() == 1);
  CHECK(none.only_a[0] == &a.groups[0]);
}

TEST_CASE("report_diff.different_programs_are_noted", "[report_diff]") {
  Report a = report({group(1, "mk (t.c:7)", "mk", 48, 0.5)}, {});
  Report b = a;
  a.executable = "/usr/bin/kv";
  b.executable = "/usr/bin/tree";
  ReportDiff d = diff_reports(a, b);
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0].find("different programs (/usr/bin/kv, /usr/bin/tree)") != std::string::npos);
  b.executable = "/home/me/fixed-build/kv"; // the same program, built elsewhere
  CHECK(diff_reports(a, b).notes.empty());
}

TEST_CASE("report_diff.padding_spreads_less_on_more_pages", "[report_diff]") {
  // Padded to a line: the group needs three times the pages, and touches
  // half again as many: closer to its minimum, on more pages.
  Report a = report({group(1, "make_lock (t.c:1)", "make_lock", 24, 1.0)}, {});
  GroupReport padded = group(1, "make_lock (t.c:1)", "make_lock", 64, 1.0);
  padded.pages_4k = 48;
  padded.pages_min = 48;
  ReportDiff d = diff_reports(a, report({padded}, {}));
  REQUIRE(d.groups.size() == 1);
  CHECK(metric(d.groups[0], "page_spread").verdict == Verdict::kBetter);
  CHECK(metric(d.groups[0], "pages_4k").verdict == Verdict::kWorse);
  CHECK(metric(d.groups[0], "pages_4k").better == Better::kLower);

  // With other objects, the pages are the workload's: no opinion.
  padded.objects = 1500;
  d = diff_reports(a, report({padded}, {}));
  REQUIRE(d.groups.size() == 1);
  CHECK(metric(d.groups[0], "pages_4k").verdict == Verdict::kChanged);
}

TEST_CASE("report_diff.set_fractions_on_different_address_bits", "[report_diff]") {
  // The same layout, B recorded without page frames: its L2 figure rests on
  // bits 6-11 only. The change is shown but is neither better nor worse, and
  // a note says why; L1, on the same bits in both, keeps its verdict.
  GroupReport before = group(1, "f (t.c:1)", "f", 64, 0.5);
  GroupReport after = group(1, "f (t.c:1)", "f", 64, 1.0);
  after.set_effective_fraction[1] = 0.6;
  Report a = report({before}, {}), b = report({after}, {});
  a.levels[1].bits = "physical bits 6-16 from frame numbers (exact)";
  b.levels[1].bits = "rests on bits 6-11 (4 KiB pages, no frame numbers)";
  ReportDiff d = diff_reports(a, b);
  REQUIRE(d.groups.size() == 1);
  const MetricDelta &l2 = metric(d.groups[0], "set_effective_fraction_L2");
  CHECK(l2.delta().value() == Approx(-0.4));
  CHECK(l2.verdict == Verdict::kChanged);
  CHECK(l2.better == Better::kNeither);
  CHECK(metric(d.groups[0], "set_effective_fraction_L1").verdict == Verdict::kBetter);
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0].find("cache level 2's set fractions rest on different address bits") !=
        std::string::npos);

  b.levels[1].bits = a.levels[1].bits; // like for like: a verdict again
  ReportDiff same = diff_reports(a, b);
  CHECK(metric(same.groups[0], "set_effective_fraction_L2").verdict == Verdict::kWorse);
  CHECK(same.notes.empty());
}

TEST_CASE("report_diff.a_merged_finding_that_lost_a_size_class_is_kept", "[report_diff]") {
  // A's finding speaks for a site's three size classes; the fix moved one
  // of them to a pool: B's, about the same site, names two. Still there.
  Report a =
      report({group(1, "mk (t.c:7)", "mk", 24, 0.3), group(2, "mk (t.c:7)", "mk", 40, 0.2),
              group(3, "mk (t.c:7)", "mk", 56, 0.4), group(4, "other (t.c:9)", "other", 64, 0.5)},
             {finding("line_straddle", {1, 2, 3}), finding("page_spread", {4})});
  Report b =
      report({group(1, "mk (t.c:7)", "mk", 24, 0.3), group(2, "mk (t.c:7)", "mk", 40, 0.2),
              group(5, "pool.mk", "mk", 64, 1.0), group(4, "other (t.c:9)", "other", 64, 0.5)},
             {finding("line_straddle", {1, 2}), finding("page_spread", {5})});
  for (Report *r : {&a, &b})
    for (GroupReport &g : r->groups)
      g.group.site.line = g.group.name == "other (t.c:9)" ? 9 : 7;
  ReportDiff d = diff_reports(a, b);
  REQUIRE(d.kept.size() == 1);
  CHECK(d.kept[0].finding->kind == "line_straddle");
  // Another group's finding of the same kind is another finding.
  REQUIRE(d.resolved.size() == 1);
  CHECK(d.resolved[0].finding->kind == "page_spread");
  REQUIRE(d.added.size() == 1);
  CHECK(d.added[0].finding->kind == "page_spread");
}

// The fix renamed the function that allocates (and padded its record): its
// group was "resolved" and a new one appeared, with the finding's fate lost.
TEST_CASE("report_diff.a_function_renamed_at_the_same_line", "[report_diff]") {
  Report a = report({group(1, "make_node (kv.c:20)", "make_node", 48, 0.5),
                     group(2, "make_c (kv.c:40)", "make_c", 64, 0.25)},
                    {});
  Report b = report({group(3, "node_new (kv.c:20)", "node_new", 64, 0.5),
                     group(4, "make_c (kv.c:40)", "make_c", 64, 0.25)},
                    {});
  for (auto *r : {&a, &b})
    for (auto &g : r->groups)
      g.group.site.file = "/src/kv.c";
  a.groups[0].group.site.line = b.groups[0].group.site.line = 20;
  a.groups[1].group.site.line = b.groups[1].group.site.line = 40;
  ReportDiff d = diff_reports(a, b);
  CHECK(d.only_a.empty());
  CHECK(d.only_b.empty());
  REQUIRE(d.groups.size() == 2);
  const GroupDelta *renamed = nullptr;
  for (const auto &g : d.groups)
    if (g.matched_by == MatchedBy::kRenamed)
      renamed = &g;
  REQUIRE(renamed);
  CHECK(renamed->a->group.site.function == "make_node");
  CHECK(renamed->b->group.site.function == "node_new");
  CHECK(std::string(to_string(MatchedBy::kRenamed)) == "file and line, its function renamed");
  // Ten times the objects: another group that took the line, not the same.
  b.groups[0].objects = a.groups[0].objects * 10;
  ReportDiff far = diff_reports(a, b);
  CHECK(far.only_a.size() == 1);
  CHECK(far.only_b.size() == 1);
}

TEST_CASE("report_diff.lines_moved_by_an_edit_above_the_sites", "[report_diff]") {
  // A comment added at the top of the file moved every site a line down and
  // the fix padded make_a's record into another class: nothing has the same
  // name or call site, but each function has one group on each side.
  Report a = report({group(1, "make_a (p1.c:20)", "make_a", 48, 0.5),
                     group(2, "make_c (p1.c:40)", "make_c", 64, 0.25)},
                    {});
  Report b = report({group(3, "make_a (p1.c:21)", "make_a", 64, 0.5),
                     group(4, "make_c (p1.c:41)", "make_c", 64, 0.25)},
                    {});
  // Built in two directories, before and after: the files' paths differ.
  for (auto &g : a.groups)
    g.group.site.file = "/src/before/p1.c";
  for (auto &g : b.groups)
    g.group.site.file = "/src/after/p1.c";
  a.groups[0].group.site.line = 20;
  a.groups[1].group.site.line = 40;
  b.groups[0].group.site.line = 21;
  b.groups[1].group.site.line = 41;
  ReportDiff d = diff_reports(a, b);
  CHECK(d.only_a.empty());
  CHECK(d.only_b.empty());
  REQUIRE(d.groups.size() == 2);
  for (const auto &g : d.groups) {
    CHECK(g.matched_by == MatchedBy::kFunction);
    CHECK(g.a->group.site.function == g.b->group.site.function);
  }
  // Two groups of one function on each side, in different classes: still paired by class.
  Report c =
      report({group(1, "mk (t.c:7)", "mk", 32, 0.5), group(2, "mk (t.c:9)", "mk", 96, 0.5)}, {});
  Report e =
      report({group(5, "mk (t.c:8)", "mk", 96, 0.5), group(6, "mk (t.c:10)", "mk", 32, 0.5)}, {});
  ReportDiff d2 = diff_reports(c, e);
  REQUIRE(d2.groups.size() == 2);
  for (const auto &g : d2.groups)
    CHECK(g.a->group.size_class == g.b->group.size_class);
  // Different programs: nothing matches, and a note says so.
  Report x = report({group(1, "parse (x.c:3)", "parse", 32, 0.5)}, {});
  Report y = report({group(1, "emit (y.c:3)", "emit", 32, 0.5)}, {});
  x.groups[0].group.site.file = "/src/x.c";
  y.groups[0].group.site.file = "/src/y.c";
  ReportDiff d3 = diff_reports(x, y);
  CHECK(d3.groups.empty());
  bool noted = false;
  for (const auto &n : d3.notes)
    noted = noted || n.find("no group of A matched one of B") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("report_diff.set_fractions_within_the_estimates_error_are_unchanged", "[report_diff]") {
  // Two recordings of one binary: the frames differ, the estimate by 0.04.
  Report a = report({group(1, "mk (t.c:1)", "mk", 64, 0.50)}, {});
  Report b = report({group(1, "mk (t.c:1)", "mk", 64, 0.54)}, {});
  Report c = report({group(1, "mk (t.c:1)", "mk", 64, 0.70)}, {});
  auto l1 = [](const ReportDiff &d) {
    for (const auto &m : d.groups.at(0).metrics)
      if (m.metric == "set_effective_fraction_L1")
        return m.verdict;
    FAIL("no L1 metric");
    return Verdict::kSame;
  };
  CHECK(l1(diff_reports(a, b)) == Verdict::kSame);
  CHECK(l1(diff_reports(a, c)) == Verdict::kBetter);
  CHECK(l1(diff_reports(c, a)) == Verdict::kWorse);
}

TEST_CASE("report_diff.a_shared_requested_size_is_no_match_for_unlike_counts", "[report_diff]") {
  // Requests of 100-249 bytes at one site: A's glibc classes each have their
  // smallest request as the most common one, and B's pool (all of them) has
  // 100 too. The 2670 objects of A's first class were paired with all 15486
  // of the pool's, "pages/needed 9.40 -> 1.00 better".
  Report a = report({group(1, "mk (t.c:5)", "mk", 112, 0.5), group(2, "mk (t.c:5)", "mk", 160, 0.5),
                     group(3, "mk (t.c:5)", "mk", 256, 0.5)},
                    {});
  Report b = report({group(9, "pool.mk", "mk", 256, 1.0)}, {});
  for (Report *r : {&a, &b})
    for (GroupReport &g : r->groups)
      g.group.site.line = 5;
  a.groups[0].objects = 2670;
  a.groups[1].objects = 6000;
  a.groups[2].objects = 6816;
  a.groups[0].group.requested_size = 100;
  a.groups[1].group.requested_size = 105;
  a.groups[2].group.requested_size = 153;
  b.groups[0].objects = 15486;
  b.groups[0].group.requested_size = 100;
  ReportDiff d = diff_reports(a, b);
  REQUIRE(d.groups.size() == 1);
  CHECK(d.groups[0].matched_by == MatchedBy::kSiteMerged);
  CHECK(d.groups[0].merged_a.size() == 3);
  CHECK(d.only_a.empty());
}
