// The report as JSON, schema memlayout.report/1 (../shared/design.md).
#include "alloc_site.h"
#include "json_write.h"
#include "render.h"

namespace memlayout::cli {
namespace {

Json group(const inspector::GroupReport &g) {
  Json j;
  j["id"] = g.group.id;
  j["name"] = g.group.name;
  if (!g.group.type.empty())
    j["type"] = g.group.type;
  Json site = {{"function", g.group.site.function},
               {"file", g.group.site.file},
               {"line", g.group.site.line}};
  if (g.group.site.column)
    site["column"] = g.group.site.column;
  if (!g.group.site.caller.empty())
    site["caller"] = g.group.site.caller;
  j["site"] = std::move(site);
  j["looked_through"] = Json::array();
  for (const auto &w : g.group.site.looked_through) {
    Json l = {{"function", w.function}, {"decided", inspector::looked_through_decided(w.reason)}};
    if (!w.evidence.empty())
      l["evidence"] = w.evidence;
    j["looked_through"].push_back(std::move(l));
  }
  j["size_class"] = g.group.size_class;
  j["requested_size"] = g.group.requested_size;
  j["requested_min"] = g.group.requested_min;
  j["requested_max"] = g.group.requested_max;
  j["objects"] = g.objects;
  j["bytes"] = g.group.bytes;
  j["threads"] = g.group.threads;
  j["lines_per_object"] = g.lines_per_object;
  j["straddle_fraction"] = g.straddle_fraction;
  // Always present, as the contract lists it: null where no --hot names the group.
  j["hot_bytes"] = g.hot_bytes ? Json(g.hot_bytes) : Json(nullptr);
  if (g.hot_bytes && g.hot_offset)
    j["hot_offset"] = g.hot_offset;
  Json sets = Json::object();
  for (size_t i = 0; i < g.set_effective_fraction.size(); ++i)
    sets["L" + std::to_string(i + 1)] = optional_number(g.set_effective_fraction[i]);
  j["set_effective_fraction"] = std::move(sets);
  // Only the levels where the group's figure rests on fewer bits than its level's.
  Json bits = Json::object();
  for (size_t i = 0; i < g.set_bits.size(); ++i)
    if (!g.set_bits[i].empty())
      bits["L" + std::to_string(i + 1)] = g.set_bits[i];
  j["set_bits"] = std::move(bits);
  j["strides"] = Json::array();
  for (const auto &s : g.strides)
    j["strides"].push_back({{"bytes", s.bytes}, {"share", s.share}});
  j["pages_4k"] = g.pages_4k;
  j["pages_min"] = g.pages_min;
  j["regions_2m"] = g.regions_2m;
  j["page_runs"] = g.page_runs;
  j["cross_thread_lines"] = g.cross_thread_lines;
  j["lines_total"] = g.lines_total;
  j["neighbours"] = Json::array();
  for (const auto &n : g.neighbours)
    j["neighbours"].push_back({{"group", n.group},
                               {"same_line", n.same_line},
                               {"adjacent_line", n.adjacent_line},
                               {"same_page", n.same_page}});
  return j;
}

Json offsets(const std::vector<std::pair<uint64_t, uint64_t>> &v) {
  Json a = Json::array();
  for (const auto &[off, n] : v)
    a.push_back({{"offset", off}, {"aborts", n}});
  return a;
}

// The trace's aborted transactions against the groups (docs/report.md).
Json htm(const inspector::HtmAbortReport &h) {
  Json j;
  j["transactions"] = h.transactions;
  j["aborts"] = h.aborts;
  j["by_cause"] = {{"conflict", h.by_cause[0]},
                   {"capacity", h.by_cause[1]},
                   {"explicit", h.by_cause[2]},
                   {"other", h.by_cause[3]}};
  j["conflicts"] = {{"true", h.conflicts_true},
                    {"false", h.conflicts_false},
                    {"same_key", h.same_key},
                    {"fallback_lock", h.by_fallback_lock},
                    {"plain", h.by_plain}};
  j["capacity"] = {{"write", h.capacity_write},
                   {"read", h.capacity_read},
                   {"mean_lines", h.capacity_mean_lines},
                   {"mean_sets", h.capacity_mean_sets}};
  j["l1"] = {{"sets", h.l1_sets}, {"ways", h.l1_ways}};
  j["unresolved"] = h.unresolved;
  j["regions"] = h.regions;
  j["groups"] = Json::array();
  for (const auto &g : h.groups) {
    Json x;
    x["group"] = g.group;
    x["conflicts_false"] = g.conflicts_false;
    x["conflicts_true"] = g.conflicts_true;
    x["neighbour_object_conflicts"] = g.neighbour_object_conflicts;
    x["capacity_aborts"] = g.capacity_aborts;
    x["capacity_lines"] = g.capacity_lines;
    x["capacity_same_page_offset"] = g.capacity_same_page_offset;
    x["false_offsets"] = offsets(g.false_offsets);
    x["other_offsets"] = offsets(g.other_offsets);
    x["capacity_offsets"] = offsets(g.capacity_offsets);
    x["sharers"] = Json::array();
    for (const auto &[id, n] : g.sharers)
      x["sharers"].push_back({{"group", id}, {"aborts", n}});
    j["groups"].push_back(std::move(x));
  }
  return j;
}

} // namespace

void render_json(const inspector::Report &r, std::ostream &out) {
  Json j;
  j["schema"] = inspector::kReportSchema;
  j["trace"] = r.trace;
  j["executable"] = r.executable;
  j["at"] = r.at;
  j["at_ns"] = r.at_ns;
  j["partial"] = r.partial;
  if (!r.damage.empty())
    j["damage"] = r.damage; // the trace is damaged there: what the reader said
  j["allocator"] = r.allocator;
  j["live_objects"] = r.live_objects;
  j["live_bytes"] = r.live_bytes;
  Json levels = Json::array();
  for (const auto &l : r.levels)
    levels.push_back({{"level", l.level},
                      {"type", l.type},
                      {"sets", l.sets},
                      {"ways", l.ways},
                      {"line_size", l.line_size},
                      {"size_bytes", l.size_bytes},
                      {"indexing", l.indexing},
                      {"bits", l.bits}});
  j["cache"] = {{"source", r.cache_source}, {"levels", std::move(levels)}};
  j["groups"] = Json::array();
  for (const auto &g : r.groups)
    j["groups"].push_back(group(g));
  j["findings"] = Json::array();
  for (const auto &f : r.findings) {
    Json x;
    x["kind"] = f.kind;
    x["severity"] = f.severity;
    x["groups"] = f.groups;
    x["metric"] = Json::object();
    for (const auto &[k, v] : f.metric)
      x["metric"][k] = v;
    x["message"] = f.message;
    x["fix"] = f.fix;
    if (!f.rule.empty())
      x["rule"] = f.rule;
    j["findings"].push_back(std::move(x));
  }
  if (r.htm)
    j["htm"] = htm(*r.htm);
  if (!r.rules.empty()) {
    j["rules"] = Json::array();
    if (r.rules_replayed)
      j["rules_from"] = "replay";
    for (const auto &rule : r.rules)
      j["rules"].push_back(
          {{"rule", rule.rule}, {"allocations", rule.allocations}, {"bytes", rule.bytes}});
  }
  j["notes"] = r.notes;
  write_json(j, out);
}

} // namespace memlayout::cli
