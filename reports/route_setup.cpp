#include "route_setup.h"

#include "preload_launch.h"
#include "route_table.h"
#include "rule_match.h"
#include "text_format.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace memlayout::cli {

namespace {

std::string last_scope(const std::string &normalized) {
  size_t p = normalized.rfind("::");
  return p == std::string::npos ? normalized : normalized.substr(p + 2);
}

// `part` in `name` as a whole word of an identifier: at its start or end or
// next to '_' ("node" in "create_node", not in "nodes").
bool contains_word(const std::string &name, const std::string &part) {
  if (part.size() < 3)
    return false;
  for (size_t at = name.find(part); at != std::string::npos; at = name.find(part, at + 1)) {
    bool starts = at == 0 || name[at - 1] == '_';
    bool ends = at + part.size() == name.size() || name[at + part.size()] == '_';
    if (starts && ends)
      return true;
  }
  return false;
}

// A function as a rule names it: its scopes and name, no parameters.
std::string short_function(const std::string &name) {
  char norm[rules::kMaxName];
  return rules::normalize_function(name.c_str(), norm, sizeof norm) ? std::string(norm) : name;
}

} // namespace

struct RouteSetup::Impl {
  std::vector<std::unique_ptr<inspector::ModuleCode>> modules;
  inspector::WrapperPolicy policy;
  std::string program;
  uint64_t labelled = 0; // rules some code of the program's is labelled with

  std::vector<const inspector::ModuleCode *> code() const {
    std::vector<const inspector::ModuleCode *> out;
    for (const auto &m : modules)
      out.push_back(m.get());
    return out;
  }
};

RouteSetup::RouteSetup() : impl_(std::make_unique<Impl>()) {}

RouteSetup::~RouteSetup() { remove_files(); }

void RouteSetup::remove_files() {
  if (!table_path_.empty())
    unlink(table_path_.c_str());
  if (!stats_path_.empty())
    unlink(stats_path_.c_str());
  table_path_.clear();
  stats_path_.clear();
}

// The function of `code` a rule's function key names that is looked
// through as a wrapper (its allocations are its callers'), or "".
std::string wrapper_named(const char *key, const std::vector<const inspector::ModuleCode *> &code,
                          const inspector::WrapperPolicy &policy, inspector::WrapperReason *why) {
  for (const auto *m : code)
    for (const auto &f : m->functions())
      if (rules::function_key_matches(f.name.c_str(), key) && policy.wrapper_reason(f.name, why))
        return f.name;
  return {};
}

std::vector<std::string> close_functions(const std::string &key,
                                         const std::vector<const inspector::ModuleCode *> &code) {
  char want[rules::kMaxName];
  if (!rules::normalize_function(key.c_str(), want, sizeof want))
    return {};
  std::string wanted_last = last_scope(want);
  std::vector<std::pair<size_t, std::string>> close;
  std::set<std::string> listed;
  for (const inspector::ModuleCode *m : code) {
    std::vector<char> inlined(m->functions().size()), out_of_line(m->functions().size());
    for (const auto &s : m->scopes())
      (s.parent == inspector::ModuleCode::kNoScope ? out_of_line : inlined)[s.function] = 1;
    for (uint32_t f = 0; f < m->functions().size(); ++f) {
      if (!inlined[f] && !out_of_line[f])
        continue; // only called here, defined elsewhere
      char norm[rules::kMaxName];
      if (!rules::normalize_function(m->functions()[f].name.c_str(), norm, sizeof norm))
        continue;
      std::string last = last_scope(norm);
      size_t d = edit_distance(last, wanted_last);
      bool contains = contains_word(last, wanted_last) ||
                      (last.size() >= 4 && contains_word(wanted_last, last));
      if (d > std::max<size_t>(2, wanted_last.size() / 3) && !contains)
        continue;
      std::string shown = std::string(norm) + (inlined[f] && !out_of_line[f] ? " (inlined)" : "");
      if (listed.insert(shown).second)
        close.push_back({contains ? 0 : d, shown});
    }
  }
  std::sort(close.begin(), close.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < close.size() && i < 6; ++i)
    out.push_back(close[i].second);
  return out;
}

bool RouteSetup::prepare(const LoadedRules &rules, const std::vector<std::string> &programs,
                         const inspector::WrapperPolicy &options) {
  const std::string &program = programs.front();
  impl_->program = program;
  impl_->policy = options;
  for (unsigned i = 0; i < rules.set->wrapper_count; ++i) {
    const rules::WrapperDecl &d = rules.set->wrappers[i];
    (d.not_wrapper ? impl_->policy.not_wrappers : impl_->policy.rules_file).push_back(d.function);
  }
  table_path_ = temp_file("memlayout-routes");
  stats_path_ = temp_file("memlayout-rule-stats");
  if (table_path_.empty() || stats_path_.empty()) {
    // temp_file tried TMPDIR, then /tmp.
    std::fprintf(stderr, "memlayout: cannot create a temporary file in /tmp: %s\n",
                 std::strerror(errno));
    return false;
  }
  // A script or a missing program has no code to label: the loader's
  // modules are matched by their symbol tables when they load, and a missing
  // program is reported by the launch.
  impl_->modules = load_code(program_modules(programs));
  // One call graph: the program's call sites are evidence for its
  // libraries' wrappers.
  std::vector<const inspector::ModuleCode *> with_dwarf;
  for (const auto &m : impl_->modules)
    if (m->has_dwarf())
      with_dwarf.push_back(m.get());
  inspector::detect_wrappers_in_modules(with_dwarf, impl_->policy);
  const auto all = impl_->code();

  std::vector<inspector::RouteModule> table;
  uint64_t labelled = 0; // rule bits some code carries
  for (const auto &m : impl_->modules) {
    inspector::RouteModule rm;
    rm.path = m->path();
    struct stat st;
    if (stat(rm.path.c_str(), &st) != 0)
      continue;
    rm.dev = st.st_dev;
    rm.ino = st.st_ino;
    rm.ranges = inspector::label_module(*m, impl_->policy, *rules.set, all);
    for (const auto &r : rm.ranges)
      labelled |= r.rules;
    impl_->labelled |= labelled;
    table.push_back(std::move(rm));
  }
  std::string error;
  if (!inspector::write_route_table(table_path_, table, impl_->policy, &error)) {
    std::fprintf(stderr, "memlayout: %s\n", error.c_str());
    return false;
  }

  const auto code = impl_->code();
  for (unsigned i = 0; i < rules.set->count && !code.empty(); ++i) {
    const rules::Rule &r = rules.set->rules[i];
    if (!r.function[0] || (labelled >> i & 1))
      continue;
    // Named, but looked through: its allocations are its callers'.
    inspector::WrapperReason why{};
    if (!wrapper_named(r.function, code, impl_->policy, &why).empty()) {
      std::fprintf(stderr,
                   "memlayout: warning: %s: function=%s names an allocation wrapper (%s): its "
                   "allocations belong to its callers' sites, which reports name; name a caller, "
                   "or declare not-wrapper=%s\n",
                   rules.origin[i].c_str(), r.function, inspector::wrapper_reason_name(why),
                   r.function);
      continue;
    }
    std::vector<std::string> close = close_functions(r.function, code);
    std::fprintf(stderr, "memlayout: warning: %s: function=%s matches no function in %s%s%s",
                 rules.origin[i].c_str(), r.function, program.c_str(),
                 programs.size() > 1 ? " or the programs its command names" : "",
                 code.size() > 1 ? " or the libraries it links" : "");
    if (close.empty()) {
      std::fprintf(stderr, " (libraries it loads later are matched when they load)\n");
      continue;
    }
    std::fprintf(stderr, "; close names:");
    for (size_t k = 0; k < close.size(); ++k)
      std::fprintf(stderr, "%s %s", k ? "," : "", close[k].c_str());
    std::fprintf(stderr, "\n");
  }
  return true;
}

std::vector<RuleCount> read_rule_stats(const std::string &path, size_t rules, size_t *processes) {
  std::vector<RuleCount> counts(rules);
  *processes = 0;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string tag;
    uint64_t pid;
    if (!(words >> tag >> pid) || tag != "memlayout-rules")
      continue;
    std::vector<RuleCount> mine(rules);
    bool ok = true;
    for (auto &c : mine)
      ok = ok && static_cast<bool>(words >> c.allocations >> c.bytes);
    if (!ok)
      continue; // a line cut short: a process died writing it
    ++*processes;
    for (size_t i = 0; i < rules; ++i) {
      counts[i].allocations += mine[i].allocations;
      counts[i].bytes += mine[i].bytes;
    }
  }
  return counts;
}

namespace {

std::string signal_name(int sig) {
  const char *abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

} // namespace

size_t RouteSetup::print_summary(const LoadedRules &rules, int wait_status,
                                 bool became_another) const {
  size_t processes = 0;
  std::vector<RuleCount> counts = read_rule_stats(stats_path_, rules.set->count, &processes);
  if (processes == 0) {
    // The counts are written at exit and on the fatal signals a handler can
    // catch, unless the signal came from inside the allocator's own calls.
    if (WIFSIGNALED(wait_status))
      std::fprintf(stderr,
                   "memlayout: the program wrote no rule counts: it died of %s before it could "
                   "(a signal that cannot be caught, or raised inside the allocator)\n",
                   signal_name(WTERMSIG(wait_status)).c_str());
    else if (became_another)
      std::fprintf(stderr,
                   "memlayout: the program wrote no rule counts: it replaced itself by exec "
                   "(--follow-children applies the rules to what it became, where a dynamic "
                   "loader preloads memlayout)\n");
    else
      std::fprintf(stderr,
                   "memlayout: the program wrote no rule counts: it ended by a raw exit_group "
                   "system call (as Go's os.Exit does), which no library function sees, and "
                   "the counts are written at exit\n");
    return 0;
  }
  size_t idle = 0;
  const auto code = impl_->code();
  std::optional<inspector::CallGraph> graph; // for the rules that routed nothing, built once
  for (unsigned i = 0; i < rules.set->count; ++i) {
    const rules::Rule &r = rules.set->rules[i];
    const RuleCount &c = counts[i];
    if (c.allocations) {
      std::fprintf(stderr, "memlayout: rule %u %s (%s): %llu allocations, %s\n", i + 1,
                   inspector::rule_text(r).c_str(), rules.origin[i].c_str(),
                   static_cast<unsigned long long>(c.allocations),
                   human_bytes(static_cast<double>(c.bytes)).c_str());
      continue;
    }
    ++idle;
    std::fprintf(stderr, "memlayout: warning: rule %u %s (%s) routed nothing", i + 1,
                 inspector::rule_text(r).c_str(), rules.origin[i].c_str());
    if (unsigned first = first_covering_rule(*rules.set, i); first < i) {
      std::fprintf(stderr,
                   ": rule %u %s (%s) comes first and matches all it matches (the first rule "
                   "that matches an allocation routes it)\n",
                   first + 1, inspector::rule_text(rules.set->rules[first]).c_str(),
                   rules.origin[first].c_str());
      continue;
    }
    if (impl_->labelled >> i & 1) {
      // The function is there. Where it calls functions that allocate and
      // are sites of their own, its memory may come from them: they name it.
      if (r.function[0] && !graph)
        graph.emplace(code);
      std::vector<inspector::SiteCallee> through =
          r.function[0] ? inspector::sites_called_by(r.function, *graph, impl_->policy)
                        : std::vector<inspector::SiteCallee>{};
      if (through.empty()) {
        // Without debug information the program's code shows no calls: a
        // wrapper the report found in the recorded stacks is unknown here.
        std::fprintf(stderr, ": the sites it names made no allocation%s this run%s\n",
                     r.has_size ? " of that size" : "",
                     r.function[0] ? "; if it allocates through a wrapper of the program's own "
                                     "(what a report's 'looked through' names, found in the "
                                     "recorded stacks where the program has no debug "
                                     "information), declare it: --wrapper NAME, or wrapper=NAME "
                                     "in the rules file"
                                   : "");
        continue;
      }
      std::fprintf(stderr, ": %s made no allocation%s of its own this run;", r.function,
                   r.has_size ? " of that size" : "");
      for (size_t k = 0; k < through.size() && k < 3; ++k) {
        const auto &t = through[k];
        std::string callee = short_function(t.callee);
        std::fprintf(stderr,
                     "%s it %s %s, which allocates and is a site of its own: its allocations "
                     "are grouped and routed under %s (declare wrapper=%s to count them as "
                     "its callers')",
                     k ? ";" : "", t.tail ? "tail-calls" : "calls", callee.c_str(), callee.c_str(),
                     callee.c_str());
      }
      std::fprintf(stderr, "\n");
      continue;
    }
    inspector::WrapperReason why{};
    if (r.function[0] && !wrapper_named(r.function, code, impl_->policy, &why).empty()) {
      std::fprintf(stderr,
                   ": %s is an allocation wrapper (%s), whose allocations are its "
                   "callers'\n",
                   r.function, inspector::wrapper_reason_name(why));
      continue;
    }
    std::vector<std::string> close =
        r.function[0] ? close_functions(r.function, code) : std::vector<std::string>{};
    if (!close.empty()) {
      std::fprintf(stderr, "; close names:");
      for (size_t k = 0; k < close.size(); ++k)
        std::fprintf(stderr, "%s %s", k ? "," : "", close[k].c_str());
    }
    std::fprintf(stderr, "\n");
  }
  return idle;
}

} // namespace memlayout::cli
