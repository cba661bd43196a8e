// Allocation sites from clang's AST, found with AST matchers: new and
// new[], std::make_unique / make_shared / allocate_shared, and calls to
// allocating functions (malloc, calloc, realloc, aligned_alloc, the
// memlayout pool API seg_*, allocator allocate, any callee whose name says
// alloc, directly or through a function pointer) whose type follows from a
// sizeof or offsetof in their arguments, from the allocator's value_type,
// or from the pointer type the result is converted to. Also the program's
// own allocators of any name (fl_get, pool_get, arena_push): a call whose
// untyped result (void *, char *, ...) is converted to a pointer to a
// record, unless what is known of the callee says it hands back memory it
// did not obtain (alloc_sites.cpp, may_allocate). Code in system headers is
// left out.
#pragma once

#include "record_layout.h"

#include <clang/ASTMatchers/ASTMatchFinder.h>

#include <unordered_map>
#include <vector>

namespace memlayout::inspector {

// Functions whose bodies were judged for obtaining memory (false while one
// is being judged, so recursion ends), for one translation unit.
using ObtainsMemory = std::unordered_map<const clang::FunctionDecl *, bool>;

class AllocSiteCollector : public clang::ast_matchers::MatchFinder::MatchCallback {
public:
  explicit AllocSiteCollector(std::vector<AllocSite> &out) : out_(out) {}

  // Registers the matchers that feed this collector.
  void add_matchers(clang::ast_matchers::MatchFinder &finder);
  void run(const clang::ast_matchers::MatchFinder::MatchResult &result) override;
  // A new translation unit's declarations may reuse a freed one's addresses.
  void onStartOfTranslationUnit() override { obtains_memory_.clear(); }

private:
  std::vector<AllocSite> &out_;
  ObtainsMemory obtains_memory_;
};

// Whether a function of this (unqualified) name allocates: malloc & co.,
// seg_malloc, allocate, xmalloc, ...; not free, deallocate or alloca.
bool is_allocating_function(const std::string &name);

} // namespace memlayout::inspector
