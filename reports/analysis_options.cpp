#include "analysis_options.h"

#include <cstdlib>
#include <cstring>

namespace memlayout::cli {

OptionParse parse_analysis_option(int argc, char **argv, int &i, inspector::ReportOptions &o,
                                  std::string &error) {
  std::string a = argv[i];
  if (a != "--at" && a != "--hot" && a != "--cache" && a != "--wrapper")
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
    if (!eq || eq == v || !*(eq + 1) || *end || n == 0) {
      error = "--hot takes NAME=BYTES, not '" + shown + "'";
      return OptionParse::kError;
    }
    o.hot.push_back({std::string(v, static_cast<size_t>(eq - v)), n});
  } else if (!v) {
    error = a + (a == "--cache" ? " needs a file" : " needs a function name");
    return OptionParse::kError;
  } else if (a == "--cache") {
    o.cache_file = v;
  } else {
    o.wrappers.push_back(v);
  }
  return OptionParse::kTaken;
}

} // namespace memlayout::cli
