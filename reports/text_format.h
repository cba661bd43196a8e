// Numbers for people, shared by the text and HTML renderers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memlayout::cli {

// printf of one number into a string.
inline std::string fmt(const char *format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

// 1536 -> "1.5 KiB".
inline std::string human_bytes(double v) {
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  return fmt(i ? "%.1f " : "%.0f ", v) + unit[i];
}

// `s` with each byte that is not part of a well-formed UTF-8 sequence
// replaced by U+FFFD, as JSON output does: a tag or mark name is the
// program's bytes, and a page declared UTF-8 (or an SVG, which is XML) with
// anything else in it is not one a browser reads.
std::string valid_utf8(std::string_view s);

// `s` in a column of `width` characters: cut to it (its last character
// "~") or padded with spaces, counting UTF-8 characters, not bytes: a pool
// named "größe" or "池" stays in its column.
std::string fit_column(const std::string &s, size_t width);

// "1 group", "2 groups".
inline std::string counted(uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

// A group's name as a table shows it: C++ names lose their namespaces and
// the insides of template arguments, long parameter lists are elided:
// "ns::IntLf<ns::Layout>::new_node(long, long) (int_lf.cpp:171)" becomes
// "IntLf<...>::new_node(long, long) (int_lf.cpp:171)". The full name stays in
// JSON (and the HTML's tooltips).
std::string display_name(const std::string &name);

// The display names of a report's groups, told apart: where two names
// shorten to the same (make<Desc> and make<Node> both to make<...>), those
// two keep their template arguments, or failing that, their whole name.
class DisplayNames {
public:
  explicit DisplayNames(const std::vector<std::string> &names);
  // Names not among them: display_name.
  std::string operator()(const std::string &name) const;

private:
  std::unordered_map<std::string, std::string> shown_;
};

// `text` with every long group name of `names` it mentions replaced by its
// display name (a finding's message).
std::string with_display_names(std::string text, const std::vector<std::string> &names);
// A fix the same way, except its --segregate rule, which must stay exact to
// route anything: a group name without "(file:line)" (a site in a header
// without line information) is also the rule's function key.
std::string fix_with_display_names(const std::string &fix, const std::vector<std::string> &names);

} // namespace memlayout::cli
