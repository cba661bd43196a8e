// Divides a snapshot's objects into allocation groups: one per (call site,
// size class). The call site is the innermost source frame, inline frames
// included, outside allocator wrappers, so a group names the code that asked
// for memory rather than operator new or xmalloc.
#pragma once

#include "heap_model.h"
#include "symbolizer.h"
#include "trace_reader.h"

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace memlayout::inspector {

struct GroupingOptions {
  // Wrapper functions to skip besides is_allocator_frame() and
  // default_wrappers(). An entry matches a function of that name, alone or
  // followed by its parameter list or template arguments ("xmalloc" matches
  // "xmalloc(unsigned long)"); an entry ending in '*' matches any function
  // starting with what precedes the '*' ("my_alloc_*").
  std::vector<std::string> wrappers;
  // Hook for allocation pools (issue 4): the name of the pool an object was
  // served from, or empty. A group most of whose objects come from one pool
  // is named after it (a tag, when most objects carry one, still wins).
  std::function<std::string(const LiveObject &)> pool_of;
  // Hook for type maps (`memlayout structs`): the record a call site
  // allocates, or empty. It names the group when no tag or pool does.
  std::function<std::string(const Group::Site &)> type_of;
};

// malloc-style wrappers of common C libraries (xmalloc and friends, GLib,
// SQLite, strdup, ...), in the GroupingOptions::wrappers syntax. Container
// plumbing such as std::_Rb_tree::_M_create_node is not among them: it names
// the element type.
const std::vector<std::string> &default_wrappers();

// True when `function` (demangled) is allocator plumbing or a wrapper.
bool is_wrapper_frame(const std::string &function, const GroupingOptions &o);

// The call site of a recorded stack (return addresses, innermost first):
// the first frame, inline chains expanded innermost first, that is not a
// wrapper. Unresolved frames count as call sites ("??", the module's file
// name as `file`). When every frame is a wrapper, the outermost one.
Group::Site call_site(std::span<const uint64_t> stack, Symbolizer &sym, const GroupingOptions &o);

// Groups of `s` ordered by id: id 1 holds the most requested bytes; ties
// are broken by name, site and size class, so ids are deterministic.
// `r` supplies the stack and string tables.
std::vector<Group> group_objects(const HeapSnapshot &s, const TraceReader &r, Symbolizer &sym,
                                 const GroupingOptions &o);

} // namespace memlayout::inspector
