#include "route_table.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace memlayout::inspector {

namespace {

using Range = ModuleCode::Range;

// `ranges` minus `holes`; both sorted by lo.
std::vector<Range> subtract(const std::vector<Range> &ranges, std::vector<Range> holes) {
  std::sort(holes.begin(), holes.end(), [](const Range &a, const Range &b) { return a.lo < b.lo; });
  std::vector<Range> out;
  for (Range r : ranges) {
    uint64_t at = r.lo;
    for (const Range &h : holes) {
      if (h.hi <= at || h.lo >= r.hi)
        continue;
      if (h.lo > at)
        out.push_back({at, h.lo});
      at = std::max(at, h.hi);
      if (at >= r.hi)
        break;
    }
    if (at < r.hi)
      out.push_back({at, r.hi});
  }
  return out;
}

struct Label {
  uint64_t rules = 0;
  bool skip = false;
  bool operator==(const Label &) const = default;
};

} // namespace

uint64_t rules_naming(const std::string &function, const rules::RuleSet &rules) {
  uint64_t mask = 0;
  for (unsigned i = 0; i < rules.count; ++i)
    if (rules.rules[i].function[0] &&
        rules::function_key_matches(function.c_str(), rules.rules[i].function))
      mask |= uint64_t{1} << i;
  return mask;
}

namespace {

// `base` (sorted, disjoint) with `over` (sorted, disjoint) put in place of
// what they cover; ranges left with no label dropped.
std::vector<routes::RangeEntry> overlay(const std::vector<routes::RangeEntry> &base,
                                        const std::vector<routes::RangeEntry> &over) {
  std::vector<routes::RangeEntry> out;
  size_t j = 0;
  uint64_t shadow = 0; // the end of the last of `over` put
  auto put = [&](const routes::RangeEntry &e) {
    if (e.lo < e.hi && (e.rules || e.flags))
      out.push_back(e);
  };
  for (const auto &b : base) {
    while (j < over.size() && over[j].lo < b.hi) {
      put({std::max(b.lo, shadow), over[j].lo, b.rules, b.flags});
      put(over[j]);
      shadow = over[j++].hi;
    }
    put({std::max(b.lo, shadow), b.hi, b.rules, b.flags});
  }
  while (j < over.size())
    put(over[j++]);
  return out;
}

} // namespace

std::vector<routes::RangeEntry> label_module(const ModuleCode &code, const WrapperPolicy &p,
                                             const rules::RuleSet &rules,
                                             std::span<const ModuleCode *const> modules) {
  const auto &scopes = code.scopes();
  const auto &fns = code.functions();
  std::vector<char> skipped(fns.size());
  std::vector<uint64_t> named(fns.size());
  for (uint32_t f = 0; f < fns.size(); ++f) {
    skipped[f] = p.is_skipped(fns[f].name);
    named[f] = skipped[f] ? 0 : rules_naming(fns[f].name, rules);
  }
  // Scopes are stored parents first: a scope's label follows from its
  // parent's when its own function is looked through.
  std::vector<Label> label(scopes.size());
  std::vector<std::vector<Range>> inlined_ranges(scopes.size());
  for (uint32_t s = 0; s < scopes.size(); ++s) {
    const auto &sc = scopes[s];
    if (!skipped[sc.function])
      label[s] = {named[sc.function], false};
    else if (sc.parent == ModuleCode::kNoScope)
      label[s] = {0, true};
    else
      label[s] = label[sc.parent];
    if (sc.parent != ModuleCode::kNoScope)
      inlined_ranges[sc.parent].insert(inlined_ranges[sc.parent].end(), sc.ranges.begin(),
                                       sc.ranges.end());
  }
  std::vector<routes::RangeEntry> out;
  for (uint32_t s = 0; s < scopes.size(); ++s) {
    if (!label[s].rules && !label[s].skip)
      continue;
    for (const Range &r : subtract(scopes[s].ranges, inlined_ranges[s]))
      out.push_back({r.lo, r.hi, label[s].rules, label[s].skip ? routes::kSkipFrame : 0});
  }
  // Disjoint and sorted: where bodies overlap (aliases, folded code) the
  // labels are merged; a merged skip loses to a rule, which is exact there.
  std::sort(out.begin(), out.end(),
            [](const routes::RangeEntry &a, const routes::RangeEntry &b) { return a.lo < b.lo; });
  std::vector<routes::RangeEntry> merged;
  for (const auto &e : out) {
    if (!merged.empty() && e.lo < merged.back().hi) {
      auto &m = merged.back();
      m.rules |= e.rules;
      m.flags = m.rules ? 0 : (m.flags & e.flags);
      if (e.hi > m.hi)
        merged.push_back({m.hi, e.hi, e.rules, e.flags});
      continue;
    }
    if (!merged.empty() && e.lo == merged.back().hi && e.rules == merged.back().rules &&
        e.flags == merged.back().flags) {
      merged.back().hi = e.hi;
      continue;
    }
    merged.push_back(e);
  }

  // Code the symbolizer names no function for: an unresolved frame, which
  // alloc_site() keeps pending whatever scope the debug information has
  // there.
  std::vector<routes::RangeEntry> unnamed;
  for (const Range &r : code.unnamed_code())
    unnamed.push_back({r.lo, r.hi, 0, routes::kUnnamedCode});
  if (!unnamed.empty())
    merged = overlay(merged, unnamed);

  // Calls whose return address is a tail-called function's site.
  std::vector<const ModuleCode *> where{&code};
  for (const ModuleCode *m : modules)
    if (m != &code)
      where.push_back(m);
  auto label_at = [&](uint64_t a) -> routes::RangeEntry {
    auto it = std::upper_bound(merged.begin(), merged.end(), a,
                               [](uint64_t v, const routes::RangeEntry &e) { return v < e.lo; });
    if (it == merged.begin() || a >= std::prev(it)->hi)
      return {};
    return *std::prev(it);
  };
  std::vector<routes::RangeEntry> points;
  for (const auto &c : code.calls()) {
    if (!c.return_pc || skipped[c.callee])
      continue;
    routes::RangeEntry here = label_at(c.return_pc - 1);
    if ((here.rules == named[c.callee] && !here.flags) ||
        !find_tail_callee(fns[c.callee].name, where).may_tail_call)
      continue;
    // In wrapper code, the frame is the wrapper's when an unnamed frame
    // below it is pending (alloc_site() looks for a tail call only when
    // none is).
    points.push_back({c.return_pc - 1, c.return_pc, named[c.callee],
                      here.flags & routes::kSkipFrame ? routes::kTailCallInWrapper : 0});
  }
  if (points.empty())
    return merged;
  std::sort(points.begin(), points.end(),
            [](const routes::RangeEntry &a, const routes::RangeEntry &b) { return a.lo < b.lo; });
  points.erase(std::unique(points.begin(), points.end(),
                           [](const routes::RangeEntry &a, const routes::RangeEntry &b) {
                             return a.lo == b.lo;
                           }),
               points.end());
  return overlay(merged, points);
}

bool write_route_table(const std::string &path, const std::vector<RouteModule> &modules,
                       const WrapperPolicy &p, std::string *error) {
  routes::TableHeader h{};
  std::memcpy(h.magic, routes::kMagic, sizeof h.magic);
  h.version = routes::kVersion;
  std::vector<routes::ModuleEntry> entries;
  std::vector<routes::RangeEntry> ranges;
  for (const auto &m : modules) {
    routes::ModuleEntry e{};
    e.dev = m.dev;
    e.ino = m.ino;
    e.first_range = static_cast<uint32_t>(ranges.size());
    e.range_count = static_cast<uint32_t>(m.ranges.size());
    std::snprintf(e.path, sizeof e.path, "%s", m.path.c_str());
    ranges.insert(ranges.end(), m.ranges.begin(), m.ranges.end());
    entries.push_back(e);
  }
  // Names for modules loaded later: the named and detected wrappers (the
  // built-in list is compiled into the interposer's fallback as well).
  std::vector<routes::WrapperName> names;
  auto add_name = [&](const std::string &n, bool not_wrapper) {
    if (names.size() == routes::kMaxWrapperNames || n.empty())
      return;
    routes::WrapperName w{};
    char norm[rules::kMaxName];
    if (n.back() == '*' || !rules::normalize_function(n.c_str(), norm, sizeof norm) ||
        std::strlen(norm) >= sizeof w.name)
      return;
    std::snprintf(w.name, sizeof w.name, "%s", norm);
    w.not_wrapper = not_wrapper;
    names.push_back(w);
  };
  for (const auto &w : p.wrappers)
    add_name(w, false);
  for (const auto &w : p.rules_file)
    add_name(w, false);
  for (const auto &[n, d] : p.detected)
    add_name(n, false);
  for (const auto &w : builtin_wrappers())
    add_name(w, false);
  for (const auto &w : p.not_wrappers)
    add_name(w, true);
  if (entries.size() > routes::kMaxModules || ranges.size() > routes::kMaxRanges) {
    *error = "the route table is too large (" + std::to_string(ranges.size()) + " ranges)";
    return false;
  }
  h.modules = static_cast<uint32_t>(entries.size());
  h.ranges = static_cast<uint32_t>(ranges.size());
  h.wrappers = static_cast<uint32_t>(names.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(&h), sizeof h);
  out.write(reinterpret_cast<const char *>(entries.data()),
            static_cast<std::streamsize>(entries.size() * sizeof entries[0]));
  out.write(reinterpret_cast<const char *>(ranges.data()),
            static_cast<std::streamsize>(ranges.size() * sizeof ranges[0]));
  out.write(reinterpret_cast<const char *>(names.data()),
            static_cast<std::streamsize>(names.size() * sizeof names[0]));
  if (!out.flush()) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

} // namespace memlayout::inspector
