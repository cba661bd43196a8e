#include "fix_ranking.h"

#include "rule_match.h"

#include <algorithm>
#include <map>

namespace memlayout::inspector {

std::vector<RankedFix> rank_fixes(const Report &r) {
  std::vector<RankedFix> fixes;
  std::vector<rules::Rule> merged; // per fix, its rule with every finding's actions
  std::map<std::string, size_t> by_key;
  for (const auto &f : r.findings) {
    rules::Rule rule{};
    rules::ParseError e{};
    bool ruled = !f.rule.empty() && rules::parse_rule(f.rule.data(), f.rule.size(), 1, &rule, &e);
    // Findings whose rules route the same allocations are one fix, as advise
    // writes them as one rule.
    std::string key = ruled ? "rule:" + match_keys_of(rule) : "fix:" + f.fix;
    auto [it, fresh] = by_key.emplace(key, fixes.size());
    if (fresh) {
      fixes.push_back({f.fix, ruled ? f.rule : "", {}, {}, 0, 0, f.severity});
      merged.push_back(rule);
    } else if (ruled) {
      merge_actions(merged[it->second], rule);
    }
    RankedFix &x = fixes[it->second];
    x.findings.push_back(&f);
    if (severity_rank(f.severity) > severity_rank(x.severity)) {
      x.severity = f.severity;
      x.fix = f.fix;
    }
    if (!ruled) { // the group the finding is about
      uint32_t g = f.groups.empty() ? 0 : f.groups.front();
      if (g && std::find(x.groups.begin(), x.groups.end(), g) == x.groups.end())
        x.groups.push_back(g);
    }
  }
  for (size_t i = 0; i < fixes.size(); ++i)
    if (!fixes[i].rule.empty()) { // the groups its rule routes
      fixes[i].rule = rule_text(merged[i]);
      fixes[i].groups = groups_routed(merged[i], r);
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
