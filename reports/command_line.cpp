#include "command_line.h"

#include <cctype>
#include <cstdlib>

namespace memlayout::cli {

std::unique_ptr<CLI::App> make_command(const std::string &name, const std::string &description,
                                       const std::string &usage) {
  return make_program("memlayout " + name, description, usage);
}

void add_wrapper_options(CLI::App &app, std::vector<std::string> &wrappers,
                         std::vector<std::string> &not_wrappers) {
  app.add_option("--wrapper", wrappers,
                 "a function to look through as an allocation wrapper when deciding sites "
                 "(NAME, or PREFIX*); repeatable")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app.add_option("--not-wrapper", not_wrappers,
                 "a function never to look through, even when listed or detected; repeatable")
      ->type_name("NAME")
      ->allow_extra_args(false);
}

void add_rule_options(CLI::App &app, RuleArgs &rules) {
  app.add_option("--rules", rules.files,
                 "segregation rules, one per line (# comments), e.g. from memlayout advise; "
                 "repeatable (docs/segregation.md)")
      ->type_name("FILE")
      ->allow_extra_args(false);
  app.add_option("--segregate", rules.specs,
                 "a rule such as function=make_node,pool=nodes; repeatable, after the files'")
      ->type_name("SPEC")
      ->allow_extra_args(false);
}

void add_allocator_option(CLI::App &app, std::string &allocator, const std::string &what) {
  app.add_option("--allocator", allocator, what)
      ->check(one_of({"native", "jemalloc"}))
      ->type_name("native|jemalloc");
}

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
             char *end = nullptr;
             unsigned long long n =
                 eq == std::string::npos ? 0 : std::strtoull(v.c_str() + eq + 1, &end, 10);
             if (eq == std::string::npos || eq == 0 || eq + 1 == v.size() ||
                 (!field && (*end || n == 0)))
               throw CLI::ValidationError("--hot",
                                          "takes NAME=BYTES or TYPE=FIELD, not '" + v + "'");
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
