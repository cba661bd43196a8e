// The analysis options of report, diff, advise and replay: apart from
// command_line.cpp because they need the report library, which `memlayout`
// does not link (commands.h).
#include "command_line.h"

#include <cctype>
#include <cstdlib>

namespace memlayout::cli {

void add_analysis_options(CLI::App &app, inspector::ReportOptions &o) {
  app.add_option_function<std::string>(
         "--at",
         [&o](const std::string &v) {
           if (!inspector::parse_snapshot_spec(v, o.at))
             throw CLI::ValidationError("--at", "takes peak, end or mark:NAME, not '" + v + "'");
         },
         "the moment analysed: peak (most live bytes, the default), end or mark:NAME")
      ->type_name("WHEN");
  app.add_option_function<std::vector<std::string>>(
         "--hot",
         [&o](const std::vector<std::string> &values) {
           for (const std::string &v : values) {
             size_t eq = v.rfind('=');
             bool field = eq != std::string::npos && eq + 1 < v.size() &&
                          (std::isalpha(static_cast<unsigned char>(v[eq + 1])) || v[eq + 1] == '_');
             // Digits only (strtoull takes "-5" and wraps it), at most 1 GiB.
             bool digits = eq != std::string::npos && eq + 1 < v.size() &&
                           v.size() - eq - 1 <= 10 &&
                           v.find_first_not_of("0123456789", eq + 1) == std::string::npos;
             unsigned long long n = digits ? std::strtoull(v.c_str() + eq + 1, nullptr, 10) : 0;
             if (eq == std::string::npos || eq == 0 || eq + 1 == v.size() ||
                 (!field && (!digits || n == 0 || n > (1ull << 30))))
               throw CLI::ValidationError("--hot",
                                          "takes NAME=BYTES or TYPE=FIELD, not '" + v + "'");
             for (const auto &h : o.hot)
               if (h.name == v.substr(0, eq))
                 throw CLI::ValidationError("--hot",
                                            "names " + h.name + " twice: one hot prefix per name");
             o.hot.push_back(
                 {v.substr(0, eq), field ? 0 : n, field ? v.substr(eq + 1) : std::string()});
           }
         },
         "only the first BYTES of NAME's objects are hot (NAME: a group's type, pool, tag or "
         "function), or the prefix through FIELD of record TYPE (type map); repeatable")
      ->type_name("NAME=BYTES|TYPE=FIELD")
      ->allow_extra_args(false);
  app.add_option_function<std::string>(
         "--types",
         [&o](const std::string &v) {
           o.find_types = v != "none";
           o.types_file = o.find_types ? v : "";
         },
         "name groups by the record their site allocates, from `memlayout structs --format json` "
         "(default: EXECUTABLE.memlayout-types.json when it exists); none: no type map")
      ->type_name("MAP|none");
  app.add_option("--cache", o.cache_file, "cache geometry from FILE instead of this machine's")
      ->type_name("FILE");
  add_wrapper_options(app, o.wrappers, o.not_wrappers);
}

} // namespace memlayout::cli
