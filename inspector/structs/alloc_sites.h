// Allocation sites from clang's AST, found with AST matchers: new and
// new[], std::make_unique / make_shared / allocate_shared, and calls to
// allocating functions (malloc, calloc, realloc, aligned_alloc, the
// memlayout pool API seg_*, allocator allocate, any callee whose name says
// alloc) whose type follows from a sizeof or offsetof in their arguments,
// from the allocator's value_type, or from the pointer type the result is
// converted to. Code in system headers is left out.
#pragma once

#include "record_layout.h"

#include <clang/ASTMatchers/ASTMatchFinder.h>

#include <vector>

namespace memlayout::inspector {

class AllocSiteCollector : public clang::ast_matchers::MatchFinder::MatchCallback {
public:
  explicit AllocSiteCollector(std::vector<AllocSite> &out) : out_(out) {}

  // Registers the matchers that feed this collector.
  void add_matchers(clang::ast_matchers::MatchFinder &finder);
  void run(const clang::ast_matchers::MatchFinder::MatchResult &result) override;

private:
  std::vector<AllocSite> &out_;
};

// Whether a function of this (unqualified) name allocates: malloc & co.,
// seg_malloc, allocate, xmalloc, ...; not free, deallocate or alloca.
bool is_allocating_function(const std::string &name);

} // namespace memlayout::inspector
