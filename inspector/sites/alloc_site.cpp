#include "alloc_site.h"

#include "rules.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>
#include <unordered_map>

namespace memlayout::inspector {

namespace {

std::string basename(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The site of one symbolized frame; unresolved ones name module and offset.
Group::Site site_of(const SymbolizedAddress &a, const SourceFrame &f) {
  Group::Site s;
  s.function = f.function;
  s.line = f.line;
  s.column = f.line ? f.column : 0;
  if (a.resolved)
    s.file = f.file;
  else if (a.module)
    s.file = basename(a.module->path) + "+" + hex(a.module_offset);
  else
    s.file = hex(a.address);
  return s;
}

// A function's name from its name proper on (no return type), without a
// clone's suffix (a symbol table names GCC's `xcalloc.constprop.0`, which is
// xcalloc): what wrapper patterns are compared with. Found once per
// function, not once per pattern: finding it parses the whole demangled
// name, and a C++ program's module holds thousands of them against some 80
// patterns.
std::string_view from_name_proper(const std::string &function) {
  std::string_view name =
      std::string_view(function).substr(rules::function_name_offset(function.c_str()));
  return name.substr(0, rules::without_clone_suffix(name.data(), name.size()));
}

bool name_matches_pattern(std::string_view f, std::string_view e) {
  if (e.empty())
    return false;
  if (e.back() == '*')
    return f.substr(0, e.size() - 1) == e.substr(0, e.size() - 1);
  if (f.substr(0, e.size()) != e)
    return false;
  if (f.size() == e.size())
    return true;
  char next = f[e.size()];
  return next == '(' || next == '<' || next == ' ';
}

bool any_matches(std::string_view name, const std::vector<std::string> &patterns) {
  for (const std::string &p : patterns)
    if (name_matches_pattern(name, p))
      return true;
  return false;
}

// A stack as the detection sees it: resolved frames only up to the first
// unresolved one (what lies beyond cannot be judged), each with the return
// address it came from.
struct ExpandedFrame {
  const std::string *function;
  uint64_t pc;
};

std::vector<ExpandedFrame> expand(std::span<const uint64_t> stack, Symbolizer &sym,
                                  CodeMaps &code) {
  std::vector<ExpandedFrame> out;
  const std::string *below = nullptr;
  for (uint64_t pc : stack) {
    // A function tail-called on the way comes before the caller's frames,
    // as alloc_site() sees it.
    if (const SymbolizedAddress *t = code.tail_called(pc, below))
      for (const SourceFrame &f : t->frames)
        out.push_back({&f.function, pc});
    const SymbolizedAddress &a = sym.symbolize(pc);
    if (!a.resolved)
      break;
    for (const SourceFrame &f : a.frames)
      out.push_back({&f.function, pc});
    below = &a.frames.back().function;
  }
  return out;
}

// The distinct callers that carry at least 1% of the weight.
std::vector<std::string> significant(const std::map<std::string, uint64_t> &callers,
                                     uint64_t total) {
  std::vector<std::pair<uint64_t, std::string>> by_weight;
  for (const auto &[c, w] : callers)
    if (w * 100 >= total)
      by_weight.push_back({w, c});
  std::sort(by_weight.rbegin(), by_weight.rend());
  std::vector<std::string> out;
  for (auto &[w, c] : by_weight)
    out.push_back(std::move(c));
  return out;
}

// "2 callers: create_node, create_op": names by their scopes only (no
// template arguments or parameters), at most four.
std::string callers_evidence(const std::vector<std::string> &callers) {
  std::string e =
      std::to_string(callers.size()) + (callers.size() == 1 ? " caller: " : " callers: ");
  std::vector<std::string> shown;
  for (const auto &c : callers) {
    char scopes[rules::kMaxName];
    std::string name = rules::normalize_function(c.c_str(), scopes, sizeof scopes) ? scopes : c;
    if (std::find(shown.begin(), shown.end(), name) == shown.end())
      shown.push_back(std::move(name));
  }
  for (size_t i = 0; i < shown.size() && i < 4; ++i)
    e += (i ? ", " : "") + shown[i];
  if (shown.size() > 4)
    e += ", ...";
  return e;
}

} // namespace

const char *wrapper_reason_name(WrapperReason r) {
  switch (r) {
  case WrapperReason::kBuiltin:
    return "built-in";
  case WrapperReason::kOption:
    return "--wrapper";
  case WrapperReason::kRulesFile:
    return "rules file";
  case WrapperReason::kDetectedBinary:
  case WrapperReason::kDetectedTrace:
    return "detected";
  }
  return "?";
}

namespace {
constexpr std::pair<WrapperReason, const char *> kDecided[] = {
    {WrapperReason::kBuiltin, "builtin"},      {WrapperReason::kOption, "option"},
    {WrapperReason::kRulesFile, "rules_file"}, {WrapperReason::kDetectedBinary, "debug_info"},
    {WrapperReason::kDetectedTrace, "trace"},
};
} // namespace

const char *looked_through_decided(WrapperReason r) {
  for (const auto &[reason, name] : kDecided)
    if (reason == r)
      return name;
  return "?";
}

bool parse_looked_through_decided(const std::string &s, WrapperReason *out) {
  for (const auto &[reason, name] : kDecided)
    if (s == name) {
      *out = reason;
      return true;
    }
  return false;
}

const std::vector<std::string> &builtin_wrappers() {
  static const std::vector<std::string> kWrappers = {
      // libiberty, gnulib, git, many GNU programs
      "xmalloc", "xcalloc", "xrealloc", "xzalloc", "xstrdup", "xstrndup", "xmemdup", "xnmalloc",
      "xcharalloc", "ximalloc", "xireallocarray",
      // GLib
      "g_malloc", "g_malloc0", "g_realloc", "g_try_malloc", "g_try_malloc0", "g_try_realloc",
      "g_malloc_n", "g_malloc0_n", "g_realloc_n", "g_slice_alloc", "g_slice_alloc0", "g_strdup",
      "g_strndup", "g_memdup", "g_memdup2",
      // SQLite: its own wrapper layers above the system allocator
      "sqlite3Malloc", "sqlite3MallocZero", "sqlite3_malloc", "sqlite3_malloc64", "sqlite3_realloc",
      "sqlite3_realloc64", "sqlite3Realloc", "sqlite3DbMalloc*", "sqlite3DbRealloc",
      "sqlite3DbReallocOrFree", "sqlite3DbStrDup", "sqlite3DbStrNDup", "sqlite3MemMalloc",
      "sqlite3MemRealloc", "dbMallocRawFinish", "dbReallocFinish",
      // C library helpers that allocate on their caller's behalf
      "strdup", "strndup", "__strdup", "__strndup", "wcsdup",
      // Python, OpenSSL, Perl
      "PyMem_Malloc", "PyMem_RawMalloc", "PyObject_Malloc", "_PyObject_Malloc", "CRYPTO_malloc",
      "CRYPTO_zalloc", "CRYPTO_realloc", "Perl_safesysmalloc", "Perl_safesyscalloc",
      "Perl_safesysrealloc",
      // The C++ standard library, out of line or inlined: its factories,
      // containers, strings, std::function, std::thread and algorithms
      // allocate for the code that calls them, which names the site
      // (load_accounts, not _Rb_tree::_M_get_node; the caller of
      // make_shared, of operator+ on strings, of a vector's push_back)
      "std::*", "__gnu_cxx::*",
      // Rust's allocation plumbing: the global allocator's entry points, the
      // alloc crate (Box, Vec, RawVec, String, the collections) and the hash
      // table under std's HashMap; the program's code that calls them is
      // the site (std::* above is Rust's std as well)
      "__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc", "__rdl_*", "__rg_*", "alloc::*",
      "hashbrown::*", "core::*",
      // memlayout's own trees: the record allocator inlined into each tree's
      // new_node/new_descriptor/... which then names the group
      "memlayout::trees::RecordAllocator::*"};
  return kWrappers;
}

// A member named `allocate` (the Allocator requirement's: a custom
// allocator's, handed to a container or called by a pool) or a class's own
// `operator new` (it allocates for the new-expression that calls it, as the
// global one does: MEMLAYOUT_SEG_CLASS's, a free list's): plumbing, like
// std::allocator's.
bool is_allocator_member(const std::string &function) {
  char norm[rules::kMaxName];
  size_t n = rules::normalize_function(function.c_str(), norm, sizeof norm);
  std::string_view name(norm, n);
  size_t scope = name.rfind("::");
  if (scope == std::string_view::npos)
    return false;
  std::string_view member = name.substr(scope + 2);
  return member == "allocate" || member == "operator new" || member == "operator new[]";
}

// A Rust method named by its Self type, and trait where it implements one:
// "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
// "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem": plumbing
// where either is the standard library's (an allocator's trait, a
// collection's type), as std::* and core::* names are.
bool rust_impl_of_plumbing(std::string_view name) {
  if (name.empty() || name[0] != '<')
    return false;
  size_t close = name.find(">::");
  if (close == std::string_view::npos)
    return false;
  std::string_view inside = name.substr(1, close - 1);
  std::string_view self = inside, trait;
  if (size_t as = inside.find(" as "); as != std::string_view::npos) {
    self = inside.substr(0, as);
    trait = inside.substr(as + 4);
  }
  for (std::string_view part : {self, trait})
    for (std::string_view prefix : {"alloc::", "hashbrown::", "core::", "std::"})
      if (part.starts_with(prefix))
        return true;
  return false;
}

bool WrapperPolicy::is_not_wrapper(const std::string &function) const {
  return !not_wrappers.empty() && any_matches(from_name_proper(function), not_wrappers);
}

bool WrapperPolicy::wrapper_reason(const std::string &function, WrapperReason *why) const {
  const std::string_view name = from_name_proper(function);
  if (any_matches(name, not_wrappers))
    return false;
  WrapperReason r;
  if (auto it = detected.find(function); it != detected.end())
    r = it->second.reason;
  else if (any_matches(name, wrappers))
    r = WrapperReason::kOption;
  else if (any_matches(name, rules_file))
    r = WrapperReason::kRulesFile;
  else if (any_matches(name, builtin_wrappers()) || is_allocator_member(function) ||
           rust_impl_of_plumbing(name))
    r = WrapperReason::kBuiltin;
  else
    return false;
  if (why)
    *why = r;
  return true;
}

bool WrapperPolicy::is_skipped(const std::string &function) const {
  return is_allocator_frame(function) || wrapper_reason(function, nullptr);
}

Group::Site alloc_site(std::span<const uint64_t> stack, Symbolizer &sym, const WrapperPolicy &p,
                       CodeMaps *code, Group::Site *caller) {
  // Unresolved frames (stripped libraries) are looked through like wrappers,
  // except that the innermost one after the last wrapper is the best site we
  // have: it tells call paths apart, and its first named caller says where.
  Group::Site last, unresolved, site;
  last.function = "??";
  bool have_unresolved = false;
  std::vector<LookedThrough> through;
  size_t site_frame = 0; // the site's index in the frames visit() found it in
  // The frames of one address; true when the site is among them (in `site`).
  auto visit = [&](const SymbolizedAddress &a) {
    for (size_t i = 0; i < a.frames.size(); ++i) {
      const SourceFrame &f = a.frames[i];
      last = site_of(a, f);
      if (!a.resolved) {
        if (!have_unresolved) {
          unresolved = last;
          have_unresolved = true;
        }
        continue;
      }
      WrapperReason why;
      bool wrapper = p.wrapper_reason(f.function, &why);
      if (wrapper || is_allocator_frame(f.function)) {
        have_unresolved = false; // what was below it was the wrapper's inside
        if (wrapper && (through.empty() || through.back().function != f.function)) {
          auto d = p.detected.find(f.function);
          through.push_back({f.function, why, d == p.detected.end() ? "" : d->second.evidence});
        }
        continue;
      }
      if (!have_unresolved) {
        site = std::move(last);
      } else {
        site = std::move(unresolved);
        site.caller = f.function;
      }
      site.looked_through = std::move(through);
      site_frame = i;
      return true;
    }
    return false;
  };
  // The frame that called the site's function, for `caller`: the next one
  // out, an inlining function's in the same address, else the first of the
  // next return address, which a function tail-called on the way precedes
  // as it does for the site. Only a resolved one: an unnamed frame's line
  // says nothing.
  auto called_from = [&](const SymbolizedAddress &a, size_t next_pc) {
    if (!caller || !site.caller.empty() || site.function == "??")
      return;
    const SymbolizedAddress *c = &a;
    size_t frame = site_frame + 1;
    if (frame >= a.frames.size()) {
      if (next_pc >= stack.size())
        return;
      const std::string *below = &a.frames.back().function;
      c = code ? code->tail_called(stack[next_pc], below) : nullptr;
      if (!c)
        c = &sym.symbolize(stack[next_pc]);
      frame = 0;
    }
    if (c->resolved && c->frames[frame].function != "??")
      *caller = site_of(*c, c->frames[frame]);
  };
  const std::string *below = nullptr; // nullptr: the allocator
  bool below_resolved = true;
  for (size_t i = 0; i < stack.size(); ++i) {
    const uint64_t pc = stack[i];
    // Everything below was looked through. A function the call at pc went
    // to that left no frame was tail-called: its frames come first. Past the
    // allocator's caller, one looked through adds nothing but a name.
    if (code && below_resolved && !have_unresolved)
      if (const SymbolizedAddress *t = code->tail_called(pc, below);
          t && (!below || !p.is_skipped(t->frames.back().function)) && visit(*t)) {
        called_from(*t, i); // past its frames, the frame at pc made the tail call
        return site;
      }
    const SymbolizedAddress &a = sym.symbolize(pc);
    if (visit(a)) {
      called_from(a, i + 1);
      return site;
    }
    below = &a.frames.back().function;
    below_resolved = a.resolved;
  }
  Group::Site &s = have_unresolved ? unresolved : last;
  s.looked_through = std::move(through);
  s.every_frame_looked_through = !have_unresolved && !stack.empty();
  return s;
}

TailCallee find_tail_callee(const std::string &function,
                            std::span<const ModuleCode *const> modules) {
  TailCallee t;
  for (const ModuleCode *m : modules) {
    uint32_t f = m->function_index(function);
    if (f == UINT32_MAX || !m->has_code(f))
      continue;
    t.module = m;
    t.function = f;
    t.tail = m->tail_call(f);
    // Without DWARF its calls are unknown; with it, GCC and Clang record
    // every call site of optimized code (DW_AT_call_all_calls).
    t.may_tail_call = t.tail || !m->has_dwarf();
    return t;
  }
  t.may_tail_call = true; // its code is elsewhere: nothing says it cannot
  return t;
}

const ModuleCode *CodeMaps::module(const std::string &path) {
  if (path.empty())
    return nullptr;
  auto it = loaded_.find(path);
  if (it != loaded_.end())
    return it->second.get();
  std::string error;
  auto code = ModuleCode::load(path, debug_dirs_, &error);
  if (!code)
    warnings_.push_back("cannot read the debug information of " + error);
  const ModuleCode *m = loaded_.emplace(path, std::move(code)).first->second.get();
  if (m)
    order_.push_back(m);
  return m;
}

const ModuleCode *CodeMaps::module_at(uint64_t pc) {
  const ModuleEntry *m = sym_.find_module(pc);
  if (!m)
    return nullptr;
  const ModuleCode *code = module(sym_.module_path(*m));
  if (code)
    load_bias_[code] = m->load_bias;
  return code;
}

Tri CodeMaps::returns_untyped(uint64_t pc, const std::string &function) {
  const ModuleCode *code = module_at(pc);
  if (!code)
    return Tri::kUnknown;
  const ModuleCode::Function *f = code->function(function);
  return f ? f->returns_untyped : Tri::kUnknown;
}

const SymbolizedAddress *CodeMaps::tail_called(uint64_t return_pc, const std::string *below) {
  auto [it, fresh] = tail_.try_emplace(return_pc);
  if (fresh)
    it->second = find_tail_frames(return_pc);
  const SymbolizedAddress *t = it->second.get();
  if (!t || (below && t->frames.back().function == *below))
    return nullptr;
  return t;
}

std::unique_ptr<SymbolizedAddress> CodeMaps::find_tail_frames(uint64_t return_pc) {
  const ModuleCode *here = module_at(return_pc);
  if (!here || !here->has_dwarf())
    return nullptr;
  const ModuleCode::Call *call = here->call_returning_to(return_pc - load_bias_[here]);
  if (!call)
    return nullptr;
  const std::string &name = here->functions()[call->callee].name;
  if (is_allocator_frame(name))
    return nullptr;
  // Its code: in the caller's module, or one of the others read so far.
  std::vector<const ModuleCode *> where{here};
  for (const ModuleCode *m : order_)
    if (m != here)
      where.push_back(m);
  TailCallee callee = find_tail_callee(name, where);
  if (!callee.may_tail_call)
    return nullptr;
  auto out = std::make_unique<SymbolizedAddress>();
  out->address = return_pc;
  out->resolved = true;
  auto bias = callee.module ? load_bias_.find(callee.module) : load_bias_.end();
  if (bias != load_bias_.end()) {
    // Named at its tail call: the line of `return malloc(...)`, with any
    // function inlined there.
    if (callee.tail) {
      const SymbolizedAddress &a = sym_.symbolize(bias->second + callee.tail->return_pc, true);
      if (a.resolved && a.frames.back().function == name) {
        *out = a;
        return out;
      }
    }
    // Else at its entry.
    for (const auto &sc : callee.module->scopes())
      if (sc.function == callee.function && sc.parent == ModuleCode::kNoScope &&
          !sc.ranges.empty()) {
        const SymbolizedAddress &a = sym_.symbolize(bias->second + sc.ranges[0].lo, false);
        if (a.resolved) {
          *out = a;
          out->frames = {a.frames.back()};
          out->frames[0].function = name;
          out->frames[0].inlined = false;
          return out;
        }
        break;
      }
  }
  out->frames = {SourceFrame{name, "", 0, 0, false}};
  return out;
}

std::vector<std::string> CodeMaps::take_warnings() {
  std::vector<std::string> w;
  w.swap(warnings_);
  return w;
}

CallGraph::CallGraph(std::span<const ModuleCode *const> modules) {
  // Global function ids: each module's functions with code are its own; a
  // declared one is the first definition of its name, or one shared
  // undefined function of that name.
  std::unordered_map<std::string, uint32_t> defined, undefined;
  std::vector<std::vector<uint32_t>> id(modules.size());
  auto add = [&](const std::string &name, const ModuleCode *m) {
    fns_.push_back(
        {name, Tri::kUnknown, is_allocator_frame(name), false, m, is_allocation_call(name)});
    return static_cast<uint32_t>(fns_.size() - 1);
  };
  for (size_t mi = 0; mi < modules.size(); ++mi) {
    const ModuleCode &m = *modules[mi];
    id[mi].assign(m.functions().size(), UINT32_MAX);
    for (uint32_t f = 0; f < m.functions().size(); ++f)
      if (m.has_code(f)) {
        id[mi][f] = add(m.functions()[f].name, &m);
        defined.try_emplace(m.functions()[f].name, id[mi][f]);
      }
  }
  for (size_t mi = 0; mi < modules.size(); ++mi) {
    const ModuleCode &m = *modules[mi];
    for (uint32_t f = 0; f < m.functions().size(); ++f) {
      const ModuleCode::Function &fn = m.functions()[f];
      if (id[mi][f] == UINT32_MAX) {
        if (auto d = defined.find(fn.name); d != defined.end())
          id[mi][f] = d->second;
        else if (auto u = undefined.find(fn.name); u != undefined.end())
          id[mi][f] = u->second;
        else
          id[mi][f] = undefined[fn.name] = add(fn.name, nullptr);
      }
      // What it returns: its definition's word, else a declaration's.
      Tri &r = fns_[id[mi][f]].returns_untyped;
      if (r == Tri::kUnknown ||
          (fns_[id[mi][f]].module == &m && fn.returns_untyped != Tri::kUnknown))
        r = fn.returns_untyped;
    }
  }
  callers_.resize(fns_.size());
  caller_modules_.resize(fns_.size());
  callees_.resize(fns_.size());

  // Scopes of every module, numbered one after another.
  struct Scope {
    uint32_t function, parent, depth;
  };
  std::vector<Scope> scopes;
  std::vector<std::vector<Callee>> calls_of;
  std::vector<std::vector<uint32_t>> inlined_of;
  auto called_by = [&](uint32_t callee, uint32_t caller, const ModuleCode *m, bool tail) {
    callers_[callee].insert(caller);
    auto &cm = caller_modules_[callee];
    if (std::find(cm.begin(), cm.end(), m) == cm.end())
      cm.push_back(m);
    callees_[caller].push_back({callee, tail});
  };
  for (size_t mi = 0; mi < modules.size(); ++mi) {
    const ModuleCode &m = *modules[mi];
    uint32_t base = static_cast<uint32_t>(scopes.size());
    for (const auto &sc : m.scopes())
      scopes.push_back({id[mi][sc.function],
                        sc.parent == ModuleCode::kNoScope ? ModuleCode::kNoScope : base + sc.parent,
                        sc.depth});
    calls_of.resize(scopes.size());
    inlined_of.resize(scopes.size());
    for (const auto &c : m.calls()) {
      uint32_t s = base + c.scope, callee = id[mi][c.callee];
      called_by(callee, scopes[s].function, &m, c.tail);
      calls_of[s].push_back({callee, c.tail});
    }
    for (uint32_t s = base; s < scopes.size(); ++s)
      if (scopes[s].parent != ModuleCode::kNoScope) {
        called_by(scopes[s].function, scopes[scopes[s].parent].function, &m, false);
        inlined_of[scopes[s].parent].push_back(s);
      }
  }
  // Deepest scopes first, so a scope's inlined copies are judged before it.
  std::vector<uint32_t> order(scopes.size());
  for (uint32_t s = 0; s < scopes.size(); ++s)
    order[s] = s;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return scopes[a].depth > scopes[b].depth; });
  auto untyped = [&](uint32_t f) { return fns_[f].returns_untyped == Tri::kYes; };

  // Functions that make an allocation call: to plumbing that obtains memory
  // (not free, nor a query such as seg_pool_of), or to a function that
  // itself allocates and returns untyped memory (transitively), so a
  // wrapper calling a wrapper allocates before either is known as one.
  std::vector<char> scope_allocates(scopes.size());
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t s : order) {
      bool a = false;
      for (const Callee &c : calls_of[s])
        a = a || fns_[c.function].obtains || (fns_[c.function].allocates && untyped(c.function));
      for (uint32_t child : inlined_of[s]) {
        uint32_t f = scopes[child].function;
        a = a || (scope_allocates[child] && (fns_[f].plumbing || untyped(f)));
      }
      if (a && !scope_allocates[s]) {
        scope_allocates[s] = 1;
        if (!fns_[scopes[s].function].allocates) {
          fns_[scopes[s].function].allocates = true;
          changed = true;
        }
      }
    }
  }
}

size_t detect_wrappers_in_modules(std::span<const ModuleCode *const> modules, WrapperPolicy &p) {
  CallGraph g(modules);
  const auto &fns = g.functions();
  size_t added = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t f = 0; f < fns.size(); ++f) {
      const std::string &name = fns[f].name;
      if (fns[f].plumbing || !fns[f].allocates || fns[f].returns_untyped != Tri::kYes ||
          g.callers(f).empty() || p.is_skipped(name) || p.is_not_wrapper(name))
        continue;
      bool all_wrappers = true;
      std::vector<std::string> names;
      for (uint32_t c : g.callers(f)) {
        names.push_back(fns[c].name);
        all_wrappers = all_wrappers && p.is_skipped(fns[c].name) && !fns[c].plumbing;
      }
      if (g.callers(f).size() < 2 && !all_wrappers)
        continue;
      // The modules the evidence comes from: its own, then its callers'.
      std::vector<const ModuleCode *> from;
      if (fns[f].module)
        from.push_back(fns[f].module);
      for (const ModuleCode *m : g.caller_modules(f))
        if (std::find(from.begin(), from.end(), m) == from.end())
          from.push_back(m);
      std::string where;
      for (size_t i = 0; i < from.size(); ++i)
        where += (i ? " and " : "") + basename(from[i]->path());
      p.detected[name] = {WrapperReason::kDetectedBinary, "returns untyped memory to " +
                                                              callers_evidence(names) +
                                                              " (debug info of " + where + ")"};
      ++added;
      changed = true;
    }
  }
  return added;
}

size_t detect_wrappers_in_binary(const ModuleCode &code, WrapperPolicy &p) {
  const ModuleCode *one[] = {&code};
  return detect_wrappers_in_modules(one, p);
}

std::vector<SiteCallee> sites_called_by(const char *function_key, const CallGraph &g,
                                        const WrapperPolicy &p) {
  const auto &fns = g.functions();
  std::vector<SiteCallee> out;
  for (uint32_t f = 0; f < fns.size(); ++f) {
    if (!fns[f].module || !rules::function_key_matches(fns[f].name.c_str(), function_key))
      continue;
    for (const CallGraph::Callee &c : g.callees(f)) {
      const auto &callee = fns[c.function];
      if (!callee.allocates || p.is_skipped(callee.name) || c.function == f)
        continue;
      bool seen = false;
      for (auto &o : out)
        if (o.caller == fns[f].name && o.callee == callee.name) {
          o.tail = o.tail && c.tail;
          seen = true;
        }
      if (!seen)
        out.push_back({fns[f].name, callee.name, c.tail});
    }
  }
  return out;
}

size_t detect_wrappers_in_stacks(std::span<const WeightedStack> stacks, Symbolizer &sym,
                                 CodeMaps &code, WrapperPolicy &p) {
  std::vector<std::vector<ExpandedFrame>> expanded;
  expanded.reserve(stacks.size());
  for (const auto &s : stacks)
    expanded.push_back(expand(s.frames, sym, code));

  size_t added = 0;
  // Which stacks start where: each stack's first frame that is not looked
  // through (-1: none), and the stacks by that frame's function. Worked
  // out again only when a wrapper was found; is_skipped matches a name
  // against every pattern, and asking it per candidate for every stack
  // took a large C++ program's report (gcc's cc1: 7.8 M events) 44 s.
  std::unordered_map<const std::string *, bool> skipped;
  std::vector<long> first(expanded.size(), -1);
  std::unordered_map<std::string, std::vector<uint32_t>> by_first;
  size_t indexed_at = SIZE_MAX;
  auto index_sites = [&] {
    if (indexed_at == added)
      return;
    indexed_at = added;
    skipped.clear();
    by_first.clear();
    for (size_t i = 0; i < expanded.size(); ++i) {
      const auto &e = expanded[i];
      first[i] = -1;
      for (size_t k = 0; k < e.size() && first[i] < 0; ++k) {
        auto [it, fresh] = skipped.try_emplace(e[k].function, false);
        if (fresh)
          it->second = p.is_skipped(*e[k].function);
        if (!it->second)
          first[i] = static_cast<long>(k);
      }
      if (first[i] >= 0)
        by_first[*e[first[i]].function].push_back(static_cast<uint32_t>(i));
    }
  };
  // Weighted callers of the chain e[k..k+n) wherever a stack has it at its
  // first non-skipped frame.
  auto callers_of = [&](const std::vector<std::string> &chain, uint64_t *total) {
    std::map<std::string, uint64_t> callers;
    *total = 0;
    index_sites();
    auto starting = by_first.find(chain[0]);
    if (starting == by_first.end())
      return callers;
    for (uint32_t i : starting->second) {
      const auto &e = expanded[i];
      long k = first[i];
      if (k < 0 || static_cast<size_t>(k) + chain.size() > e.size())
        continue;
      bool same = true;
      for (size_t j = 0; j < chain.size() && same; ++j)
        same = *e[k + j].function == chain[j];
      if (!same)
        continue;
      *total += stacks[i].weight;
      if (static_cast<size_t>(k) + chain.size() < e.size())
        callers[*e[k + chain.size()].function] += stacks[i].weight;
    }
    return callers;
  };

  for (int round = 0; round < 8; ++round) {
    // Candidates: each stack's first frame left, with its pc.
    std::map<std::string, uint64_t> candidates;
    index_sites();
    for (size_t i = 0; i < expanded.size(); ++i)
      if (first[i] >= 0)
        candidates.emplace(*expanded[i][first[i]].function, expanded[i][first[i]].pc);
    size_t before = added;
    for (const auto &[name, pc] : candidates) {
      if (p.is_not_wrapper(name) || name == "??")
        continue;
      // Climb a chain of single callers that return untyped memory until a
      // frame with several callers: all of them are wrappers, or none is.
      std::vector<std::string> chain{name};
      std::vector<Tri> returns{code.returns_untyped(pc, name)};
      std::vector<std::string> found;
      while (chain.size() <= 4) {
        uint64_t total;
        auto callers = callers_of(chain, &total);
        auto sig = significant(callers, total);
        Tri r = returns.back();
        if (sig.size() >= 2 && r != Tri::kNo) {
          found = std::move(sig);
          break;
        }
        if (sig.size() != 1 || r != Tri::kYes)
          break;
        if (p.is_skipped(sig[0]) && !is_allocator_frame(sig[0])) {
          found = std::move(sig); // the one caller is a wrapper already
          break;
        }
        if (is_allocator_frame(sig[0]))
          break;
        chain.push_back(sig[0]);
        returns.push_back(code.returns_untyped(pc, sig[0]));
      }
      if (found.empty())
        continue;
      for (const auto &f : chain) {
        if (p.is_skipped(f))
          continue;
        p.detected[f] = {WrapperReason::kDetectedTrace,
                         "returns memory to " + callers_evidence(found) + " (recorded stacks)"};
        ++added;
      }
    }
    if (added == before)
      break;
  }
  return added;
}

void detect_wrappers(std::span<const WeightedStack> stacks, Symbolizer &sym, CodeMaps &code,
                     WrapperPolicy &p) {
  // In the order the stacks first name them: a declared function is the
  // first definition of its name.
  std::vector<const ModuleCode *> modules;
  std::set<const ModuleCode *> seen;
  for (const auto &s : stacks)
    for (uint64_t pc : s.frames)
      if (const ModuleCode *m = code.module_at(pc); m && m->has_dwarf() && seen.insert(m).second)
        modules.push_back(m);
  detect_wrappers_in_modules(modules, p);
  detect_wrappers_in_stacks(stacks, sym, code, p);
}

bool through_standard_library(const Group::Site &site) {
  return std::any_of(site.looked_through.begin(), site.looked_through.end(), [](const auto &w) {
    std::string_view name(w.function);
    name.remove_prefix(std::min(name.size(), rules::function_name_offset(w.function.c_str())));
    return name.starts_with("std::") || name.starts_with("__gnu_cxx::");
  });
}

std::string looked_through_text(const std::vector<LookedThrough> &l) {
  std::string out;
  for (const auto &w : l) {
    if (!out.empty())
      out += ", ";
    out += w.function + " (" + wrapper_reason_name(w.reason) + ")";
  }
  return out;
}

} // namespace memlayout::inspector
