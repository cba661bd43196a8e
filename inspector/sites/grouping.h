// Divides a snapshot's objects into allocation groups: one per (allocation
// site, size class). The site is alloc_site.h's: the innermost source frame,
// inline frames included, outside allocator plumbing and wrappers, so a group
// names the code that asked for memory rather than operator new or xmalloc.
#pragma once

#include "alloc_site.h"
#include "heap_model.h"
#include "symbolizer.h"
#include "trace_reader.h"

#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace memlayout::inspector {

struct GroupingOptions {
  // Which frames are looked through to find each object's site
  // (alloc_site.h); nullptr: the built-in wrappers only.
  const WrapperPolicy *wrappers = nullptr;
  // The modules' debug information, for functions tail-called on the way to
  // an allocation (alloc_site.h); nullptr: none.
  CodeMaps *code = nullptr;
  // Hook for allocation pools (issue 4): the name of the pool an object was
  // served from, or empty. A group most of whose objects come from one pool
  // is named after it (a tag, when most objects carry one, still wins).
  std::function<std::string(const LiveObject &)> pool_of;
  // Hook for type maps (`memlayout structs`): the record a call site
  // allocates and its sizeof, or an empty name. It names the group when no
  // tag or pool does, and the objects could be of it: not smaller than it,
  // and not of another size where the same site also allocates objects of
  // exactly its size (a string duplicated on the record's line). A record
  // `offset` bytes into each object (behind make_shared's control block)
  // names only objects of exactly offset + size bytes: a vector's buffer
  // grown on the same line is not one.
  struct SiteType {
    std::string name;
    uint64_t size = 0;
    uint64_t offset = 0;
    uint32_t variant = 0; // the record's layout there (TypeMap::SiteType::variant)
    // The record ends in an array of 0 or 1 elements (or a flexible one),
    // storage that its objects extend (`Node *next[1]` of a skip list's
    // node): allocated at any size from that array's offset on.
    bool trailing_array = false;
    uint64_t trailing_offset = 0;
  };
  std::function<SiteType(const Group::Site &)> type_of;
  // Where type_of names nothing: the record the site's function hands to
  // the frame that called it, by the type map's site at that call
  // (TypeMap::called_type); `caller` nullptr when no stack shows one. A
  // function with one caller is the site, not looked through as a wrapper
  // (docs/report.md), yet `client *c = zcalloc(sizeof(client))` there says
  // what its calloc allocates. The type most of the group's objects were
  // called for names it, under type_of's conditions; the group keeps its
  // site.
  std::function<SiteType(const Group::Site &site, const Group::Site *caller)> type_from_caller;
};

// The snapshot's distinct stacks weighted by their live objects: what
// detect_wrappers() judges a report's wrappers by.
std::vector<WeightedStack> weighted_stacks(const HeapSnapshot &s, const TraceReader &r);
// The same for weights counted elsewhere (stack id -> objects), in the same
// order: a dump weighs every allocation of the trace.
std::vector<WeightedStack> weighted_stacks(const std::unordered_map<uint64_t, uint64_t> &weight,
                                           const TraceReader &r);

// Groups of `s` ordered by id: id 1 holds the most requested bytes; ties
// are broken by name, site and size class, so ids are deterministic.
// `r` supplies the stack and string tables.
std::vector<Group> group_objects(const HeapSnapshot &s, const TraceReader &r, Symbolizer &sym,
                                 const GroupingOptions &o);

} // namespace memlayout::inspector
