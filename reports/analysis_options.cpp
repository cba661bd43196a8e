#include "analysis_options.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace memlayout::cli {

OptionParse parse_analysis_option(int argc, char **argv, int &i, inspector::ReportOptions &o,
                                  std::string &error) {
  std::string a = argv[i];
  if (a != "--at" && a != "--hot" && a != "--cache" && a != "--wrapper" && a != "--types" &&
      a != "--not-wrapper")
    return OptionParse::kNotOurs;
  const char *v = i + 1 < argc ? argv[++i] : nullptr;
  std::string shown = v ? v : "";
  if (a == "--at") {
    if (!v || !inspector::parse_snapshot_spec(v, o.at)) {
      error = "--at takes peak, end or mark:NAME, not '" + shown + "'";
      return OptionParse::kError;
    }
  } else if (a == "--hot") {
    const char *eq = v ? std::strrchr(v, '=') : nullptr;
    char *end = nullptr;
    unsigned long long n = eq ? std::strtoull(eq + 1, &end, 10) : 0;
    const bool field = eq && (std::isalpha(static_cast<unsigned char>(eq[1])) || eq[1] == '_');
    if (!eq || eq == v || !*(eq + 1) || (!field && (*end || n == 0))) {
      error = "--hot takes NAME=BYTES or TYPE=FIELD, not '" + shown + "'";
      return OptionParse::kError;
    }
    o.hot.push_back({std::string(v, static_cast<size_t>(eq - v)), field ? 0 : n,
                     field ? std::string(eq + 1) : std::string()});
  } else if (!v || !*v) {
    error =
        a + (a == "--wrapper" || a == "--not-wrapper" ? " needs a function name" : " needs a file");
    return OptionParse::kError;
  } else if (a == "--types") {
    o.find_types = std::strcmp(v, "none") != 0;
    o.types_file = o.find_types ? v : "";
  } else if (a == "--cache") {
    o.cache_file = v;
  } else if (a == "--not-wrapper") {
    o.not_wrappers.push_back(v);
  } else {
    o.wrappers.push_back(v);
  }
  return OptionParse::kTaken;
}

} // namespace memlayout::cli
