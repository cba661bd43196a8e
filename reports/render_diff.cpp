// A report diff for the terminal (the biggest changes first) and as
// memlayout.diff/1 JSON (docs/diff.md).
#include "render_diff.h"
#include "findings.h"
#include "json_write.h"

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

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

std::string clip(const std::string &s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "~";
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
  out << paint("memlayout diff", "1") << "\n  A: " << s.a << " (" << s.a_kind << "; "
      << describe(*d.a) << ")\n  B: " << s.b << " (" << s.b_kind << "; " << describe(*d.b) << ")\n";
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
    char line[512];
    std::snprintf(line, sizeof line, "%-44s %-18s %10s %10s %10s\n", "group", "metric", "A", "B",
                  "delta");
    out << paint(line, "1");
    for (size_t i = 0; i < rows.size() && i < o.rows; ++i) {
      const MetricDelta &m = *rows[i].metric;
      std::snprintf(line, sizeof line, "%-44s %-18s %10s %10s %10s",
                    clip(rows[i].group->b->group.name, 44).c_str(),
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
           "(pages closer to the minimum). Counts and size class are neither.\n";
    if (unchanged)
      out << unchanged << " matched group" << (unchanged == 1 ? "" : "s") << " unchanged.\n";
  }
  for (const auto &g : d.groups)
    if (g.a->group.name != g.b->group.name)
      out << "matched by " << inspector::to_string(g.matched_by) << ": " << g.a->group.name
          << " (A) = " << g.b->group.name << " (B)\n";
  only_text("Only in A", d.only_a, out);
  only_text("Only in B", d.only_b, out);
  out << "\n";
  // What the rules of a side recorded under rules routed (the fix at work).
  for (const auto *side : {d.a, d.b}) {
    if (side->rules.empty())
      continue;
    out << "Rules in force in " << (side == d.a ? "A" : "B") << ":\n";
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

using llvm::json::OStream;

void metric_json(OStream &j, const MetricDelta &m) {
  j.attributeObject(m.metric, [&] {
    optional_number(j, "a", m.a);
    optional_number(j, "b", m.b);
    optional_number(j, "delta", m.delta());
    j.attribute("better", inspector::to_string(m.better));
    j.attribute("verdict", inspector::to_string(m.verdict));
  });
}

void side_json(OStream &j, const char *key, const std::string &path, const std::string &kind,
               const inspector::Report &r) {
  j.attributeObject(key, [&] {
    j.attribute("source", path);
    j.attribute("kind", kind);
    j.attribute("trace", r.trace);
    j.attribute("allocator", r.allocator);
    j.attribute("at", r.at);
    j.attribute("partial", r.partial);
  });
}

void group_ref(OStream &j, const inspector::GroupReport &g) {
  j.object([&] {
    j.attribute("id", g.group.id);
    j.attribute("name", g.group.name);
    j.attributeObject("site", [&] {
      j.attribute("function", g.group.site.function);
      j.attribute("file", g.group.site.file);
      j.attribute("line", g.group.site.line);
    });
    j.attribute("size_class", g.group.size_class);
    j.attribute("objects", g.objects);
    j.attribute("bytes", g.group.bytes);
  });
}

void findings_json(OStream &j, const char *key, const std::vector<inspector::FindingRef> &list) {
  j.attributeArray(key, [&] {
    for (const auto &f : list)
      j.object([&] {
        j.attribute("kind", f.finding->kind);
        j.attribute("severity", f.finding->severity);
        j.attributeArray("groups", [&] {
          for (const auto &n : f.groups)
            j.value(n);
        });
        j.attribute("message", f.finding->message);
      });
  });
}

} // namespace

void render_diff_json(const inspector::ReportDiff &d, const DiffSources &s, std::ostream &out) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OStream j(os, 2);
  j.object([&] {
    j.attribute("schema", inspector::kDiffSchema);
    side_json(j, "a", s.a, s.a_kind, *d.a);
    side_json(j, "b", s.b, s.b_kind, *d.b);
    j.attributeObject("totals", [&] {
      metric_json(j, d.live_objects);
      metric_json(j, d.live_bytes);
      for (const auto &m : d.htm)
        metric_json(j, m);
    });
    j.attributeArray("groups", [&] {
      for (const auto &g : d.groups)
        j.object([&] {
          j.attribute("name", g.b->group.name);
          j.attribute("name_a", g.a->group.name);
          j.attribute("id_a", g.a->group.id);
          j.attribute("id_b", g.b->group.id);
          j.attribute("matched_by", inspector::to_string(g.matched_by));
          j.attribute("change", g.magnitude);
          j.attributeObject("metrics", [&] {
            for (const auto &m : g.metrics)
              metric_json(j, m);
          });
        });
    });
    j.attributeArray("only_in_a", [&] {
      for (const auto *g : d.only_a)
        group_ref(j, *g);
    });
    j.attributeArray("only_in_b", [&] {
      for (const auto *g : d.only_b)
        group_ref(j, *g);
    });
    j.attributeObject("rules", [&] {
      for (const auto *side : {d.a, d.b})
        j.attributeArray(side == d.a ? "a" : "b", [&] {
          for (const auto &rule : side->rules)
            j.object([&] {
              j.attribute("rule", rule.rule);
              j.attribute("allocations", rule.allocations);
              j.attribute("bytes", rule.bytes);
            });
        });
    });
    j.attributeObject("findings", [&] {
      findings_json(j, "resolved", d.resolved);
      findings_json(j, "new", d.added);
      findings_json(j, "kept", d.kept);
    });
    j.attributeArray("notes", [&] {
      for (const auto &n : d.notes)
        j.value(n);
    });
  });
  os.flush();
  out << text << '\n';
}

} // namespace memlayout::cli
