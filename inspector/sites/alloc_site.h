// The allocation site: the one definition every command uses — report
// grouping, advise, replay, diff, and (through route_table.h) the
// interposer's rule matching.
//
// A recorded stack is expanded into source frames, inlined ones included,
// innermost first. Frames of allocator plumbing (malloc, operator new,
// std::allocator, ...) and of allocation wrappers are looked through; the
// site is the first frame left. Wrappers are
//   - named: the built-in list (xmalloc, g_malloc, sqlite3Malloc, ...), the
//     --wrapper option, `wrapper=NAME` lines of a rules file;
//   - detected, from the binary's debug info or from the trace: a function
//     that returns untyped memory (void *, char *, ...) obtained from an
//     allocation call and hands it to two or more distinct callers, or to
//     one caller that is itself a wrapper (nested wrappers). In a trace a
//     caller counts when it accounts for at least 1% of the function's
//     objects; without debug info the return type is unknown and two
//     callers suffice.
// --not-wrapper NAME (or `not-wrapper=NAME` in a rules file) overrides both.
// docs/report.md explains the rule with examples.
#pragma once

#include "code_map.h"
#include "heap_model.h"
#include "symbolizer.h"

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace memlayout::inspector {

// "built-in", "--wrapper", "rules file", "detected" (binary or trace): for
// people.
const char *wrapper_reason_name(WrapperReason r);
// "builtin", "option", "rules_file", "debug_info", "trace": the JSON's
// `looked_through[].decided`; parse_... is its inverse (false when unknown).
const char *looked_through_decided(WrapperReason r);
bool parse_looked_through_decided(const std::string &s, WrapperReason *out);

// Which functions are looked through. Patterns (wrappers, not_wrappers)
// match a function of that name, alone or followed by its parameter list or
// template arguments ("xmalloc" matches "xmalloc(unsigned long)"); a pattern
// ending in '*' matches any function starting with what precedes it.
class WrapperPolicy {
public:
  std::vector<std::string> wrappers;     // --wrapper
  std::vector<std::string> rules_file;   // wrapper= lines of rules files
  std::vector<std::string> not_wrappers; // --not-wrapper, not-wrapper= lines

  // A detected wrapper (exact demangled name) and what showed it.
  struct Detection {
    WrapperReason reason;
    std::string evidence; // "3 callers: create_node, create_op, ..." for reports
  };
  std::map<std::string, Detection> detected;

  // Whether the frame is allocator plumbing or a wrapper: looked through.
  bool is_skipped(const std::string &function) const;
  // Why a (non-plumbing) frame is a wrapper, or nullptr when it is not one.
  bool wrapper_reason(const std::string &function, WrapperReason *why) const;
  bool is_not_wrapper(const std::string &function) const;
};

// malloc-style wrappers of common C and C++ libraries (xmalloc and friends,
// GLib, SQLite, strdup, std::make_unique, ...), in the pattern syntax.
// Container plumbing such as std::_Rb_tree::_M_create_node is not among them:
// it names the element type.
const std::vector<std::string> &builtin_wrappers();

// True when `function` matches `pattern` (the syntax above).
bool wrapper_pattern_matches(const std::string &function, const std::string &pattern);

// The site of a recorded stack (return addresses, innermost first): the first
// frame, inline chains expanded innermost first, that is neither plumbing
// nor a wrapper. Unresolved frames (stripped code) are looked through too, but
// the innermost one after the last wrapper is kept as the site with its first
// named caller. When every frame is looked through, the outermost one.
Group::Site alloc_site(std::span<const uint64_t> stack, Symbolizer &sym, const WrapperPolicy &p);

// Debug information of the modules a trace names, loaded on first use.
class CodeMaps {
public:
  explicit CodeMaps(Symbolizer &sym, std::vector<std::string> debug_dirs = {"/usr/lib/debug"})
      : sym_(sym), debug_dirs_(std::move(debug_dirs)) {}
  // The module holding `pc`, or nullptr (no module, unreadable file).
  const ModuleCode *module_at(uint64_t pc);
  const ModuleCode *module(const std::string &path);
  // What a function of the module at `pc` returns (kUnknown without DWARF).
  Tri returns_untyped(uint64_t pc, const std::string &function);
  std::vector<std::string> take_warnings();

private:
  Symbolizer &sym_;
  std::vector<std::string> debug_dirs_;
  std::map<std::string, std::unique_ptr<ModuleCode>> loaded_;
  std::vector<std::string> warnings_;
};

// Detection from a module's debug info: adds to p.detected every function of
// `code` that the rule in the header comment makes a wrapper, judged by its
// call sites and inlined copies. Returns how many it added.
size_t detect_wrappers_in_binary(const ModuleCode &code, WrapperPolicy &p);

// Detection from recorded stacks, each with a weight (objects allocated
// there). Run after detect_wrappers_in_binary on the modules involved, so
// the two agree where both see a function.
struct WeightedStack {
  std::span<const uint64_t> frames;
  uint64_t weight;
};
size_t detect_wrappers_in_stacks(std::span<const WeightedStack> stacks, Symbolizer &sym,
                                 CodeMaps &code, WrapperPolicy &p);

// Both, as every command does before computing sites: the binaries of the
// modules the stacks' first non-plumbing frames lie in, then the stacks.
void detect_wrappers(std::span<const WeightedStack> stacks, Symbolizer &sym, CodeMaps &code,
                     WrapperPolicy &p);

// "pool_get (detected), xmalloc (built-in)": what a report prints.
std::string looked_through_text(const std::vector<LookedThrough> &l);

} // namespace memlayout::inspector
