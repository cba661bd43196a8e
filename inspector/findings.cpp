#include "findings.h"

#include "rules.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace memlayout::inspector {
namespace {

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", f * 100);
  return b;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

// How a rule names a group for `memlayout advise` / --segregate.
// An unresolved site ("??") cannot be named by function: match its size.
std::string rule_match(const Group &g) {
  if (!g.site.function.empty() && g.site.function.find("??") == std::string::npos)
    return "function=" + g.site.function;
  return "size=" + std::to_string(g.requested_size);
}

// A short pool name from the site's function: its last two scopes
// ("IntLf.new_node"), in the characters rules allow.
std::string pool_name(const Group &g) {
  bool named = !g.site.function.empty() && g.site.function.find("??") == std::string::npos;
  char scopes[rules::kMaxName];
  if (!named || !rules::normalize_function(g.site.function.c_str(), scopes, sizeof scopes))
    return "group" + std::to_string(g.id);
  std::string n = scopes;
  size_t last = n.rfind("::");
  if (last != std::string::npos) {
    size_t before = last ? n.rfind("::", last - 1) : std::string::npos;
    n = n.substr(before == std::string::npos ? 0 : before + 2);
    n.replace(n.find("::"), 2, ".");
  }
  for (char &c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  if (n.size() > rules::kMaxPoolName - 1)
    n = n.substr(n.size() - (rules::kMaxPoolName - 1));
  return n;
}

const GroupReport *by_id(const Report &r, uint32_t id) {
  for (const auto &g : r.groups)
    if (g.group.id == id)
      return &g;
  return nullptr;
}

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

// Objects of a group with another group's object on one of their lines or
// on the other line of their 128-byte pair, as a share of its objects. The
// two counts overlap (an object can have both), so the larger one stands for
// "on or next to" and never exceeds all of them.
double next_to_share(const GroupReport &g, const GroupReport::Neighbour &n) {
  if (!g.objects)
    return 0;
  return static_cast<double>(std::max(n.same_line, n.adjacent_line)) /
         static_cast<double>(g.objects);
}

// The neighbour whose objects sit next to this group's the most (same or
// adjacent line), other than itself.
const GroupReport::Neighbour *closest_neighbour(const GroupReport &g) {
  const GroupReport::Neighbour *best = nullptr;
  for (const auto &n : g.neighbours) {
    if (n.group == g.group.id)
      continue;
    if (!best || n.same_line + n.adjacent_line > best->same_line + best->adjacent_line)
      best = &n;
  }
  return best;
}

void set_underutilization(const Report &r, const GroupReport &g, const FindingThresholds &t,
                          std::vector<Finding> &out) {
  int worst = -1;
  double worst_f = 1;
  for (size_t i = 0; i < g.set_effective_fraction.size() && i < r.levels.size(); ++i) {
    const auto &f = g.set_effective_fraction[i];
    if (!f || g.lines_counted[i] < t.set_min_lines)
      continue;
    if (*f < worst_f) {
      worst_f = *f;
      worst = static_cast<int>(i);
    }
  }
  if (worst < 0 || worst_f >= t.set_fraction_medium)
    return;
  Finding f;
  f.kind = "set_underutilization";
  f.severity = worst_f < t.set_fraction_high ? "high" : "medium";
  f.groups = {g.group.id};
  for (size_t i = 0; i < g.set_effective_fraction.size() && i < r.levels.size(); ++i)
    if (g.set_effective_fraction[i])
      f.metric["set_effective_fraction_L" + std::to_string(r.levels[i].level)] =
          *g.set_effective_fraction[i];
  const ReportCacheLevel &lvl = r.levels[static_cast<size_t>(worst)];
  f.message = g.group.name + " uses " + pct(worst_f) + " of the L" + std::to_string(lvl.level) +
              " sets (" + std::to_string(g.lines_counted[static_cast<size_t>(worst)]) +
              " lines): it runs as if that cache were " + num(1 / worst_f) + "x smaller";
  const GroupReport::Neighbour *n = closest_neighbour(g);
  const GroupReport *other = n ? by_id(r, n->group) : nullptr;
  if (other && next_to_share(g, *n) >= t.interleave_share &&
      other->group.size_class == g.group.size_class) {
    f.message += ", interleaved with " + other->group.name + " in the " +
                 std::to_string(g.group.size_class) + "-byte size class";
    f.fix = "segregate " + g.group.name + " from " + other->group.name + ": --segregate " +
            rule_match(g.group) + ",pool=" + pool_name(g.group);
  } else if (!g.strides.empty() && g.strides[0].share >= 0.5 && g.strides[0].bytes >= 128 &&
             is_pow2(static_cast<uint64_t>(std::llabs(g.strides[0].bytes)))) {
    uint64_t lines = static_cast<uint64_t>(std::llabs(g.strides[0].bytes)) / 64;
    f.message += "; its objects sit " + std::to_string(g.strides[0].bytes) + " bytes apart";
    f.fix = "pad the objects to an odd number of lines (e.g. " + std::to_string((lines + 1) * 64) +
            " bytes: pad=" + std::to_string((lines + 1) * 64) +
            ") or segregate them: --segregate " + rule_match(g.group) +
            ",pool=" + pool_name(g.group);
  } else {
    f.fix = "segregate " + g.group.name + " into its own pool: --segregate " + rule_match(g.group) +
            ",pool=" + pool_name(g.group);
  }
  out.push_back(std::move(f));
}

void line_straddle(const GroupReport &g, const FindingThresholds &t, std::vector<Finding> &out) {
  uint64_t extent = g.hot_bytes ? g.hot_bytes : g.group.requested_size;
  if (g.objects < t.min_objects || g.straddle_fraction < t.straddle_medium ||
      extent > t.straddle_max_bytes)
    return;
  Finding f;
  f.kind = "line_straddle";
  f.severity = g.straddle_fraction >= t.straddle_high ? "high" : "medium";
  f.groups = {g.group.id};
  f.metric["straddle_fraction"] = g.straddle_fraction;
  f.metric["lines_per_object"] = g.lines_per_object;
  uint64_t bytes = g.hot_bytes ? g.hot_bytes : g.group.requested_size;
  f.message = pct(g.straddle_fraction) + " of " + g.group.name + "'s objects have their " +
              (g.hot_bytes ? "hot " + std::to_string(g.hot_bytes) + " bytes"
                           : std::to_string(bytes) + " bytes") +
              " across a line boundary: one more cache miss each";
  // In a pool of their own: aligned objects served from the size class they
  // grow into would interleave with that class's other groups.
  const std::string rule = rule_match(g.group) + ",pool=" + pool_name(g.group) + ",align=64";
  if (bytes <= 64)
    f.fix = "align the objects to 64 bytes, in a pool of their own: --segregate " + rule;
  else
    f.fix = "put the fields searches read first, pass --hot to measure them, and align to 64: "
            "--segregate " +
            rule;
  out.push_back(std::move(f));
}

void pair_findings(const Report &r, const GroupReport &g, const FindingThresholds &t,
                   std::vector<Finding> &out) {
  if (g.objects < t.min_objects)
    return;
  for (const auto &n : g.neighbours) {
    if (n.group == g.group.id)
      continue;
    const GroupReport *other = by_id(r, n.group);
    if (!other)
      continue;
    double next_to = next_to_share(g, n);
    // Reported once per pair: from the bigger group's side.
    bool first = g.group.id < other->group.id;
    if (first && other->group.size_class == g.group.size_class && next_to >= t.interleave_share) {
      Finding f;
      f.kind = "size_class_sharing";
      f.severity = next_to >= 0.5 ? "medium" : "low";
      f.groups = {g.group.id, other->group.id};
      f.metric["interleaved_share"] = next_to;
      f.metric["size_class"] = static_cast<double>(g.group.size_class);
      f.message = g.group.name + " and " + other->group.name + " share the " +
                  std::to_string(g.group.size_class) + "-byte size class: " + pct(next_to) +
                  " of " + g.group.name + "'s objects sit on or next to a line of the other";
      f.fix = "segregate them: --segregate " + rule_match(g.group) + ",pool=" + pool_name(g.group);
      out.push_back(std::move(f));
    }
    double adjacent = static_cast<double>(n.adjacent_line) / g.objects;
    if (g.group.size_class <= 64 && adjacent >= t.prefetch_share) {
      Finding f;
      f.kind = "prefetch_pollution";
      f.severity = "medium";
      f.groups = {g.group.id, other->group.id};
      f.metric["adjacent_share"] = adjacent;
      f.message = pct(adjacent) + " of " + g.group.name +
                  "'s lines pair (128-byte prefetch) with a line of " + other->group.name +
                  ": the adjacent-line prefetcher fills the cache with it";
      f.fix = "segregate " + g.group.name + ": --segregate " + rule_match(g.group) +
              ",pool=" + pool_name(g.group);
      out.push_back(std::move(f));
    }
  }
}

void thread_sharing(const GroupReport &g, const FindingThresholds &t, std::vector<Finding> &out) {
  if (!g.lines_total || g.objects < t.min_objects)
    return;
  double share = static_cast<double>(g.cross_thread_lines) / g.lines_total;
  if (share < t.cross_thread_share)
    return;
  Finding f;
  bool small = g.group.size_class <= t.false_sharing_max_size;
  f.kind = small ? "false_sharing" : "cross_thread_line_sharing";
  f.severity = small ? "high" : "medium";
  f.groups = {g.group.id};
  f.metric["cross_thread_line_share"] = share;
  f.message = pct(share) + " of " + g.group.name +
              "'s lines also hold objects allocated by another thread" +
              (small ? std::string(": small objects (") + std::to_string(g.group.size_class) +
                           " bytes) written by different threads ping-pong the line"
                     : "");
  f.fix = small
              ? "pad each object to a line, in a pool of their own: --segregate " +
                    rule_match(g.group) + ",pool=" + pool_name(g.group) + ",pad=64,align=64"
              : "give each thread's objects their own lines or pool: --segregate " +
                    rule_match(g.group) + ",pool=" + pool_name(g.group);
  out.push_back(std::move(f));
}

void page_spread(const GroupReport &g, const FindingThresholds &t, std::vector<Finding> &out) {
  if (g.pages_min < t.page_spread_min_pages)
    return;
  double ratio = static_cast<double>(g.pages_4k) / static_cast<double>(g.pages_min);
  if (ratio < t.page_spread_medium)
    return;
  Finding f;
  f.kind = "page_spread";
  f.severity = ratio >= t.page_spread_high ? "high" : "medium";
  f.groups = {g.group.id};
  f.metric["pages_4k"] = static_cast<double>(g.pages_4k);
  f.metric["pages_min"] = static_cast<double>(g.pages_min);
  f.metric["regions_2m"] = static_cast<double>(g.regions_2m);
  f.message = g.group.name + " spreads over " + std::to_string(g.pages_4k) + " pages where " +
              std::to_string(g.pages_min) + " would hold it (" + num(ratio) +
              "x): that many more TLB entries on every traversal";
  f.fix = "segregate it into a pool (its own contiguous pages): --segregate " +
          rule_match(g.group) + ",pool=" + pool_name(g.group) +
          (g.pages_min >= 512 ? ",hugepages=1" : "");
  out.push_back(std::move(f));
}

int rank(const std::string &severity) {
  return severity == "high" ? 0 : severity == "medium" ? 1 : 2;
}

// A call site allocating many sizes (a buffer pool, a string builder) has one
// group per size class, and each would carry the same finding: one finding
// per (kind, site) reads better. Single-group findings of the same kind and
// site merge into the most severe one, which lists every group.
std::vector<Finding> merge_by_site(const Report &r, std::vector<Finding> in) {
  auto site_of = [&](const Finding &f) -> const Group * {
    if (f.groups.size() != 1)
      return nullptr;
    const GroupReport *g = by_id(r, f.groups[0]);
    return g && !g->group.site.function.empty() ? &g->group : nullptr;
  };
  auto same_site = [](const Group &a, const Group &b) {
    return a.site.function == b.site.function && a.site.file == b.site.file &&
           a.site.line == b.site.line && a.site.caller == b.site.caller;
  };
  std::vector<Finding> out;
  std::vector<bool> used(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (used[i])
      continue;
    Finding f = in[i];
    const Group *site = site_of(f);
    size_t merged = 0;
    for (size_t j = i + 1; site && j < in.size(); ++j) {
      const Group *other = site_of(in[j]);
      if (used[j] || in[j].kind != f.kind || !other || !same_site(*site, *other))
        continue;
      used[j] = true;
      ++merged;
      f.groups.push_back(in[j].groups[0]);
    }
    if (merged) {
      f.metric["groups_merged"] = static_cast<double>(merged + 1);
      f.message += " (and " + std::to_string(merged) + " more size class" +
                   (merged > 1 ? "es" : "") + " of the same call site alike)";
    }
    out.push_back(std::move(f));
  }
  return out;
}

} // namespace

std::vector<Finding> find_problems(const Report &r, const FindingThresholds &t) {
  std::vector<Finding> out;
  for (const auto &g : r.groups) {
    if (g.objects < t.min_objects)
      continue;
    set_underutilization(r, g, t, out);
    line_straddle(g, t, out);
    pair_findings(r, g, t, out);
    thread_sharing(g, t, out);
    page_spread(g, t, out);
  }
  // Most severe first, so a merged finding keeps its worst case's words.
  std::stable_sort(out.begin(), out.end(), [](const Finding &a, const Finding &b) {
    return rank(a.severity) < rank(b.severity);
  });
  out = merge_by_site(r, std::move(out));
  for (Finding &f : out)
    f.rule = rule_of_fix(f.fix);
  return out;
}

std::string rule_of_fix(const std::string &fix) {
  static constexpr std::string_view kFlag = "--segregate ";
  size_t at = fix.find(kFlag);
  if (at == std::string::npos)
    return {};
  std::string rule = fix.substr(at + kFlag.size());
  if (size_t alt = rule.find(" (or "); alt != std::string::npos)
    rule.resize(alt);
  while (!rule.empty() && (rule.back() == ' ' || rule.back() == '.'))
    rule.pop_back();
  rules::Rule parsed;
  rules::ParseError e{};
  if (!rules::parse_rule(rule.data(), rule.size(), 1, &parsed, &e))
    return {};
  char canonical[4096];
  size_t n = rules::format_rule(parsed, canonical, sizeof canonical);
  return n ? std::string(canonical, n) : std::string();
}

} // namespace memlayout::inspector
