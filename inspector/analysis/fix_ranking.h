// "What to do first": a report's fixes, each once, ranked by how much memory
// they touch — the bytes of the groups whose findings they resolve.
#pragma once

#include "report.h"

#include <string>
#include <vector>

namespace memlayout::inspector {

struct RankedFix {
  std::string fix;  // the fix's text (of its most severe finding)
  std::string rule; // as a rule, when one carries it out; else empty
  std::vector<uint32_t> groups;
  std::vector<const Finding *> findings; // most severe first
  uint64_t bytes = 0, lines = 0;         // of its groups
  std::string severity;                  // the highest of its findings
};

// Findings whose rules have the same match keys (or, without a rule, the
// same fix text) are one fix, its rule theirs merged as advise merges them,
// its groups those the rule routes. Ranked by the bytes of the groups it is about, then their lines, then
// severity.
std::vector<RankedFix> rank_fixes(const Report &r);

} // namespace memlayout::inspector
