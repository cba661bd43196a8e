// The report JSON reader is the inverse of render_json: every field the JSON
// carries comes back equal, and anything but a memlayout.report/1 object is
// refused with where it went wrong.
#include "render.h"
#include "report_json.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace memlayout::inspector;

namespace {

Report sample() {
  Report r;
  r.trace = "before.trace";
  r.at = "mark:warm";
  r.at_ns = 123456789;
  r.partial = true;
  r.live_objects = 3;
  r.live_bytes = 208;
  r.allocator = "jemalloc";
  r.cache_source = "file cache.txt";
  r.levels = {{1, "Data", 64, 12, 64, 49152, "virtual", "bits 6-11"},
              {2, "Unified", 2048, 16, 64, 2u << 20, "physical", "bits 6-11 only"}};
  GroupReport g;
  g.group.id = 7;
  g.group.name = "mlr_new_node (node_descriptor.c:23)";
  g.group.site.function = "mlr_new_node";
  g.group.site.file = "node_descriptor.c";
  g.group.site.line = 23;
  g.group.size_class = 64;
  g.group.requested_size = 64;
  g.group.threads = {1, 4};
  g.group.bytes = 192;
  g.objects = 3;
  g.lines_per_object = 1.0 / 3.0; // not representable in few digits: exact round trip needed
  g.straddle_fraction = 0.25;
  g.hot_bytes = 24;
  g.hot_offset = 16;
  g.set_effective_fraction = {0.5, std::nullopt, std::nullopt};
  g.strides = {{128, 0.75}, {-64, 0.25}};
  g.pages_4k = 5;
  g.pages_min = 2;
  g.regions_2m = 1;
  g.page_runs = 3;
  g.cross_thread_lines = 4;
  g.lines_total = 9;
  g.neighbours = {{8, 1, 2, 3}};
  r.groups.push_back(g);
  GroupReport h;
  h.group.id = 8;
  h.group.name = "tiny";
  h.objects = 1;
  h.set_effective_fraction = {std::nullopt, 0.9, std::nullopt};
  r.groups.push_back(h);
  r.groups_total = 2;
  r.findings = {{"set_underutilization", "high", {7, 8}, {{"fraction", 0.5}}, "msg", "fix it", ""}};
  r.notes = {"only bits 6-11 known"};
  return r;
}

std::string render(const Report &r) {
  std::ostringstream out;
  memlayout::cli::render_json(r, out);
  return out.str();
}

} // namespace

TEST_CASE("report_json.round_trip", "[report_json]") {
  Report in = sample(), out;
  std::string error;
  REQUIRE(parse_report_json(render(in), "r.json", out, error));
  CHECK(error.empty());
  CHECK(out.trace == in.trace);
  CHECK(out.at == in.at);
  CHECK(out.at_ns == in.at_ns);
  CHECK(out.partial == in.partial);
  CHECK(out.live_objects == in.live_objects);
  CHECK(out.live_bytes == in.live_bytes);
  CHECK(out.allocator == in.allocator);
  CHECK(out.cache_source == in.cache_source);
  CHECK(out.groups_total == 2);
  REQUIRE(out.levels.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(out.levels[i].level == in.levels[i].level);
    CHECK(out.levels[i].type == in.levels[i].type);
    CHECK(out.levels[i].sets == in.levels[i].sets);
    CHECK(out.levels[i].ways == in.levels[i].ways);
    CHECK(out.levels[i].line_size == in.levels[i].line_size);
    CHECK(out.levels[i].size_bytes == in.levels[i].size_bytes);
    CHECK(out.levels[i].indexing == in.levels[i].indexing);
    CHECK(out.levels[i].bits == in.levels[i].bits);
  }
  REQUIRE(out.groups.size() == 2);
  const GroupReport &a = in.groups[0], &b = out.groups[0];
  CHECK(b.group.id == a.group.id);
  CHECK(b.group.name == a.group.name);
  CHECK(b.group.site.function == a.group.site.function);
  CHECK(b.group.site.file == a.group.site.file);
  CHECK(b.group.site.line == a.group.site.line);
  CHECK(b.group.size_class == a.group.size_class);
  CHECK(b.group.requested_size == a.group.requested_size);
  CHECK(b.group.threads == a.group.threads);
  CHECK(b.group.bytes == a.group.bytes);
  CHECK(b.objects == a.objects);
  CHECK(b.lines_per_object == a.lines_per_object);
  CHECK(b.straddle_fraction == a.straddle_fraction);
  CHECK(b.hot_bytes == a.hot_bytes);
  CHECK(b.hot_offset == a.hot_offset);
  CHECK(b.set_effective_fraction == a.set_effective_fraction);
  REQUIRE(b.strides.size() == 2);
  CHECK(b.strides[1].bytes == -64);
  CHECK(b.strides[1].share == 0.25);
  CHECK(b.pages_4k == a.pages_4k);
  CHECK(b.pages_min == a.pages_min);
  CHECK(b.regions_2m == a.regions_2m);
  CHECK(b.page_runs == a.page_runs);
  CHECK(b.cross_thread_lines == a.cross_thread_lines);
  CHECK(b.lines_total == a.lines_total);
  REQUIRE(b.neighbours.size() == 1);
  CHECK(b.neighbours[0].group == 8);
  CHECK(b.neighbours[0].same_page == 3);
  CHECK(out.groups[1].hot_bytes == 0);
  CHECK(out.groups[1].set_effective_fraction == in.groups[1].set_effective_fraction);
  REQUIRE(out.findings.size() == 1);
  CHECK(out.findings[0].kind == "set_underutilization");
  CHECK(out.findings[0].severity == "high");
  CHECK(out.findings[0].groups == std::vector<uint32_t>{7, 8});
  CHECK(out.findings[0].metric == in.findings[0].metric);
  CHECK(out.findings[0].message == "msg");
  CHECK(out.findings[0].fix == "fix it");
  CHECK(out.notes == in.notes);
  // And again: rendering what was read gives the same text.
  CHECK(render(out) == render(in));
}

TEST_CASE("report_json.refuses", "[report_json]") {
  Report out;
  std::string error;
  CHECK_FALSE(parse_report_json("[1, 2]", "a.json", out, error));
  CHECK(error.find("a.json") == 0);
  CHECK_FALSE(parse_report_json("{\"schema\": \"memlayout.report/2\"}", "b.json", out, error));
  CHECK(error.find("b.json") == 0);
  CHECK(error.find("memlayout.report/2") != std::string::npos);
  CHECK_FALSE(parse_report_json("{\"schema\": ", "c.json", out, error));
  CHECK(error.find("not JSON") != std::string::npos);
  // Nested 60 000 deep: refused before the parser's recursion overflows.
  std::string deep = "{\"schema\":\"memlayout.report/1\",\"x\":" + std::string(60000, '[') +
                     std::string(60000, ']') + "}";
  CHECK_FALSE(parse_report_json(deep, "d.json", out, error));
  CHECK(error == "d.json: offset 290: nested deeper than 256 levels (not a file memlayout wrote)");
  // Brackets inside strings are text, not nesting.
  std::string quoted = "{\"schema\":\"" + std::string(1000, '[') + "\"}";
  CHECK_FALSE(parse_report_json(quoted, "e.json", out, error));
  CHECK(error.find("nested") == std::string::npos);

  // A group without its object count: the path to it in the message.
  std::string text = render(sample());
  size_t at = text.find("\"objects\": 3");
  REQUIRE(at != std::string::npos);
  text.replace(at, 12, "\"objects\": \"3\"");
  CHECK_FALSE(parse_report_json(text, "d.json", out, error));
  CHECK(error.find("d.json: groups[0].'objects'") == 0);

  // Impossible shares (a saved baseline edited by hand): named, refused.
  Report impossible = sample();
  impossible.groups[0].set_effective_fraction[1] = 1.7;
  CHECK_FALSE(parse_report_json(render(impossible), "g.json", out, error));
  CHECK(error.find("g.json: groups[0].set_effective_fraction.'L2'") == 0);
  CHECK(error.find("a fraction from 0 to 1") != std::string::npos);
  impossible = sample();
  impossible.groups[0].straddle_fraction = -0.5;
  CHECK_FALSE(parse_report_json(render(impossible), "h.json", out, error));
  CHECK(error.find("h.json: groups[0].'straddle_fraction'") == 0);

  CHECK_FALSE(read_report_json("/nonexistent/e.json", out, error));
  CHECK(error.find("/nonexistent/e.json: cannot read") == 0);

  // A finding naming a group the report does not have, and two groups under
  // one id: a diff or advise would take them for other groups.
  Report dangling = sample();
  dangling.findings[0].groups = {7, 999};
  CHECK_FALSE(parse_report_json(render(dangling), "f.json", out, error));
  CHECK(error == "f.json: findings[0].groups: no group has the id 999");
  Report twice = sample();
  twice.groups.push_back(twice.groups[0]);
  CHECK_FALSE(parse_report_json(render(twice), "g.json", out, error));
  CHECK(error == "g.json: groups[2].id: 7 is the id of an earlier group too");
}
