#include "fix_ranking.h"

#include <algorithm>
#include <map>

namespace memlayout::inspector {

std::vector<RankedFix> rank_fixes(const Report &r) {
  std::vector<RankedFix> fixes;
  std::map<std::string, size_t> by_key;
  for (const auto &f : r.findings) {
    std::string key = f.rule.empty() ? "fix:" + f.fix : "rule:" + f.rule;
    auto [it, fresh] = by_key.emplace(key, fixes.size());
    if (fresh)
      fixes.push_back({f.fix, f.rule, {}, {}, 0, 0, f.severity});
    RankedFix &x = fixes[it->second];
    x.findings.push_back(&f);
    if (severity_rank(f.severity) > severity_rank(x.severity)) {
      x.severity = f.severity;
      x.fix = f.fix;
    }
    // A fix resolves the findings of the groups its rule names: the first
    // group of a finding is the one it is about.
    uint32_t g = f.groups.empty() ? 0 : f.groups.front();
    if (g && std::find(x.groups.begin(), x.groups.end(), g) == x.groups.end())
      x.groups.push_back(g);
  }
  for (auto &x : fixes) {
    for (uint32_t id : x.groups)
      for (const auto &g : r.groups)
        if (g.group.id == id) {
          x.bytes += g.group.bytes;
          x.lines += g.lines_total;
        }
    std::stable_sort(x.findings.begin(), x.findings.end(), [](const Finding *a, const Finding *b) {
      return severity_rank(a->severity) > severity_rank(b->severity);
    });
  }
  std::stable_sort(fixes.begin(), fixes.end(), [](const RankedFix &a, const RankedFix &b) {
    if (a.bytes != b.bytes)
      return a.bytes > b.bytes;
    if (a.lines != b.lines)
      return a.lines > b.lines;
    return severity_rank(a.severity) > severity_rank(b.severity);
  });
  return fixes;
}

} // namespace memlayout::inspector
