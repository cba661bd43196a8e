#include "command_line.h"

namespace memlayout::cli {

std::unique_ptr<CLI::App> make_command(const std::string &name, const std::string &description,
                                       const std::string &usage) {
  return make_program("memlayout " + name, description, usage);
}

void add_wrapper_options(CLI::App &app, std::vector<std::string> &wrappers,
                         std::vector<std::string> &not_wrappers) {
  // A name, or a prefix and '*': nothing, or '*' alone (every function, so
  // every stack looked through to _start), names no wrapper.
  CLI::Validator a_function(
      [](const std::string &v) -> std::string {
        if (v.empty())
          return "an empty name: give a function's name (NAME, or PREFIX*)";
        if (v.find_first_not_of('*') == std::string::npos)
          return "'" + v + "' names every function: give a name or a prefix (PREFIX*)";
        return {};
      },
      "NAME");
  app.add_option("--wrapper", wrappers,
                 "a function to look through as an allocation wrapper when deciding sites "
                 "(NAME, or PREFIX*); repeatable")
      ->type_name("NAME")
      ->check(a_function)
      ->allow_extra_args(false);
  app.add_option("--not-wrapper", not_wrappers,
                 "a function never to look through, even when listed or detected; repeatable")
      ->type_name("NAME")
      ->check(a_function)
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

} // namespace memlayout::cli
