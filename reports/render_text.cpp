// The report for a terminal: where the heap is, the biggest groups with their
// layout figures, then what is wrong and what to change.
#include "alloc_site.h"
#include "render.h"
#include "text_format.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace memlayout::cli {
namespace {

// A number in `width` columns, as the table's other rows have it: a large
// one loses its decimals, then takes a k, M or G (a 2.7 GiB buffer spans
// 45 135 241 lines: "45135k").
std::string fitted(double v, int width, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  for (auto [scale, suffix] :
       {std::pair{1.0, ""}, std::pair{1e3, "k"}, std::pair{1e6, "M"}, std::pair{1e9, "G"}}) {
    if (static_cast<int>(s.size()) <= width)
      return s;
    s = fmt("%.0f", v / scale) + suffix;
  }
  return s;
}

// Bytes in binary units where the digits do not fit (1048576 as 1024K), as
// the byte columns beside it count in KiB and MiB.
std::string fitted_bytes(uint64_t v, int width) {
  std::string s = std::to_string(v);
  for (auto [shift, suffix] : {std::pair{10, "K"}, std::pair{20, "M"}, std::pair{30, "G"}}) {
    if (static_cast<int>(s.size()) <= width)
      return s;
    s = fmt("%.0f", static_cast<double>(v) / static_cast<double>(uint64_t{1} << shift)) + suffix;
  }
  return s;
}

struct Paint {
  bool on;
  std::string operator()(const std::string &s, const char *code) const {
    return on ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  }
};

std::string group_name(const inspector::Report &r, uint32_t id) {
  for (const auto &g : r.groups)
    if (g.group.id == id)
      return g.group.name;
  return "group " + std::to_string(id);
}

std::string offsets(const std::vector<std::pair<uint64_t, uint64_t>> &v, size_t n) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i)
    s += (i ? " " : "") + std::to_string(v[i].first) + "(" + std::to_string(v[i].second) + ")";
  return s.empty() ? "-" : s;
}

// The trace's aborted transactions and the groups whose lines they struck.
void htm_section(const inspector::Report &r, std::ostream &out, const Paint &paint, size_t top) {
  const inspector::HtmAbortReport &h = *r.htm;
  auto pct = [](uint64_t part, uint64_t whole) {
    return whole ? fmt("%.0f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                 : std::string("-");
  };
  out << paint("HTM aborts", "1") << ": " << h.transactions << " transactions completed, "
      << h.aborts << " aborted";
  if (h.transactions)
    out << " ("
        << fmt("%.2f", 1000.0 * static_cast<double>(h.aborts) / static_cast<double>(h.transactions))
        << " per 1000)";
  if (h.l1_sets)
    out << ", L1 " << h.l1_sets << "x" << h.l1_ways;
  out << "\n  conflict " << h.by_cause[0] << " (" << pct(h.conflicts_false, h.by_cause[0])
      << " false, " << pct(h.conflicts_true, h.by_cause[0]) << " true; "
      << pct(h.same_key, h.by_cause[0]) << " same key, " << pct(h.by_fallback_lock, h.by_cause[0])
      << " the fallback lock), capacity " << h.by_cause[1] << " (" << h.capacity_write << " write, "
      << h.capacity_read << " read), explicit " << h.by_cause[2] << ", other " << h.by_cause[3]
      << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%4s %-40s %7s %6s %8s  %s\n", "id", "group", "false", "true",
                "capacity", "false at offsets (aborts)");
  out << paint(line, "1");
  std::vector<std::string> names;
  for (const auto &g : r.groups)
    names.push_back(g.group.name);
  const DisplayNames display(names);
  size_t shown = 0;
  for (const auto &g : h.groups) {
    if (shown++ == top)
      break;
    std::snprintf(line, sizeof line, "%4u %s %7llu %6llu %8llu  %s\n", g.group,
                  fit_column(display(group_name(r, g.group)), 40).c_str(),
                  static_cast<unsigned long long>(g.conflicts_false),
                  static_cast<unsigned long long>(g.conflicts_true),
                  static_cast<unsigned long long>(g.capacity_aborts),
                  offsets(g.false_offsets, 5).c_str());
    out << line;
  }
  out << "\n";
}

} // namespace

void render_text(const inspector::Report &r, std::ostream &out, const TextOptions &o) {
  Paint paint{o.color};
  out << paint("memlayout report", "1") << " of " << r.trace << " at " << r.at << " ("
      << fmt("%.3f", static_cast<double>(r.at_ns) / 1e9)
      << " s): " << counted(r.live_objects, "live object") << ", "
      << human_bytes(static_cast<double>(r.live_bytes)) << " in "
      << counted(r.groups_total, "group") << ", allocator " << r.allocator
      << (r.partial ? ", PARTIAL TRACE" : "") << "\n";
  if (!r.cache_source.empty())
    out << "  caches from " << r.cache_source << ":\n";
  for (const auto &l : r.levels)
    out << "  L" << l.level << " " << human_bytes(static_cast<double>(l.size_bytes)) << " "
        << l.ways << "-way, " << l.sets << " sets, " << l.indexing << "ly indexed: " << l.bits
        << "\n";
  out << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%4s %-40s %9s %10s %6s %6s %6s %5s %5s %5s %12s\n", "id",
                "group", "objects", "bytes", "class", "lines", "strad", "L1", "L2", "L3",
                "pages/min");
  out << paint(line, "1");
  std::vector<std::string> names;
  for (const auto &g : r.groups)
    names.push_back(g.group.name);
  const DisplayNames display(names);
  size_t shown = 0;
  for (const auto &g : r.groups) {
    if (shown++ == o.top)
      break;
    auto frac = [&](size_t i) {
      if (!g.set_effective_fraction[i])
        return std::string("-");
      return fmt("%.2f", *g.set_effective_fraction[i]) + (g.set_bits[i].empty() ? "" : "*");
    };
    std::snprintf(
        line, sizeof line, "%4u %s %9llu %10s %6s %6s %5.0f%% %5s %5s %5s %12s\n", g.group.id,
        fit_column(display(g.group.name), 40).c_str(), static_cast<unsigned long long>(g.objects),
        human_bytes(static_cast<double>(g.group.bytes)).c_str(),
        fitted_bytes(g.group.size_class, 6).c_str(), fitted(g.lines_per_object, 6, 2).c_str(),
        g.straddle_fraction * 100, frac(0).c_str(), frac(1).c_str(), frac(2).c_str(),
        (std::to_string(g.pages_4k) + "/" + std::to_string(g.pages_min)).c_str());
    out << line;
  }
  if (r.groups.size() > o.top)
    out << "  ... " << r.groups.size() - o.top << " more groups (--top N, or --format json)\n";
  // Figures on fewer bits than their level's line above says, each said once.
  struct FewerBits {
    size_t level;
    std::string bits, ids;
  };
  std::vector<FewerBits> fewer_bits;
  shown = 0;
  for (const auto &g : r.groups) {
    if (shown++ == o.top)
      break;
    for (size_t i = 0; i < g.set_bits.size(); ++i) {
      if (g.set_bits[i].empty() || !g.set_effective_fraction[i])
        continue;
      auto it = std::find_if(fewer_bits.begin(), fewer_bits.end(), [&](const FewerBits &x) {
        return x.level == i + 1 && x.bits == g.set_bits[i];
      });
      if (it == fewer_bits.end())
        fewer_bits.push_back({i + 1, g.set_bits[i], std::to_string(g.group.id)});
      else
        it->ids += ", " + std::to_string(g.group.id);
    }
  }
  for (const auto &f : fewer_bits)
    out << "  * L" << f.level << " of group" << (f.ids.find(',') != std::string::npos ? "s " : " ")
        << f.ids << " " << f.bits
        << ": its pages were in no memory snapshot (freed before the next one)\n";
  // Which wrappers the shown groups' sites were found through, each once.
  std::vector<std::pair<inspector::LookedThrough, std::string>> through;
  shown = 0;
  for (const auto &g : r.groups) {
    if (shown++ == o.top)
      break;
    for (const auto &w : g.group.site.looked_through) {
      auto it = std::find_if(through.begin(), through.end(),
                             [&](const auto &t) { return t.first.function == w.function; });
      if (it == through.end())
        through.push_back({w, std::to_string(g.group.id)});
      else
        it->second += ", " + std::to_string(g.group.id);
    }
  }
  if (!through.empty()) {
    out << "\n";
    for (const auto &[w, ids] : through) {
      out << "  looked through: " << display_name(w.function) << " ("
          << inspector::wrapper_reason_name(w.reason);
      if (!w.evidence.empty())
        out << ": " << w.evidence;
      out << ") for group" << (ids.find(',') == std::string::npos ? " " : "s ") << ids << "\n";
    }
  }
  out << "\n";
  if (r.htm)
    htm_section(r, out, paint, o.top);
  if (!r.rules.empty()) {
    out << paint(r.rules_replayed ? "Rules the replay applied" : "Rules in force when recorded",
                 "1")
        << (r.rules_replayed ? " (to the allocations up to the analysed moment; `run` and "
                               "`record` count the whole run)"
                             : "")
        << "\n";
    for (const auto &rule : r.rules)
      out << "  " << rule.rule << ": " << rule.allocations << " allocations, "
          << human_bytes(static_cast<double>(rule.bytes))
          << (rule.allocations ? "" : "  (routed nothing)") << "\n";
    out << "\n";
  }
  if (r.findings.empty()) {
    out << paint("No findings:", "32") << " no group crosses a threshold (docs/findings.md).\n";
  } else {
    out << paint(counted(r.findings.size(), "finding"), "1") << "\n";
    for (const auto &f : r.findings) {
      const char *colour = f.severity == "high" ? "31" : f.severity == "medium" ? "33" : "36";
      out << "  " << paint("[" + f.severity + "]", colour) << " " << f.kind << ": "
          << with_display_names(f.message, names)
          << "\n      fix: " << fix_with_display_names(f.fix, names) << "\n";
    }
  }
  for (const auto &n : r.notes)
    out << "note: " << n << "\n";
}

} // namespace memlayout::cli
