// Builds the interposer's route table (ldpreload/route_table_format.h) from
// the modules' code maps: the allocation-site definition of alloc_site.h
// turned into address ranges, so that rules route at run time exactly what
// reports group.
#pragma once

#include "alloc_site.h"
#include "code_map.h"
#include "route_table_format.h"
#include "rules.h"

#include <span>
#include <string>
#include <vector>

namespace memlayout::inspector {

struct RouteModule {
  std::string path;
  uint64_t dev = 0, ino = 0;
  std::vector<routes::RangeEntry> ranges; // sorted, disjoint
};

// Labels one module's code: each scope's own code (not its inlined copies)
// gets the rules naming its site — itself, or when it is looked through the
// site of the scope it is inlined into — or kSkipFrame when the whole inline
// chain is looked through. Code the symbolizer names no function for
// (ModuleCode::unnamed_code) is kUnnamedCode, whatever else covers it: its
// frames are unresolved, pending until a wrapper above clears them
// (alloc_site.h). Only labelled code is listed.
//
// Tail calls (alloc_site.h): the return address of each call to a function F
// that is not looked through and can have left no frame (find_tail_callee,
// over `modules`: the program's; empty: `code` alone) is labelled apart, one
// byte, with the rules naming F: when a frame returning there is the site,
// F was tail-called and is the site. In wrapper code such a byte also has
// kTailCallInWrapper: above a pending unnamed frame it is wrapper code.
std::vector<routes::RangeEntry> label_module(const ModuleCode &code, const WrapperPolicy &p,
                                             const rules::RuleSet &rules,
                                             std::span<const ModuleCode *const> modules = {});

// The rule bits whose function key names `function` (rules::function_key_matches).
uint64_t rules_naming(const std::string &function, const rules::RuleSet &rules);

// Writes the table; false with *error.
bool write_route_table(const std::string &path, const std::vector<RouteModule> &modules,
                       const WrapperPolicy &p, std::string *error);

} // namespace memlayout::inspector
