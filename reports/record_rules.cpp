#include "record_rules.h"

#include "route_setup.h"

namespace memlayout::cli {
namespace {

class LoadedRecordRules final : public RecordRules {
public:
  LoadedRules rules;
  RouteSetup routes;

  void set_env(PreloadEnv &env) const override {
    if (!rules.set->count)
      return;
    env.rules_text = rules.text;
    env.route_table = routes.table_path();
    env.rule_stats = routes.stats_path();
  }
  void print_summary(int wait_status, bool became_another) const override {
    if (rules.set->count)
      routes.print_summary(rules, wait_status, became_another);
  }
  void remove_files() override { routes.remove_files(); }
};

} // namespace

std::unique_ptr<RecordRules> prepare_record_rules(const RuleArgs &args,
                                                  const std::string &types_file,
                                                  const inspector::WrapperPolicy &wrappers,
                                                  const std::vector<std::string> &command,
                                                  bool follow_children, int *status) {
  std::vector<std::string> programs =
      follow_children ? programs_named(command) : std::vector<std::string>{command[0]};
  auto r = std::make_unique<LoadedRecordRules>();
  *status = 2;
  if (!load_rules(args, &r->rules) || !expand_match_keys(&r->rules, programs, types_file, true))
    return nullptr;
  if (r->rules.set->count && !r->routes.prepare(r->rules, programs, wrappers))
    return nullptr;
  *status = 0;
  return r;
}

} // namespace memlayout::cli
