// Matching two reports' groups and findings, and the per-metric deltas.
#include "report_diff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

namespace memlayout::inspector {
namespace {

enum class Scale { kAbsolute, kRelative };

struct MetricSpec {
  const char *name, *label;
  Better better;
  Scale scale;
  // At or below this the change is noise: reports print fractions to two
  // decimals, and the set-fraction estimate is only good to ±0.05 (two
  // recordings of one binary differ by that much where frames differ).
  double tolerance;
};

constexpr MetricSpec kMetrics[] = {
    {"objects", "objects", Better::kNeither, Scale::kRelative, 0},
    {"bytes", "bytes", Better::kNeither, Scale::kRelative, 0},
    {"size_class", "size class", Better::kNeither, Scale::kRelative, 0},
    {"lines_per_object", "lines/object", Better::kLower, Scale::kRelative, 0.005},
    {"straddle_fraction", "straddle fraction", Better::kLower, Scale::kAbsolute, 0.005},
    {"set_effective_fraction_L1", "L1 set fraction", Better::kHigher, Scale::kAbsolute, 0.05},
    {"set_effective_fraction_L2", "L2 set fraction", Better::kHigher, Scale::kAbsolute, 0.05},
    {"set_effective_fraction_L3", "L3 set fraction", Better::kHigher, Scale::kAbsolute, 0.05},
    {"pages_4k", "4 KiB pages", Better::kNeither, Scale::kRelative, 0},
    {"pages_min", "pages needed", Better::kNeither, Scale::kRelative, 0},
    // Pages touched per page needed: 1.0 is a perfectly packed group, so
    // "closer to min" is lower.
    {"page_spread", "pages/needed", Better::kLower, Scale::kRelative, 0.005},
    {"live_objects", "live objects", Better::kNeither, Scale::kRelative, 0},
    {"live_bytes", "live bytes", Better::kNeither, Scale::kRelative, 0},
    {"htm_aborts_per_1000", "HTM aborts / 1000 transactions", Better::kLower, Scale::kRelative,
     0.005},
    {"htm_false_conflicts_per_1000", "false conflicts / 1000 transactions", Better::kLower,
     Scale::kRelative, 0.005},
    {"htm_false_share", "false share of conflict aborts", Better::kLower, Scale::kAbsolute, 0.005},
    {"htm_capacity_per_1000", "capacity aborts / 1000 transactions", Better::kLower,
     Scale::kRelative, 0.005},
};

const MetricSpec &spec(const std::string &name) {
  for (const auto &m : kMetrics)
    if (name == m.name)
      return m;
  return kMetrics[0]; // unreachable for the names this file uses
}

// `better`: the spec's direction unless given.
MetricDelta measure(const char *name, std::optional<double> a, std::optional<double> b,
                    std::optional<Better> better = std::nullopt) {
  const MetricSpec &s = spec(name);
  MetricDelta m;
  m.metric = name;
  m.a = a;
  m.b = b;
  m.better = better.value_or(s.better);
  if (!a || !b) {
    // Computable on one side only (a level too few lines filled): worth
    // showing, but no size to sort by.
    m.verdict = a || b ? Verdict::kChanged : Verdict::kSame;
    return m;
  }
  double d = *b - *a;
  double scale =
      s.scale == Scale::kAbsolute ? 1.0 : std::max({std::fabs(*a), std::fabs(*b), 1e-12});
  m.magnitude = std::fabs(d) / scale;
  if (m.magnitude <= s.tolerance) {
    m.verdict = Verdict::kSame;
    m.magnitude = 0;
  } else if (m.better == Better::kNeither) {
    m.verdict = Verdict::kChanged;
  } else {
    m.verdict = (d > 0) == (m.better == Better::kHigher) ? Verdict::kBetter : Verdict::kWorse;
  }
  return m;
}

// Per 1000 completed transactions of the report's trace; empty without them.
std::optional<double> per_1000(const Report &r, uint64_t count) {
  if (!r.htm || !r.htm->transactions)
    return std::nullopt;
  return 1000.0 * static_cast<double>(count) / static_cast<double>(r.htm->transactions);
}

std::vector<MetricDelta> htm_deltas(const Report &a, const Report &b) {
  if (!a.htm && !b.htm)
    return {};
  auto false_share = [](const Report &r) -> std::optional<double> {
    if (!r.htm || !r.htm->by_cause[0])
      return std::nullopt;
    return static_cast<double>(r.htm->conflicts_false) / static_cast<double>(r.htm->by_cause[0]);
  };
  auto count = [](const Report &r, auto field) -> uint64_t { return r.htm ? field(*r.htm) : 0; };
  auto aborts = [](const HtmAbortReport &h) { return h.aborts; };
  auto falses = [](const HtmAbortReport &h) { return h.conflicts_false; };
  auto capacity = [](const HtmAbortReport &h) { return h.by_cause[1]; };
  return {
      measure("htm_aborts_per_1000", per_1000(a, count(a, aborts)), per_1000(b, count(b, aborts))),
      measure("htm_false_conflicts_per_1000", per_1000(a, count(a, falses)),
              per_1000(b, count(b, falses))),
      measure("htm_false_share", false_share(a), false_share(b)),
      measure("htm_capacity_per_1000", per_1000(a, count(a, capacity)),
              per_1000(b, count(b, capacity))),
  };
}

std::optional<double> page_spread(const GroupReport &g) {
  if (!g.pages_min)
    return std::nullopt;
  return static_cast<double>(g.pages_4k) / static_cast<double>(g.pages_min);
}

GroupDelta compare(const GroupReport &a, const GroupReport &b, MatchedBy how) {
  auto d = [](auto v) { return std::optional<double>(static_cast<double>(v)); };
  GroupDelta g;
  g.a = &a;
  g.b = &b;
  g.matched_by = how;
  g.metrics = {
      measure("objects", d(a.objects), d(b.objects)),
      measure("bytes", d(a.group.bytes), d(b.group.bytes)),
      measure("size_class", d(a.group.size_class), d(b.group.size_class)),
      measure("lines_per_object", a.lines_per_object, b.lines_per_object),
      measure("straddle_fraction", a.straddle_fraction, b.straddle_fraction),
      measure("set_effective_fraction_L1", a.set_effective_fraction[0],
              b.set_effective_fraction[0]),
      measure("set_effective_fraction_L2", a.set_effective_fraction[1],
              b.set_effective_fraction[1]),
      measure("set_effective_fraction_L3", a.set_effective_fraction[2],
              b.set_effective_fraction[2]),
      // The same objects on more pages is worse whatever the minimum did:
      // padding raises the pages a group needs, and its spread can improve
      // while it touches more pages (more TLB entries) than before.
      measure("pages_4k", d(a.pages_4k), d(b.pages_4k),
              a.objects == b.objects ? Better::kLower : Better::kNeither),
      measure("pages_min", d(a.pages_min), d(b.pages_min)),
      measure("page_spread", page_spread(a), page_spread(b)),
  };
  for (const auto &m : g.metrics)
    g.magnitude = std::max(g.magnitude, m.magnitude);
  return g;
}

// B's group against the union of A's groups `as` (kSiteMerged).
GroupDelta compare_merged(std::vector<const GroupReport *> as, const GroupReport &b) {
  std::sort(as.begin(), as.end(), [](const GroupReport *x, const GroupReport *y) {
    return x->group.bytes > y->group.bytes;
  });
  GroupDelta g = compare(*as.front(), b, MatchedBy::kSiteMerged);
  g.merged_a = as;
  double objects = 0, bytes = 0, lines = 0, straddling = 0;
  for (const GroupReport *x : as) {
    objects += static_cast<double>(x->objects);
    bytes += static_cast<double>(x->group.bytes);
    lines += x->lines_per_object * static_cast<double>(x->objects);
    straddling += x->straddle_fraction * static_cast<double>(x->objects);
  }
  auto per_object = [&](double v) {
    return objects > 0 ? std::optional<double>(v / objects) : std::nullopt;
  };
  for (MetricDelta &m : g.metrics) {
    std::optional<double> a;
    if (m.metric == "objects")
      a = objects;
    else if (m.metric == "bytes")
      a = bytes;
    else if (m.metric == "lines_per_object")
      a = per_object(lines);
    else if (m.metric == "straddle_fraction")
      a = per_object(straddling);
    m = measure(m.metric.c_str(), a, m.b); // nullopt: the union has no such figure
  }
  g.magnitude = 0;
  for (const auto &m : g.metrics)
    g.magnitude = std::max(g.magnitude, m.magnitude);
  return g;
}

using SiteKey = std::tuple<std::string, std::string, uint32_t>;

// The same objects, moved or renamed, are about as many on both sides.
bool about_as_many(const GroupReport &x, const GroupReport &y) {
  uint64_t lo = std::min(x.objects, y.objects), hi = std::max(x.objects, y.objects);
  return hi <= 2 * lo;
}

// The file by its name alone: a program built in two directories, before
// and after a fix, is the usual pair (as names print it).
std::string file_name(const std::string &path) { return path.substr(path.rfind('/') + 1); }

SiteKey site(const GroupReport &g) {
  return {g.group.site.function, file_name(g.group.site.file), g.group.site.line};
}

// The site without its line: an edit above a function moves every line
// below it, the fix diff is for among them.
SiteKey function_site(const GroupReport &g) {
  return {g.group.site.function, file_name(g.group.site.file), 0};
}

// Pairs the still unmatched groups of both sides whose key is unique on each
// side; an ambiguous key is left for a later, finer pass.
template <typename Key, typename Accept = bool (*)(const GroupReport &, const GroupReport &)>
void match_unique(
    const Report &a, const Report &b, std::vector<int> &pair_of_a, std::vector<bool> &taken_b,
    Key &&key, MatchedBy how, ReportDiff &out,
    Accept accept = [](const GroupReport &, const GroupReport &) { return true; }) {
  using K = decltype(key(a.groups[0]));
  std::map<K, std::pair<int, int>> seen_a, seen_b; // key -> (index, count)
  auto note = [](auto &seen, const K &k, int i) {
    auto [it, fresh] = seen.try_emplace(k, i, 0);
    ++it->second.second;
  };
  for (size_t i = 0; i < a.groups.size(); ++i)
    if (pair_of_a[i] < 0)
      note(seen_a, key(a.groups[i]), static_cast<int>(i));
  for (size_t j = 0; j < b.groups.size(); ++j)
    if (!taken_b[j])
      note(seen_b, key(b.groups[j]), static_cast<int>(j));
  for (const auto &[k, ia] : seen_a) {
    auto jb = seen_b.find(k);
    if (ia.second != 1 || jb == seen_b.end() || jb->second.second != 1 ||
        !accept(a.groups[static_cast<size_t>(ia.first)],
                b.groups[static_cast<size_t>(jb->second.first)]))
      continue;
    pair_of_a[ia.first] = jb->second.first;
    taken_b[jb->second.first] = true;
    out.groups.push_back(compare(a.groups[ia.first], b.groups[jb->second.first], how));
  }
}

// A site that is one group in B (its pool) and several in A: what is
// left of A there joins what B's group was matched with, if anything.
// Where B has several groups at the site (a rule pooled one of the line's
// records with another, and left the rest), the one whose objects exceed
// its match's by the leftover's (within 10%), in a class that holds them.
void join_leftovers(const Report &a, const Report &b, SiteKey (*key)(const GroupReport &),
                    bool moved, std::vector<int> &pair_of_a, std::vector<bool> &taken_b,
                    ReportDiff &out) {
  std::map<SiteKey, std::vector<size_t>> b_at;
  for (size_t j = 0; j < b.groups.size(); ++j)
    b_at[key(b.groups[j])].push_back(j);
  std::vector<double> surplus(b.groups.size());
  for (size_t j = 0; j < b.groups.size(); ++j)
    surplus[j] = static_cast<double>(b.groups[j].objects);
  for (const GroupDelta &g : out.groups)
    surplus[static_cast<size_t>(g.b - b.groups.data())] -= static_cast<double>(g.a->objects);
  std::map<size_t, std::vector<size_t>> join; // B index -> A indices
  for (size_t i = 0; i < a.groups.size(); ++i) {
    if (pair_of_a[i] >= 0)
      continue;
    auto it = b_at.find(key(a.groups[i]));
    if (it == b_at.end())
      continue;
    const GroupReport &left = a.groups[i];
    std::optional<size_t> to;
    if (it->second.size() == 1) {
      to = it->second.front();
    } else {
      int fits = 0;
      const double n = static_cast<double>(left.objects);
      for (size_t j : it->second)
        if (surplus[j] >= 0.9 * n && surplus[j] <= 1.1 * n &&
            b.groups[j].group.size_class >= left.group.requested_size)
          ++fits, to = j;
      if (fits != 1)
        continue;
    }
    surplus[*to] -= static_cast<double>(left.objects);
    join[*to].push_back(i);
  }
  for (auto &[j, extra] : join) {
    std::vector<const GroupReport *> as;
    auto was = std::find_if(out.groups.begin(), out.groups.end(),
                            [&](const GroupDelta &g) { return g.b == &b.groups[j]; });
    if (was != out.groups.end()) {
      as.push_back(was->a);
      out.groups.erase(was);
    }
    for (size_t i : extra) {
      as.push_back(&a.groups[i]);
      pair_of_a[i] = static_cast<int>(j);
    }
    taken_b[j] = true;
    out.groups.push_back(as.size() == 1 ? compare(*as.front(), b.groups[j],
                                                  moved ? MatchedBy::kFunction : MatchedBy::kSite)
                                        : compare_merged(as, b.groups[j]));
  }
}

std::vector<FindingRef> name_findings(const Report &r,
                                      const std::map<uint32_t, std::string> &name) {
  std::vector<FindingRef> out;
  for (const auto &f : r.findings) {
    FindingRef ref{&f, {}};
    for (uint32_t id : f.groups) {
      auto it = name.find(id);
      std::string n = it != name.end() ? it->second : "#" + std::to_string(id);
      // A finding merged over a site's size classes names one group per
      // class, all of one name: said once.
      if (std::find(ref.groups.begin(), ref.groups.end(), n) == ref.groups.end())
        ref.groups.push_back(std::move(n));
    }
    out.push_back(std::move(ref));
  }
  return out;
}

bool same_finding(const FindingRef &x, const FindingRef &y) {
  if (x.finding->kind != y.finding->kind)
    return false;
  auto gx = x.groups, gy = y.groups;
  std::sort(gx.begin(), gx.end());
  std::sort(gy.begin(), gy.end());
  return gx == gy;
}

// The same kind about the same group first: the one a finding speaks for
// (a pair's other group may be anyone's neighbour).
bool shares_a_group(const FindingRef &x, const FindingRef &y) {
  return x.finding->kind == y.finding->kind && !x.groups.empty() && !y.groups.empty() &&
         x.groups.front() == y.groups.front();
}

const ReportCacheLevel *cache_level(const Report &r, int n) {
  for (const ReportCacheLevel &l : r.levels)
    if (l.level == n)
      return &l;
  return nullptr;
}

// Why a level's set fractions in A and B do not compare like for like, or
// "" where they do: different caches, or the same cache seen through
// different address bits (a trace with page frames against one without, a
// replay's virtual addresses against a recording's frames). A change in
// them then need not be a change of layout.
std::string unlike_level(const Report &a, const Report &b, int n) {
  const ReportCacheLevel *la = cache_level(a, n), *lb = cache_level(b, n);
  if (!la && !lb)
    return "";
  auto sets = [](const ReportCacheLevel *l) {
    return l ? std::to_string(l->sets) + " sets" : std::string("absent");
  };
  if (!la || !lb || la->sets != lb->sets || la->line_size != lb->line_size)
    return "cache level " + std::to_string(n) + " differs (" + sets(la) + " in A, " + sets(lb) +
           " in B): its set fractions describe different caches";
  if (la->bits != lb->bits)
    return "cache level " + std::to_string(n) +
           "'s set fractions rest on different address bits (" + la->bits + " in A, " + lb->bits +
           " in B): a change in them need not be a change of layout";
  return "";
}

// unlike_level for L1, L2, L3.
using UnlikeLevels = std::array<std::string, 3>;
UnlikeLevels unlike_levels(const Report &a, const Report &b) {
  return {unlike_level(a, b, 1), unlike_level(a, b, 2), unlike_level(a, b, 3)};
}

// Set fractions of a level A and B see differently are shown, but neither
// better nor worse, and do not rank the groups.
void neutralize_unlike_levels(const UnlikeLevels &unlike, ReportDiff &out) {
  for (int n = 1; n <= 3; ++n) {
    if (unlike[n - 1].empty())
      continue;
    const std::string metric = "set_effective_fraction_L" + std::to_string(n);
    for (GroupDelta &g : out.groups) {
      for (MetricDelta &m : g.metrics)
        if (m.metric == metric) {
          m.better = Better::kNeither;
          if (m.verdict == Verdict::kBetter || m.verdict == Verdict::kWorse)
            m.verdict = Verdict::kChanged;
          m.magnitude = 0;
        }
      g.magnitude = 0;
      for (const MetricDelta &m : g.metrics)
        g.magnitude = std::max(g.magnitude, m.magnitude);
    }
  }
}

void add_notes(const Report &a, const Report &b, const UnlikeLevels &unlike, ReportDiff &out) {
  if (a.partial || b.partial)
    out.notes.push_back(std::string("partial trace on side ") +
                        (a.partial && b.partial ? "A and B"
                         : a.partial            ? "A"
                                                : "B") +
                        ": counts compare prefixes of the runs");
  if (a.at != b.at)
    out.notes.push_back("A is analysed at " + a.at + ", B at " + b.at);
  // By name: one program built in two directories, before and after a fix,
  // is the usual pair.
  if (!a.executable.empty() && !b.executable.empty() &&
      file_name(a.executable) != file_name(b.executable))
    out.notes.push_back("A and B record different programs (" + a.executable + ", " + b.executable +
                        "): groups are matched by their names and sites, which two programs "
                        "may share by chance");
  if (!a.groups.empty() && !b.groups.empty() && out.groups.empty())
    out.notes.push_back("no group of A matched one of B: groups are matched by their names, "
                        "call sites (function, file and line), then function and file, then "
                        "file and line; the comparison is of different code");
  for (const std::string &w : a.symbol_warnings)
    out.notes.push_back("A: " + w);
  for (const std::string &w : b.symbol_warnings)
    out.notes.push_back("B: " + w);
  for (const std::string &why : unlike)
    if (!why.empty())
      out.notes.push_back(why);
}

} // namespace

ReportDiff diff_reports(const Report &a, const Report &b) {
  ReportDiff out;
  out.a = &a;
  out.b = &b;
  out.live_objects = measure("live_objects", static_cast<double>(a.live_objects),
                             static_cast<double>(b.live_objects));
  out.live_bytes =
      measure("live_bytes", static_cast<double>(a.live_bytes), static_cast<double>(b.live_bytes));
  out.htm = htm_deltas(a, b);

  std::vector<int> pair_of_a(a.groups.size(), -1);
  std::vector<bool> taken_b(b.groups.size(), false);
  match_unique(
      a, b, pair_of_a, taken_b, [](const GroupReport &g) { return g.group.name; }, MatchedBy::kName,
      out);
  // By call site, then, where the line moved, by function and file alone:
  // each key with its size class, its requested size, then alone, and the
  // leftovers of a site joined to the pool that took them.
  for (auto key : {site, function_site}) {
    const bool moved = key == function_site;
    match_unique(
        a, b, pair_of_a, taken_b,
        [key](const GroupReport &g) { return std::make_pair(key(g), g.group.size_class); },
        moved ? MatchedBy::kFunction : MatchedBy::kSiteAndSizeClass, out);
    // Padding, a pool or a different allocator moves a group to another size
    // class but leaves its call site and what the program asks for: one site
    // with several classes (inlined code allocating two kinds of objects) is
    // told apart by the requested size.
    // A group's requested size is its most common one: where a site's
    // requests spread over a range, a glibc class's and a pool's (all of
    // them) can share it by chance; the same objects, moved, are about as
    // many.
    match_unique(
        a, b, pair_of_a, taken_b,
        [key](const GroupReport &g) { return std::make_pair(key(g), g.group.requested_size); },
        moved ? MatchedBy::kFunction : MatchedBy::kSiteAndRequestedSize, out, about_as_many);
    match_unique(a, b, pair_of_a, taken_b, key, moved ? MatchedBy::kFunction : MatchedBy::kSite,
                 out);
    join_leftovers(a, b, key, moved, pair_of_a, taken_b, out);
  }
  // Last, by file and line without the function: a function renamed by the
  // fix (make_node to node_new) keeps its sites where they were. With the
  // size class, then alone; about as many objects either way, and a site
  // with a file and line (unnamed code has neither).
  auto renamed = [](const GroupReport &x, const GroupReport &y) {
    return x.group.site.line != 0 && !x.group.site.file.empty() && about_as_many(x, y);
  };
  match_unique(
      a, b, pair_of_a, taken_b,
      [](const GroupReport &g) {
        return std::make_tuple(file_name(g.group.site.file), g.group.site.line, g.group.size_class);
      },
      MatchedBy::kRenamed, out, renamed);
  match_unique(
      a, b, pair_of_a, taken_b,
      [](const GroupReport &g) {
        return std::make_pair(file_name(g.group.site.file), g.group.site.line);
      },
      MatchedBy::kRenamed, out, renamed);
  const UnlikeLevels unlike = unlike_levels(a, b);
  neutralize_unlike_levels(unlike, out);
  std::stable_sort(out.groups.begin(), out.groups.end(), [](const auto &x, const auto &y) {
    if (x.magnitude != y.magnitude)
      return x.magnitude > y.magnitude;
    return x.b->group.bytes > y.b->group.bytes;
  });
  for (size_t i = 0; i < a.groups.size(); ++i)
    if (pair_of_a[i] < 0)
      out.only_a.push_back(&a.groups[i]);
  for (size_t j = 0; j < b.groups.size(); ++j)
    if (!taken_b[j])
      out.only_b.push_back(&b.groups[j]);

  std::map<uint32_t, std::string> name_a, name_b;
  for (const auto &g : a.groups)
    name_a[g.group.id] = g.group.name;
  for (const auto &g : b.groups)
    name_b[g.group.id] = g.group.name;
  for (const auto &g : out.groups)
    name_b[g.b->group.id] = g.a->group.name;
  std::vector<FindingRef> fa = name_findings(a, name_a), fb = name_findings(b, name_b);
  std::vector<bool> used_b(fb.size(), false), kept_a(fa.size(), false);
  for (size_t i = 0; i < fa.size(); ++i)
    for (size_t j = 0; j < fb.size() && !kept_a[i]; ++j)
      if (!used_b[j] && same_finding(fa[i], fb[j])) {
        used_b[j] = kept_a[i] = true;
        out.kept.push_back(fb[j]);
      }
  // A finding merged over a site's size classes ("and 2 more size classes
  // alike") that a fix took one class from is still there: kept, not one
  // resolved and one new, by the group it speaks for.
  for (size_t i = 0; i < fa.size(); ++i)
    for (size_t j = 0; j < fb.size() && !kept_a[i]; ++j)
      if (!used_b[j] && shares_a_group(fa[i], fb[j])) {
        used_b[j] = kept_a[i] = true;
        out.kept.push_back(fb[j]);
      }
  for (size_t i = 0; i < fa.size(); ++i)
    if (!kept_a[i])
      out.resolved.push_back(fa[i]);
  for (size_t j = 0; j < fb.size(); ++j)
    if (!used_b[j])
      out.added.push_back(fb[j]);
  add_notes(a, b, unlike, out);
  return out;
}

const char *metric_label(const std::string &metric) { return spec(metric).label; }

const char *to_string(Verdict v) {
  switch (v) {
  case Verdict::kSame:
    return "same";
  case Verdict::kBetter:
    return "better";
  case Verdict::kWorse:
    return "worse";
  case Verdict::kChanged:
    return "changed";
  }
  return "?";
}

const char *to_string(Better b) {
  switch (b) {
  case Better::kNeither:
    return "neither";
  case Better::kHigher:
    return "higher";
  case Better::kLower:
    return "lower";
  }
  return "?";
}

const char *to_string(MatchedBy m) {
  switch (m) {
  case MatchedBy::kName:
    return "name";
  case MatchedBy::kSiteAndSizeClass:
    return "site+size_class";
  case MatchedBy::kSiteAndRequestedSize:
    return "site+requested_size";
  case MatchedBy::kSite:
    return "site";
  case MatchedBy::kSiteMerged:
    return "site, merged";
  case MatchedBy::kFunction:
    return "function, its line moved";
  case MatchedBy::kRenamed:
    return "file and line, its function renamed";
  }
  return "?";
}

} // namespace memlayout::inspector
