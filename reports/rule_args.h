// The rules a user gives `record`, `run` and `replay` (--segregate SPEC,
// --rules FILE): checked here, with errors naming the file, line and column,
// and passed to the interposer as text.
#pragma once

#include "rules.h"

#include <memory>
#include <string>
#include <vector>

namespace memlayout::inspector {
class ModuleCode;
}

namespace memlayout::cli {

struct RuleArgs {
  std::vector<std::string> specs; // --segregate, in order
  std::vector<std::string> files; // --rules, in order
  bool empty() const { return specs.empty() && files.empty(); }
};

struct LoadedRules {
  std::unique_ptr<rules::RuleSet> set; // files' rules first, then --segregate's
  std::vector<std::string> origin;     // per rule: "FILE:LINE" or "--segregate"
  // Per rule: the rule as written, before expand_match_keys made functions
  // of its file= or type= key.
  std::vector<rules::Rule> written;
  std::string text; // canonical, one rule or declaration per line (MEMLAYOUT_RULES)
};

// Parses every rule. On an error prints "memlayout: FILE:LINE:COL: message"
// (with the offending line and a caret) and returns false.
bool load_rules(const RuleArgs &args, LoadedRules *out);
// The same for the text of a rules file held in memory (`origin` names it
// in messages): advise's own rules, checked by a replay before writing them.
bool load_rules_text(const std::string &text, const std::string &origin, LoadedRules *out);

// The interposer matches functions only: rewrites each file= rule into
// function rules for the functions with code at that file (and line), from
// the debug line tables of `program` and the libraries it links, and each
// type= rule into function rules for the functions that allocate the type,
// from a `memlayout structs` map (types_file, or the one beside the program
// when find_types). Warns about what resolves to nothing. False (with a
// message) when the rules no longer fit.
// `programs`: the program first, then others the rules are meant for too
// (programs_named).
bool expand_match_keys(LoadedRules *rules, const std::vector<std::string> &programs,
                       const std::string &types_file, bool find_types);

// The program (looked up in PATH) and the libraries it links, as the loader
// would find them; empty when the program cannot be found.
std::vector<std::string> program_modules(const std::string &program);
// The same for several programs, each module once.
std::vector<std::string> program_modules(const std::vector<std::string> &programs);

// The code maps of those modules, separate debug files found under the
// system's debug directory: what the route table labels, and what type=
// rules are resolved against. Modules that cannot be read are left out.
std::vector<std::unique_ptr<inspector::ModuleCode>>
load_code(const std::vector<std::string> &modules);

// The programs a command line names: its program, then every word of its
// arguments that is a path to an executable file (`sh -c './a; ./b'`, `env
// X=1 ./prog`), which --follow-children takes the rules to.
std::vector<std::string> programs_named(const std::vector<std::string> &command);

// Levenshtein distance, for "close names" suggestions.
size_t edit_distance(const std::string &a, const std::string &b);

} // namespace memlayout::cli
