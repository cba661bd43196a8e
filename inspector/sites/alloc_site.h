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
#include <set>
#include <span>
#include <string>
#include <unordered_map>
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

class CodeMaps;

// The site of a recorded stack (return addresses, innermost first): the first
// frame, inline chains expanded innermost first, that is neither plumbing
// nor a wrapper. Unresolved frames (stripped code) are looked through too, but
// the innermost one after the last wrapper is kept as the site with its first
// named caller. When every frame is looked through, the outermost one.
//
// Tail calls: with `code`, a frame whose call (DWARF call site at its return
// address) went to a function F that left no frame of its own — the
// allocator's caller calling F rather than the allocator, or a caller of
// looked-through frames calling a function that is not looked through — has
// F's frames before its own (CodeMaps::tail_called), as gdb shows tail-call
// frames: `return malloc(sizeof(struct node))` compiled to a jump is the
// site of its allocations.
//
// `caller`, when given, receives the frame that called the site's function
// (its function, file and line: the call), left as it is when the stack
// shows none (the site is the outermost frame, or an unnamed one): what a
// type map's sites at that call say the site's function hands out.
Group::Site alloc_site(std::span<const uint64_t> stack, Symbolizer &sym, const WrapperPolicy &p,
                       CodeMaps *code = nullptr, Group::Site *caller = nullptr);

// Where a function that a call site calls has its code: the first of
// `modules` holding it, and its tail call there. `may_tail_call`: it can be
// missing from a stack below a frame that called it — its code records a
// tail call, or no module here has DWARF for it to say otherwise.
struct TailCallee {
  const ModuleCode *module = nullptr;
  uint32_t function = UINT32_MAX; // in `module`
  const ModuleCode::Call *tail = nullptr;
  bool may_tail_call = false;
};
TailCallee find_tail_callee(const std::string &function,
                            std::span<const ModuleCode *const> modules);

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
  // The frames of a function tail-called on the way to an allocation: the
  // call returning to `return_pc` (a stack frame) went to F, which is not
  // allocator plumbing nor `below` (the outermost function of the frame
  // below; nullptr when the frame below is the allocator), and can have left
  // no frame (find_tail_callee). F's frames are those of its tail call, for
  // its file and line, or its entry's when none is recorded. nullptr when
  // the module's debug info records no call there. Cached per address.
  const SymbolizedAddress *tail_called(uint64_t return_pc, const std::string *below);
  std::vector<std::string> take_warnings();

private:
  std::unique_ptr<SymbolizedAddress> find_tail_frames(uint64_t return_pc);
  Symbolizer &sym_;
  std::vector<std::string> debug_dirs_;
  std::map<std::string, std::unique_ptr<ModuleCode>> loaded_;
  std::map<const ModuleCode *, uint64_t> load_bias_;
  std::vector<const ModuleCode *> order_; // loaded, in the order first asked for
  std::unordered_map<uint64_t, std::unique_ptr<SymbolizedAddress>> tail_;
  std::vector<std::string> warnings_;
};

// Several modules' debug information as one call graph: a function a module
// only declares (it calls into another module) is the one of that name whose
// code the first of the modules holds; each module's own functions are its.
// So an executable's call sites are callers of the wrappers its libraries
// define.
class CallGraph {
public:
  explicit CallGraph(std::span<const ModuleCode *const> modules);
  struct Function {
    std::string name;
    Tri returns_untyped = Tri::kUnknown;
    bool plumbing = false;              // is_allocator_frame
    bool allocates = false;             // makes an allocation call: to plumbing that obtains
                                        // memory, or to an allocating function returning
                                        // untyped memory
    const ModuleCode *module = nullptr; // holding its code; nullptr: none here
    bool obtains = false;               // a call to it obtains memory (is_allocation_call)
  };
  struct Callee {
    uint32_t function;
    bool tail;
  };
  const std::vector<Function> &functions() const { return fns_; }
  // The functions calling it or holding an inlined copy of it, and the
  // modules whose debug info says so.
  const std::set<uint32_t> &callers(uint32_t f) const { return callers_[f]; }
  const std::vector<const ModuleCode *> &caller_modules(uint32_t f) const {
    return caller_modules_[f];
  }
  // What it calls or inlines.
  const std::vector<Callee> &callees(uint32_t f) const { return callees_[f]; }

private:
  std::vector<Function> fns_;
  std::vector<std::set<uint32_t>> callers_;
  std::vector<std::vector<const ModuleCode *>> caller_modules_;
  std::vector<std::vector<Callee>> callees_;
};

// Detection from the modules' debug info: adds to p.detected every function
// that the rule in the header comment makes a wrapper, judged by its call
// sites and inlined copies in all of `modules` (CallGraph). Returns how many
// it added.
size_t detect_wrappers_in_modules(std::span<const ModuleCode *const> modules, WrapperPolicy &p);
// The same for one module.
size_t detect_wrappers_in_binary(const ModuleCode &code, WrapperPolicy &p);

// The functions through which a function named by a rule's function key
// allocates that are sites of their own: what it calls or inlines (or
// tail-calls) that allocates and is not looked through. Why such a rule can
// route nothing though the function runs.
struct SiteCallee {
  std::string caller, callee;
  bool tail = false;
};
// `g`: the modules' call graph, built once for every rule asked about.
std::vector<SiteCallee> sites_called_by(const char *function_key, const CallGraph &g,
                                        const WrapperPolicy &p);

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

// Whether the site's allocation came through the C++ standard library's
// frames (a container's growth, make_shared): the site's line is where the
// program called the library, not where it wrote the allocation.
bool through_standard_library(const Group::Site &site);

} // namespace memlayout::inspector
