// A report diff for the terminal (the biggest changes first) and as
// memlayout.diff/1 JSON (docs/diff.md).
#include "render_diff.h"
#include "findings.h"
#include "json_write.h"
#include "text_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace memlayout::cli {
namespace {

using inspector::MetricDelta;
using inspector::Verdict;

std::string fmt(const char *f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string bytes(double v) {
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const char *sign = v < 0 ? "-" : "";
  v = std::fabs(v);
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  return sign + fmt(i ? "%.1f " : "%.0f ", v) + unit[i];
}

bool is_bytes(const std::string &metric) {
  return metric == "bytes" || metric == "live_bytes" || metric == "size_class";
}

bool is_count(const std::string &metric) {
  return metric == "objects" || metric == "live_objects" || metric == "pages_4k" ||
         metric == "pages_min";
}

std::string value(const std::string &metric, const std::optional<double> &v) {
  if (!v)
    return "-";
  if (is_bytes(metric))
    return bytes(*v);
  if (is_count(metric))
    return fmt("%.0f", *v);
  return fmt("%.2f", *v);
}

std::string signed_value(const std::string &metric, double d) {
  if (is_bytes(metric))
    return (d >= 0 ? "+" : "") + bytes(d);
  return fmt(is_count(metric) ? "%+.0f" : "%+.2f", d);
}

std::string delta(const MetricDelta &m) {
  auto d = m.delta();
  return d ? signed_value(m.metric, *d) : std::string("n/a");
}

struct Paint {
  bool on;
  std::string operator()(const std::string &s, const char *code) const {
    return on ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  }
};

const char *verdict_colour(Verdict v) {
  return v == Verdict::kBetter ? "32" : v == Verdict::kWorse ? "31" : "0";
}

std::string describe(const inspector::Report &r) {
  return "allocator " + r.allocator + ", at " + r.at + ", " + std::to_string(r.live_objects) +
         " objects, " + bytes(static_cast<double>(r.live_bytes)) + (r.partial ? ", PARTIAL" : "");
}

std::string group_names(const std::vector<std::string> &names) {
  std::string s;
  for (const auto &n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s;
}

void findings_text(const char *title, const char *colour,
                   const std::vector<inspector::FindingRef> &list, const Paint &paint,
                   std::ostream &out) {
  out << paint(std::string(title) + " (" + std::to_string(list.size()) + ")", "1")
      << (list.empty() ? "\n" : ":\n");
  for (const auto &f : list)
    out << "  " << paint(f.finding->kind, colour) << " [" << f.finding->severity << "] "
        << group_names(f.groups) << ": " << f.finding->message << "\n";
}

void only_text(const char *title, const std::vector<const inspector::GroupReport *> &list,
               std::ostream &out) {
  if (list.empty())
    return;
  out << title << " (" << list.size() << "):\n";
  for (const auto *g : list)
    out << "  " << g->group.name << ": " << g->objects << " objects, "
        << bytes(static_cast<double>(g->group.bytes)) << ", size class " << g->group.size_class
        << "\n";
}

} // namespace

void render_diff_text(const inspector::ReportDiff &d, const DiffSources &s, std::ostream &out,
                      const DiffTextOptions &o) {
  Paint paint{o.color};
  // A report `replay` wrote predicts a layout; nothing was recorded so.
  auto kind = [](const std::string &k, const inspector::Report &r) {
    return r.rules_replayed ? std::string("replay's prediction") : k;
  };
  out << paint("memlayout diff", "1") << "\n  A: " << s.a << " (" << kind(s.a_kind, *d.a) << "; "
      << describe(*d.a) << ")\n  B: " << s.b << " (" << kind(s.b_kind, *d.b) << "; "
      << describe(*d.b) << ")\n";
  for (const auto *m : {&d.live_objects, &d.live_bytes})
    out << "  " << inspector::metric_label(m->metric) << " " << value(m->metric, m->a) << " -> "
        << value(m->metric, m->b) << " (" << delta(*m) << ")\n";
  for (const auto &m : d.htm)
    out << "  " << inspector::metric_label(m.metric) << " " << value(m.metric, m.a) << " -> "
        << value(m.metric, m.b) << " (" << delta(m) << ")\n";
  out << "\n";

  struct Row {
    const inspector::GroupDelta *group;
    const MetricDelta *metric;
  };
  std::vector<Row> rows;
  size_t unchanged = 0;
  for (const auto &g : d.groups) {
    size_t before = rows.size();
    for (const auto &m : g.metrics)
      if (m.verdict != Verdict::kSame)
        rows.push_back({&g, &m});
    unchanged += rows.size() == before;
  }
  // The table answers "what changed most", across groups; but a group of a
  // few objects (stdio's buffer) changes by 100% on a whim and matters
  // little, so such groups come after the real ones, as in findings.
  const uint64_t too_small = inspector::FindingThresholds{}.min_objects;
  auto small = [&](const Row &r) {
    return std::max(r.group->a->objects, r.group->b->objects) < too_small;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row &x, const Row &y) {
    if (small(x) != small(y))
      return small(y);
    return x.metric->magnitude > y.metric->magnitude;
  });
  if (rows.empty()) {
    out << "No layout metric changed in " << d.groups.size() << " matched groups.\n";
  } else {
    // Groups B names alike (one pool for several size classes) carry B's id,
    // as in its report's table, and say it is B's: A's report numbers them
    // otherwise.
    std::map<std::string, int> named;
    for (const auto &g : d.groups)
      ++named[g.b->group.name];
    auto label = [&](const inspector::GroupDelta &g) {
      if (named[g.b->group.name] < 2)
        return fit_column(g.b->group.name, 44);
      std::string id = " B#" + std::to_string(g.b->group.id);
      std::string name = fit_column(g.b->group.name, 44 - id.size());
      name.erase(name.find_last_not_of(' ') + 1); // cut, not padded: the id follows it
      return fit_column(name + id, 44);
    };
    char line[512];
    std::snprintf(line, sizeof line, "%-44s %-18s %10s %10s %10s\n", "group", "metric", "A", "B",
                  "delta");
    out << paint(line, "1");
    for (size_t i = 0; i < rows.size() && i < o.rows; ++i) {
      const MetricDelta &m = *rows[i].metric;
      std::snprintf(line, sizeof line, "%s %-18s %10s %10s %10s", label(*rows[i].group).c_str(),
                    inspector::metric_label(m.metric), value(m.metric, m.a).c_str(),
                    value(m.metric, m.b).c_str(), delta(m).c_str());
      out << line;
      if (m.verdict != Verdict::kChanged)
        out << "  " << paint(inspector::to_string(m.verdict), verdict_colour(m.verdict));
      out << "\n";
    }
    if (rows.size() > o.rows)
      out << "  ... " << rows.size() - o.rows << " more rows (--rows N, or --format json)\n";
    out << "better: set fractions up; straddle fraction, lines/object and pages/needed down "
           "(pages closer to the minimum), and 4 KiB pages down for the same objects. Other "
           "counts and size class are neither.\n";
    if (unchanged)
      out << unchanged << " matched group" << (unchanged == 1 ? "" : "s") << " unchanged.\n";
  }
  for (const auto &g : d.groups) {
    if (g.a->group.name == g.b->group.name && g.merged_a.empty())
      continue;
    std::string ids = "#" + std::to_string(g.a->group.id);
    for (const auto *x : g.merged_a)
      if (x != g.a)
        ids += ", #" + std::to_string(x->group.id);
    out << "matched by " << inspector::to_string(g.matched_by) << ": " << g.a->group.name << " (A "
        << ids << ") = " << g.b->group.name << " (B #" << g.b->group.id << ")\n";
  }
  only_text("Only in A", d.only_a, out);
  only_text("Only in B", d.only_b, out);
  out << "\n";
  // What the rules of a side recorded under rules routed (the fix at work).
  for (const auto *side : {d.a, d.b}) {
    if (side->rules.empty())
      continue;
    out << (side->rules_replayed ? "Rules the replay applied in " : "Rules in force in ")
        << (side == d.a ? "A" : "B") << ":\n";
    for (const auto &rule : side->rules)
      out << "  " << rule.rule << ": " << rule.allocations << " allocations, "
          << bytes(static_cast<double>(rule.bytes))
          << (rule.allocations ? "" : "  (routed nothing)") << "\n";
    out << "\n";
  }
  findings_text("Findings resolved", "32", d.resolved, paint, out);
  findings_text("Findings new", "31", d.added, paint, out);
  findings_text("Findings kept", "33", d.kept, paint, out);
  for (const auto &n : d.notes)
    out << "note: " << n << "\n";
}

namespace {

// Counts and byte sizes are whole numbers, as the reports write them.
Json metric_number(const std::string &metric, const std::optional<double> &v) {
  if (!v || !(is_count(metric) || is_bytes(metric)))
    return optional_number(v);
  return Json(static_cast<int64_t>(std::llround(*v)));
}

void add_metric(Json &into, const MetricDelta &m) {
  into[m.metric] = {{"a", metric_number(m.metric, m.a)},
                    {"b", metric_number(m.metric, m.b)},
                    {"delta", metric_number(m.metric, m.delta())},
                    {"better", inspector::to_string(m.better)},
                    {"verdict", inspector::to_string(m.verdict)}};
}

Json side_json(const std::string &path, const std::string &kind, const inspector::Report &r) {
  Json j = {{"source", path},           {"kind", kind}, {"trace", r.trace},
            {"allocator", r.allocator}, {"at", r.at},   {"partial", r.partial}};
  if (r.rules_replayed)
    j["rules_from"] = "replay";
  return j;
}

Json group_ref(const inspector::GroupReport &g) {
  return {{"id", g.group.id},
          {"name", g.group.name},
          {"site",
           {{"function", g.group.site.function},
            {"file", g.group.site.file},
            {"line", g.group.site.line}}},
          {"size_class", g.group.size_class},
          {"objects", g.objects},
          {"bytes", g.group.bytes}};
}

Json findings_json(const std::vector<inspector::FindingRef> &list) {
  Json a = Json::array();
  for (const auto &f : list)
    a.push_back({{"kind", f.finding->kind},
                 {"severity", f.finding->severity},
                 {"groups", f.groups},
                 {"message", f.finding->message}});
  return a;
}

Json rules_json(const inspector::Report &r) {
  Json a = Json::array();
  for (const auto &rule : r.rules)
    a.push_back({{"rule", rule.rule}, {"allocations", rule.allocations}, {"bytes", rule.bytes}});
  return a;
}

} // namespace

void render_diff_json(const inspector::ReportDiff &d, const DiffSources &s, std::ostream &out) {
  Json j;
  j["schema"] = inspector::kDiffSchema;
  j["a"] = side_json(s.a, s.a_kind, *d.a);
  j["b"] = side_json(s.b, s.b_kind, *d.b);
  Json totals = Json::object();
  add_metric(totals, d.live_objects);
  add_metric(totals, d.live_bytes);
  for (const auto &m : d.htm)
    add_metric(totals, m);
  j["totals"] = std::move(totals);
  j["groups"] = Json::array();
  for (const auto &g : d.groups) {
    Json x = {{"name", g.b->group.name},
              {"name_a", g.a->group.name},
              {"id_a", g.a->group.id},
              {"id_b", g.b->group.id},
              {"matched_by", inspector::to_string(g.matched_by)},
              {"change", g.magnitude}};
    if (!g.merged_a.empty()) {
      Json ids = Json::array();
      for (const auto *x : g.merged_a)
        ids.push_back(x->group.id);
      x["ids_a"] = std::move(ids); // every group of A it stands for
    }
    Json metrics = Json::object();
    for (const auto &m : g.metrics)
      add_metric(metrics, m);
    x["metrics"] = std::move(metrics);
    j["groups"].push_back(std::move(x));
  }
  j["only_in_a"] = Json::array();
  for (const auto *g : d.only_a)
    j["only_in_a"].push_back(group_ref(*g));
  j["only_in_b"] = Json::array();
  for (const auto *g : d.only_b)
    j["only_in_b"].push_back(group_ref(*g));
  j["rules"] = {{"a", rules_json(*d.a)}, {"b", rules_json(*d.b)}};
  j["findings"] = {{"resolved", findings_json(d.resolved)},
                   {"new", findings_json(d.added)},
                   {"kept", findings_json(d.kept)}};
  j["notes"] = d.notes;
  write_json(j, out);
}

} // namespace memlayout::cli
