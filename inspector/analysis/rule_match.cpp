#include "rule_match.h"

#include <algorithm>
#include <cstring>

namespace memlayout::inspector {

namespace {

bool ends_with_path(const std::string &path, const std::string &suffix) {
  if (suffix.size() > path.size())
    return false;
  if (path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  return path.size() == suffix.size() || suffix[0] == '/' ||
         path[path.size() - suffix.size() - 1] == '/';
}

} // namespace

bool rule_matches(const rules::Rule &rule, const Group::Site &site, uint64_t size,
                  const std::string &type) {
  if (rule.has_size && (size < rule.size_min || size > rule.size_max))
    return false;
  if (rule.function[0] &&
      (site.function == "??" || !rules::function_key_matches(site.function.c_str(), rule.function)))
    return false;
  if (rule.file[0] &&
      (!ends_with_path(site.file, rule.file) || (rule.file_line && rule.file_line != site.line)))
    return false;
  if (rule.type[0] && type != rule.type)
    return false;
  return true;
}

int first_matching_rule(const rules::RuleSet &set, const Group::Site &site, uint64_t size,
                        const std::string &type) {
  for (unsigned i = 0; i < set.count; ++i)
    if (rule_matches(set.rules[i], site, size, type))
      return static_cast<int>(i);
  return -1;
}

std::vector<uint32_t> groups_routed(const rules::Rule &rule, const Report &report) {
  std::vector<uint32_t> ids;
  for (const auto &g : report.groups) {
    // A realloc-grown group's objects were routed, or not, when they began
    // or at a realloc of theirs (docs/segregation.md): at any size up to the
    // one they have.
    uint64_t size = g.group.requested_size;
    if (g.group.grown_by_realloc && rule.has_size && rule.size_min <= size)
      size = std::min(size, rule.size_max);
    if (rule_matches(rule, g.group.site, size, g.group.type))
      ids.push_back(g.group.id);
  }
  return ids;
}

SizeSpan requested_span(const Group &g) {
  SizeSpan s{g.requested_min ? g.requested_min : g.requested_size,
             g.requested_max ? g.requested_max : std::max(g.size_class, g.requested_size)};
  if (g.grown_by_realloc)
    s.lo = 1;
  return s;
}

bool routed_along(const Group &target, const Group &g, const std::vector<uint32_t> &also) {
  if (g.id == target.id || (!target.type.empty() && g.type == target.type) ||
      std::find(also.begin(), also.end(), g.id) != also.end())
    return true;
  if (!same_site(target.site, g.site))
    return false;
  SizeSpan a = requested_span(target), b = requested_span(g);
  return b.hi >= a.lo && b.lo <= a.hi;
}

std::string rule_text(const rules::Rule &r) {
  char buf[4096];
  return std::string(buf, rules::format_rule(r, buf, sizeof buf));
}

namespace {
constexpr std::string_view kSegregateFlag = "--segregate ";

bool shell_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-.,:=/+@%").find(c) != std::string_view::npos;
}
} // namespace

std::string segregate_flag(const std::string &rule) {
  std::string out(kSegregateFlag);
  if (!rule.empty() && std::all_of(rule.begin(), rule.end(), shell_safe))
    return out + rule;
  out += '\'';
  for (char c : rule)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + '\'';
}

std::string segregate_flag_rule(const std::string &text) {
  size_t at = text.find(kSegregateFlag);
  if (at == std::string::npos)
    return {};
  std::string_view rest = std::string_view(text).substr(at + kSegregateFlag.size());
  std::string rule;
  if (!rest.empty() && rest.front() == '\'') {
    // 'a'\''b' is a'b: quoted runs joined by escaped quotes.
    size_t i = 1;
    for (;;) {
      size_t close = rest.find('\'', i);
      if (close == std::string_view::npos)
        return {};
      rule.append(rest.substr(i, close - i));
      if (rest.substr(close, 4) != "'\\''")
        break;
      rule += '\'';
      i = close + 4;
    }
    return rule;
  }
  rule = std::string(rest);
  // Unquoted, the rule ends where the prose goes on: " (or ...)" or "; ".
  if (size_t end = std::min(rule.find(" (or "), rule.find("; ")); end != std::string::npos)
    rule.resize(end);
  while (!rule.empty() && (rule.back() == ' ' || rule.back() == '.'))
    rule.pop_back();
  return rule;
}

std::string match_keys_of(const rules::Rule &r) {
  rules::Rule m = r;
  m.pool[0] = 0;
  m.align = 0;
  m.huge_pages = false;
  m.pad = 1; // any action: format_rule only writes what is set
  return rule_text(m);
}

bool shadows(const rules::Rule &first, const rules::Rule &later) {
  if (std::strcmp(first.function, later.function) != 0 ||
      std::strcmp(first.file, later.file) != 0 || first.file_line != later.file_line ||
      std::strcmp(first.type, later.type) != 0)
    return false;
  return !first.has_size ||
         (later.has_size && first.size_min <= later.size_min && later.size_max <= first.size_max);
}

void merge_actions(rules::Rule &a, const rules::Rule &b) {
  if (!a.pool[0])
    std::memcpy(a.pool, b.pool, sizeof a.pool);
  a.pad = std::max(a.pad, b.pad);
  a.align = std::max(a.align, b.align);
  a.huge_pages = a.huge_pages || b.huge_pages;
}

} // namespace memlayout::inspector
