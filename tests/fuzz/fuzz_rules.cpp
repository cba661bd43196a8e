// libFuzzer entry point for the segregation rules parser (wrapper
// declarations included) and the function name matchers: any bytes give rules or an error with a
// line and column, never a crash; a parsed rule written back parses to the same rule.
#include "rules.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace memlayout::rules;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = reinterpret_cast<const char *>(data);
  static RuleSet set;
  set.count = 0;
  set.wrapper_count = 0;
  ParseError err{};
  if (parse_rules(text, size, &set, &err)) {
    for (unsigned i = 0; i < set.count; ++i) {
      char buf[4096], again_buf[4096];
      size_t n = format_rule(set.rules[i], buf, sizeof buf);
      if (!n)
        abort();
      Rule again;
      if (!parse_rule(buf, n, 1, &again, &err))
        abort();
      if (format_rule(again, again_buf, sizeof again_buf) != n || std::memcmp(buf, again_buf, n))
        abort();
    }
    for (unsigned i = 0; i < set.wrapper_count; ++i)
      if (!set.wrappers[i].function[0] || set.wrappers[i].source_line == 0)
        abort();
  } else if (err.line == 0 || err.column == 0 || !std::memchr(err.message, 0, sizeof err.message)) {
    abort();
  }
  // The name matcher takes symbol names from any ELF file.
  std::string s(text, size);
  char norm[kMaxName];
  size_t half = s.size() / 2;
  std::string a = s.substr(0, half), b = s.substr(half);
  normalize_function(a.c_str(), norm, sizeof norm);
  (void)symbol_matches(a.c_str(), b.c_str());
  (void)symbol_matches(("_Z" + a).c_str(), b.c_str());
  (void)symbol_matches(("_ZN" + a).c_str(), b.c_str());
  (void)demangled_matches(a.c_str(), b.c_str());
  (void)function_key_matches(a.c_str(), b.c_str());
  if (function_name_offset(a.c_str()) > a.size())
    abort();
  return 0;
}
