// The report as one HTML page with its figures beside it: readable offline,
// in a mail attachment or a CI artifact, so inline CSS, no script and nothing
// fetched from elsewhere.
#include "alloc_site.h"
#include "fix_ranking.h"
#include "gnuplot.h"
#include "plot_scripts.h"
#include "render.h"
#include "text_format.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace memlayout::cli {
namespace {

// A word as a shell takes it: quoted where it holds anything but the
// characters of plain paths and marks.
std::string shell_quoted(const std::string &w) {
  auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-:+=,@%", c);
  };
  if (!w.empty() && std::all_of(w.begin(), w.end(), plain))
    return w;
  std::string out = "'";
  for (char c : w)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

using inspector::Report;

constexpr const char *kStyle = R"(
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th { background: #f3f3f3; } td.name, th.name { text-align: left; }
.finding { border-left: 5px solid #888; padding: 0.3em 0.8em; margin: 0.8em 0; background: #fafafa; }
.high { border-color: #c0392b; } .medium { border-color: #e67e22; } .low { border-color: #2980b9; }
.sev { font-weight: bold; text-transform: uppercase; font-size: 0.8em; }
span.sev.high { color: #c0392b; } span.sev.medium { color: #d35400; } span.sev.low { color: #2471a3; }
ol.first li { margin: 0.4em 0; } .why { color: #666; font-size: 0.9em; }
details summary { cursor: pointer; margin: 0.5em 0; color: #333; }
code { background: #f0f0f0; padding: 0 0.2em; }
.note { background: #fff8e1; padding: 0.3em 0.8em; margin: 0.3em 0; }
.partial { background: #fdecea; padding: 0.5em; font-weight: bold; }
figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; max-width: 720px; }
img { max-width: 100%; border: 1px solid #eee; }
)";

std::string esc(const std::string &text) {
  const std::string s = valid_utf8(text);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

void summary(const Report &r, std::ostream &h) {
  h << "<h1>memlayout report</h1>\n<p>Trace <code>" << esc(r.trace) << "</code> at <b>" << esc(r.at)
    << "</b> (" << fmt("%.3f", static_cast<double>(r.at_ns) / 1e9)
    << " s): " << counted(r.live_objects, "live object") << ", "
    << human_bytes(static_cast<double>(r.live_bytes)) << " in " << counted(r.groups_total, "group")
    << "; allocator " << esc(r.allocator) << ".</p>\n";
  if (r.partial)
    h << "<p class=\"partial\">Partial trace: this is the layout of its readable part.</p>\n";
}

void levels(const Report &r, std::ostream &h) {
  h << "<h2>Cache levels</h2>\n<table>\n<tr><th>level</th><th>size</th><th>ways</th><th>sets</th>"
       "<th>line</th><th>indexing</th><th class=\"name\">address bits the figures rest on</th>"
       "</tr>\n";
  for (const auto &l : r.levels)
    h << "<tr><td>L" << l.level << "</td><td>" << human_bytes(static_cast<double>(l.size_bytes))
      << "</td><td>" << l.ways << "</td><td>" << l.sets << "</td><td>" << l.line_size
      << " B</td><td>" << esc(l.indexing) << "</td><td class=\"name\">" << esc(l.bits)
      << "</td></tr>\n";
  h << "</table>\n";
}

std::string group_name(const Report &r, uint32_t id);

std::vector<std::string> group_names(const Report &r) {
  std::vector<std::string> names;
  for (const auto &g : r.groups)
    names.push_back(g.group.name);
  return names;
}

// The fixes ranked by the memory they touch, above the findings they come from.
void first_steps(const Report &r, const DisplayNames &shown, std::ostream &h) {
  std::vector<inspector::RankedFix> fixes = inspector::rank_fixes(r);
  if (fixes.empty())
    return;
  const std::vector<std::string> names = group_names(r);
  h << "<h2>What to do first</h2>\n<ol class=\"first\">\n";
  for (size_t i = 0; i < fixes.size() && i < 5; ++i) {
    const auto &x = fixes[i];
    h << "<li><span class=\"sev " << esc(x.severity) << "\">" << esc(x.severity) << "</span> <b>"
      << human_bytes(static_cast<double>(x.bytes)) << "</b> in ";
    for (size_t k = 0; k < x.groups.size(); ++k)
      h << (k ? ", " : "") << esc(shown(group_name(r, x.groups[k])));
    h << ": " << esc(fix_with_display_names(x.fix, names)) << " <span class=\"why\">(";
    for (size_t k = 0; k < x.findings.size(); ++k)
      h << (k ? ", " : "") << esc(x.findings[k]->kind);
    h << ")</span></li>\n";
  }
  h << "</ol>\n";
  if (fixes.size() > 5)
    h << "<p>... " << fixes.size() - 5 << " more fixes below.</p>\n";
  // The same analysis as this page: its moment, type map and caches.
  std::string same;
  if (!r.at.empty() && r.at != "peak")
    same += " --at " + shell_quoted(r.at);
  if (!r.type_map.empty())
    same += " --types " + shell_quoted(r.type_map);
  if (!r.cache_file.empty())
    same += " --cache " + shell_quoted(r.cache_file);
  for (const std::string &hot : r.hot)
    same += " --hot " + shell_quoted(hot);
  h << "<p>All of them as a rules file: <code>memlayout advise " << esc(shell_quoted(r.trace))
    << esc(same)
    << " -o rules.txt</code>; whether they pay: <code>memlayout compare --rules rules.txt -- "
       "PROGRAM</code>.</p>\n";
}

void findings(const Report &r, std::ostream &h) {
  h << "<h2>Findings</h2>\n";
  if (r.findings.empty())
    h << "<p>No findings: no group crosses a threshold.</p>\n";
  const std::vector<std::string> names = group_names(r);
  for (const auto &f : r.findings)
    h << "<div class=\"finding " << esc(f.severity) << "\"><span class=\"sev\">" << esc(f.severity)
      << "</span> <b>" << esc(f.kind) << "</b>: " << esc(with_display_names(f.message, names))
      << "<br>fix: <code>" << esc(fix_with_display_names(f.fix, names)) << "</code></div>\n";
}

void group_row(const Report &r, const DisplayNames &shown, const inspector::GroupReport &g,
               std::ostream &h) {
  h << "<tr><td>" << g.group.id << "</td><td class=\"name\" title=\"" << esc(g.group.name) << "\">"
    << esc(shown(g.group.name)) << "</td><td>" << g.objects << "</td><td>"
    << human_bytes(static_cast<double>(g.group.bytes)) << "</td><td>" << g.group.requested_size
    << "</td><td>" << g.group.size_class << "</td><td>" << fmt("%.2f", g.lines_per_object)
    << "</td><td>" << fmt("%.0f%%", g.straddle_fraction * 100) << "</td>";
  for (const auto &l : r.levels) {
    const auto i = static_cast<size_t>(l.level - 1);
    const bool have = i < g.set_effective_fraction.size() && g.set_effective_fraction[i];
    if (have && !g.set_bits[i].empty())
      h << "<td title=\"" << esc("on " + g.set_bits[i] + ": pages no memory snapshot mapped")
        << "\">" << fmt("%.2f", *g.set_effective_fraction[i]) << "*</td>";
    else
      h << "<td>" << (have ? fmt("%.2f", *g.set_effective_fraction[i]) : "-") << "</td>";
  }
  h << "<td>" << g.pages_4k << " / " << g.pages_min << "</td><td>" << g.regions_2m << "</td><td>"
    << g.group.threads.size() << "</td></tr>\n";
}

void group_header(const Report &r, std::ostream &h) {
  h << "<table>\n<tr><th>id</th><th class=\"name\">group</th><th>objects</th>"
       "<th>bytes</th><th>requested</th><th>class</th><th>lines/object</th><th>straddle</th>";
  for (const auto &l : r.levels)
    h << "<th>L" << l.level << " sets</th>";
  h << "<th>pages / min</th><th>2 MiB regions</th><th>threads</th></tr>\n";
}

// Groups under 1% of the objects and of the bytes (stdio's buffer, a
// thread's TLS) fold into one line that opens on demand.
void groups(const Report &r, const DisplayNames &shown, std::ostream &h, size_t top) {
  h << "<h2>Groups</h2>\n";
  uint64_t objects = 0, bytes = 0;
  for (const auto &g : r.groups) {
    objects += g.objects;
    bytes += g.group.bytes;
  }
  auto small = [&](const inspector::GroupReport &g) {
    return g.objects * 100 < objects && g.group.bytes * 100 < bytes;
  };
  std::vector<const inspector::GroupReport *> big, folded;
  for (const auto &g : r.groups)
    (small(g) || big.size() >= top ? folded : big).push_back(&g);
  group_header(r, h);
  for (const auto *g : big)
    group_row(r, shown, *g, h);
  h << "</table>\n";
  if (!folded.empty()) {
    uint64_t fo = 0, fb = 0;
    for (const auto *g : folded) {
      fo += g->objects;
      fb += g->group.bytes;
    }
    h << "<details><summary>" << counted(folded.size(), "more group") << ": "
      << counted(fo, "object") << ", " << human_bytes(static_cast<double>(fb))
      << " (each under 1% of the objects and bytes, or "
      << "beyond the first " << top << ")</summary>\n";
    group_header(r, h);
    for (const auto *g : folded)
      group_row(r, shown, *g, h);
    h << "</table>\n</details>\n";
  }
  // The wrappers the listed groups' sites were found through, each once.
  std::vector<std::pair<const inspector::LookedThrough *, std::string>> through;
  for (const auto *g : big)
    for (const auto &w : g->group.site.looked_through) {
      auto it = std::find_if(through.begin(), through.end(),
                             [&](const auto &t) { return t.first->function == w.function; });
      if (it == through.end())
        through.push_back({&w, std::to_string(g->group.id)});
      else
        it->second += ", " + std::to_string(g->group.id);
    }
  for (const auto &[w, ids] : through)
    h << "<p class=\"note\">looked through <code title=\"" << esc(w->function) << "\">"
      << esc(display_name(w->function)) << "</code> ("
      << esc(inspector::wrapper_reason_name(w->reason))
      << (w->evidence.empty() ? "" : ": " + esc(w->evidence)) << ") to find the sites of group"
      << (ids.find(',') == std::string::npos ? " " : "s ") << ids << "</p>\n";
}

std::string offsets_html(const std::vector<std::pair<uint64_t, uint64_t>> &v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 6; ++i)
    s += (i ? ", " : "") + std::to_string(v[i].first) + " (" + std::to_string(v[i].second) + ")";
  return s.empty() ? "-" : s;
}

// The trace's aborted transactions and the groups whose lines they struck.
void htm_aborts(const Report &r, const DisplayNames &shown, std::ostream &h) {
  if (!r.htm)
    return;
  const inspector::HtmAbortReport &a = *r.htm;
  h << "<h2>HTM aborts</h2>\n<p>" << a.transactions << " transactions completed, " << a.aborts
    << " aborted: conflict " << a.by_cause[0] << " (" << a.conflicts_false << " false, "
    << a.conflicts_true << " true; " << a.same_key << " same key, " << a.by_fallback_lock
    << " the fallback lock), capacity " << a.by_cause[1] << ", explicit " << a.by_cause[2]
    << ", other " << a.by_cause[3];
  if (a.l1_sets)
    h << "; L1 model " << a.l1_sets << " sets x " << a.l1_ways << " ways";
  h << ".</p>\n<table>\n<tr><th>id</th><th class=\"name\">group</th><th>false conflicts</th>"
       "<th>true conflicts</th><th>capacity aborts</th><th>false at offsets (aborts)</th>"
       "<th>other side at</th><th>capacity lines at</th></tr>\n";
  for (const auto &g : a.groups)
    h << "<tr><td>" << g.group << "</td><td class=\"name\">" << esc(shown(group_name(r, g.group)))
      << "</td><td>" << g.conflicts_false << "</td><td>" << g.conflicts_true << "</td><td>"
      << g.capacity_aborts << "</td><td>" << offsets_html(g.false_offsets) << "</td><td>"
      << offsets_html(g.other_offsets) << "</td><td>" << offsets_html(g.capacity_offsets)
      << "</td></tr>\n";
  h << "</table>\n";
}

void rules_in_force(const Report &r, std::ostream &h) {
  if (r.rules.empty())
    return;
  h << "<h2>" << (r.rules_replayed ? "Rules the replay applied" : "Rules in force when recorded")
    << "</h2>\n<table>\n<tr><th class=\"name\">rule</th>"
       "<th>allocations</th><th>bytes</th></tr>\n";
  for (const auto &rule : r.rules)
    h << "<tr><td class=\"name\"><code>" << esc(rule.rule) << "</code></td><td>" << rule.allocations
      << (rule.allocations ? "" : " (routed nothing)") << "</td><td>"
      << human_bytes(static_cast<double>(rule.bytes)) << "</td></tr>\n";
  h << "</table>\n";
}

std::string group_name(const Report &r, uint32_t id) {
  for (const auto &g : r.groups)
    if (g.group.id == id)
      return g.group.name;
  return "group " + std::to_string(id);
}

void figure(const PlotScript &p, std::ostream &h) {
  h << "<figure><img src=\"" << esc(p.svg) << "\" alt=\"" << esc(p.kind) << "\"><figcaption>"
    << esc(p.caption) << "</figcaption></figure>\n";
}

void plots(const Report &r, const DisplayNames &shown, const std::vector<PlotScript> &drawn,
           std::ostream &h) {
  if (drawn.empty())
    return;
  h << "<h2>Plots</h2>\n";
  uint32_t current = 0;
  for (const auto &p : drawn) {
    if (p.group == 0) {
      h << "<h3>Co-location of the largest groups</h3>\n";
    } else if (p.group != current) {
      current = p.group;
      h << "<h3>Group " << p.group << ": " << esc(shown(group_name(r, p.group))) << "</h3>\n";
    }
    figure(p, h);
  }
}

void notes(const std::vector<std::string> &all, std::ostream &h) {
  if (all.empty())
    return;
  h << "<h2>Notes</h2>\n";
  for (const auto &n : all)
    h << "<p class=\"note\">" << esc(n) << "</p>\n";
}

} // namespace

bool render_html(const Report &r, const HtmlOptions &o, std::string &error) {
  std::vector<PlotScript> scripts;
  if (!write_plot_scripts(r, o.dir, scripts, error))
    return false;
  std::vector<std::string> all_notes = r.notes;
  std::vector<PlotScript> drawn;
  std::string plot_error;
  if (!scripts.empty() && o.gnuplot.empty()) {
    all_notes.push_back("plots need gnuplot (apt-get install gnuplot-nox): their scripts are in " +
                        o.dir +
                        "; run gnuplot on each .gp file there for its SVG beside it, or "
                        "install gnuplot and run the report again for a page that shows them");
  } else {
    for (const auto &s : scripts) {
      std::string e;
      if (run_gnuplot(o.gnuplot, o.dir, s.script, e))
        drawn.push_back(s);
      else if (plot_error.empty())
        plot_error = e;
    }
    if (!plot_error.empty())
      all_notes.push_back(plot_error);
  }
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<title>memlayout report: " << esc(r.trace) << "</title>\n<style>" << kStyle
    << "</style>\n</head>\n<body>\n";
  const DisplayNames shown(group_names(r));
  summary(r, h);
  first_steps(r, shown, h);
  findings(r, h);
  levels(r, h);
  groups(r, shown, h, o.top);
  htm_aborts(r, shown, h);
  rules_in_force(r, h);
  plots(r, shown, drawn, h);
  notes(all_notes, h);
  h << "</body>\n</html>\n";
  const std::string path = o.dir + "/index.html";
  std::ofstream f(path, std::ios::trunc);
  f << h.str();
  f.close();
  if (!f) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  if (!plot_error.empty()) {
    error = plot_error;
    return false;
  }
  return true;
}

} // namespace memlayout::cli
