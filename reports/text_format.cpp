#include "text_format.h"

#include "rule_match.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace memlayout::cli {

namespace {

constexpr std::string_view kAnonymous = "(anonymous namespace)";
constexpr size_t kMaxParams = 28;

// Template arguments collapsed to "<…>" (operator<, operator<< kept).
std::string collapse_templates(std::string_view s) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (depth == 0 && c == '<' && out.size() >= 8 &&
        out.compare(out.size() - 8, 8, "operator") == 0) {
      out += c; // operator< and operator<<
      if (i + 1 < s.size() && s[i + 1] == '<')
        out += s[++i];
      continue;
    }
    if (c == '<') {
      if (depth++ == 0)
        out += "<...";
      continue;
    }
    if (c == '>' && depth > 0) {
      if (--depth == 0)
        out += '>';
      continue;
    }
    if (depth == 0)
      out += c;
  }
  return out;
}

} // namespace

namespace {

std::string shortened(const std::string &name, bool collapse) {
  // "function (file:line)" or "caller -> ?? (module+0x...)": the suffix stays.
  std::string_view whole = name, suffix;
  if (size_t p = whole.rfind(" ("); p != std::string_view::npos && whole.back() == ')' &&
                                    whole.substr(p + 2).find_first_of("( ") == std::string::npos) {
    suffix = whole.substr(p);
    whole = whole.substr(0, p);
  }
  if (whole.find("::") == std::string_view::npos && whole.find('<') == std::string_view::npos)
    return name; // C names, pools, tags
  std::string s = collapse ? collapse_templates(whole) : std::string(whole);
  // The parameter list: the first '(' that does not open "(anonymous namespace)".
  size_t params = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '(')
      continue;
    if (s.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size() - 1;
      continue;
    }
    params = i;
    break;
  }
  std::string head = params == std::string::npos ? s : s.substr(0, params);
  std::string tail = params == std::string::npos ? "" : s.substr(params);
  if (tail.size() > kMaxParams) {
    size_t close = tail.rfind(')');
    tail = "(...)" + (close == std::string::npos ? "" : tail.substr(close + 1));
  }
  // A return type first (function templates): drop it. Its space is the
  // last one outside brackets: "(anonymous namespace)" and "Tree<int, long>"
  // hold spaces of their own.
  size_t sp = std::string::npos;
  for (size_t i = 0, depth = 0; i < head.size(); ++i) {
    if (head[i] == '(' || head[i] == '<')
      ++depth;
    else if ((head[i] == ')' || head[i] == '>') && depth > 0)
      --depth;
    else if (head[i] == ' ' && depth == 0)
      sp = i;
  }
  if (sp != std::string::npos && head.compare(sp > 8 ? sp - 8 : 0, 8, "operator") != 0)
    head = head.substr(sp + 1);
  // The last two scopes: Class::method.
  size_t last = head.rfind("::");
  if (last != std::string::npos && last > 0) {
    size_t before = head.rfind("::", last - 1);
    if (before != std::string::npos)
      head = head.substr(before + 2);
  }
  return head + tail + std::string(suffix);
}

} // namespace

namespace {

// Control characters in a name (a pool or tag name is the program's bytes:
// "rows\n" would end the table's row) as C writes them in a string.
std::string visible_controls(const std::string &name) {
  if (std::none_of(name.begin(), name.end(),
                   [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return name;
  std::string out;
  for (char c : name) {
    auto b = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (b < 0x20 || b == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

} // namespace

std::string display_name(const std::string &name) {
  return shortened(visible_controls(name), true);
}

std::string fit_column(const std::string &s, size_t width) {
  // Characters are the bytes that do not continue one (10xxxxxx).
  auto starts_char = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; };
  size_t chars = 0;
  for (char c : s)
    chars += starts_char(c);
  if (chars <= width)
    return s + std::string(width - chars, ' ');
  std::string out;
  size_t kept = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (starts_char(s[i]) && kept++ == width - 1)
      break;
    out += s[i];
  }
  return out + "~";
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    // Length and the range of the second byte (RFC 3629's table: no
    // overlong forms, no surrogates, nothing past U+10FFFF).
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80)
      n = 1;
    else if (b >= 0xC2 && b <= 0xDF)
      n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      lo = b == 0xE0 ? 0xA0 : 0x80;
      hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      lo = b == 0xF0 ? 0x90 : 0x80;
      hi = b == 0xF4 ? 0x8F : 0xBF;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      ok = k == 1 ? c >= lo && c <= hi : c >= 0x80 && c <= 0xBF;
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

DisplayNames::DisplayNames(const std::vector<std::string> &names) {
  std::unordered_map<std::string, std::vector<const std::string *>> by_shown;
  for (const auto &n : names)
    by_shown[display_name(n)].push_back(&n);
  for (auto &[shown, full] : by_shown) {
    std::sort(full.begin(), full.end(),
              [](const std::string *a, const std::string *b) { return *a < *b; });
    full.erase(std::unique(full.begin(), full.end(),
                           [](const std::string *a, const std::string *b) { return *a == *b; }),
               full.end());
    if (full.size() == 1) {
      shown_.emplace(*full[0], shown);
      continue;
    }
    // make<Desc> and make<Node> are both make<...>: their arguments tell
    // them apart, or else nothing short of the whole name does.
    std::unordered_map<std::string, unsigned> uses;
    for (const std::string *n : full)
      ++uses[shortened(*n, false)];
    for (const std::string *n : full) {
      std::string longer = shortened(*n, false);
      shown_.emplace(*n, uses[longer] == 1 ? longer : *n);
    }
  }
}

std::string DisplayNames::operator()(const std::string &name) const {
  auto it = shown_.find(name);
  return it == shown_.end() ? display_name(name) : it->second;
}

std::string with_display_names(std::string text, const std::vector<std::string> &names) {
  std::vector<const std::string *> sorted;
  for (const auto &n : names)
    if (n.size() > 24)
      sorted.push_back(&n);
  // Longest first: a name that contains another is replaced whole.
  std::sort(sorted.begin(), sorted.end(),
            [](const std::string *a, const std::string *b) { return a->size() > b->size(); });
  DisplayNames display(names);
  for (const std::string *n : sorted) {
    std::string shown = display(*n);
    if (shown == *n)
      continue;
    for (size_t at = text.find(*n); at != std::string::npos; at = text.find(*n, at + shown.size()))
      text.replace(at, n->size(), shown);
  }
  return text;
}

std::string fix_with_display_names(const std::string &fix, const std::vector<std::string> &names) {
  size_t at = fix.find("--segregate ");
  if (at == std::string::npos)
    return with_display_names(fix, names);
  std::string flag = inspector::segregate_flag(inspector::segregate_flag_rule(fix));
  if (fix.compare(at, flag.size(), flag) != 0) // not one we wrote: leave all after it alone
    return with_display_names(fix.substr(0, at), names) + fix.substr(at);
  return with_display_names(fix.substr(0, at), names) + flag +
         with_display_names(fix.substr(at + flag.size()), names);
}

} // namespace memlayout::cli
