// Segregation rules: the one definition of their syntax and of how they match,
// shared by the interposer (which routes allocations by them), the CLI (which
// checks them and names the file and line of an error) and `replay`.
//
//   function=make_node,pool=nodes        # a rule: match keys, then actions
//   size=48,pad=64,align=64
//
// Match keys: function, file (path or path:line), size (N or A-B), type.
// Action keys: pool=NAME, pad=N, align=N, hugepages=1. A rules file may also
// declare which functions are allocation wrappers to look through when
// finding an allocation's site (inspector/alloc_site.h), one per line:
//
//   wrapper=pool_get                     # allocates for its callers
//   not-wrapper=new_node                 # never looked through
//
// Written for the interposer: fixed-size storage, no allocation, no
// exceptions, no libstdc++.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlayout::rules {

inline constexpr unsigned kMaxRules = 64;
inline constexpr unsigned kMaxName = 512;
inline constexpr unsigned kMaxPoolName = 64;

struct Rule {
  // Match keys; an empty string or !has_size matches anything.
  char function[kMaxName]; // as written: "make_node", "Tree<int>::alloc_node(int)"
  char file[kMaxName];     // "src/tree.c" (a path suffix), with file_line 0 = any line
  uint32_t file_line;
  char type[kMaxName];
  bool has_size;
  uint64_t size_min, size_max; // requested bytes, inclusive
  // Actions.
  char pool[kMaxPoolName]; // "" = no pool: pad/align through the program's allocator
  uint64_t pad;            // 0 = none: objects get at least this many bytes
  uint64_t align;          // 0 = none: a power of two
  bool huge_pages;
  // Where it was written: line in its file (1-based) for messages.
  uint32_t source_line;
};

inline constexpr unsigned kMaxWrappers = 32;

// A `wrapper=` or `not-wrapper=` line of a rules file.
struct WrapperDecl {
  char function[kMaxName]; // a name or a NAME* prefix pattern
  bool not_wrapper;
  uint32_t source_line;
};

struct RuleSet {
  Rule rules[kMaxRules];
  unsigned count;
  WrapperDecl wrappers[kMaxWrappers];
  unsigned wrapper_count;
};

struct ParseError {
  uint32_t line;   // 1-based line of the text
  uint32_t column; // 1-based column of the offending key or value
  char message[256];
};

// Parses one rule ("key=value,key=value"). `line` is stored in the rule and
// in errors. False with *err on the first error.
bool parse_rule(const char *spec, size_t len, uint32_t line, Rule *out, ParseError *err);

// Parses a rules file's text: one rule or wrapper declaration per line, `#`
// starts a comment, blank lines are skipped. Appends to *set (which the
// caller zeroes first).
bool parse_rules(const char *text, size_t len, RuleSet *set, ParseError *err);

// Writes the rule back in canonical form (keys in a fixed order), NUL
// terminated; returns the length, or 0 when it does not fit.
size_t format_rule(const Rule &rule, char *buf, size_t cap);

// The length of s[0, n) without a GCC clone suffix (".constprop.0",
// ".isra.0", ".part.0", ".cold", ".lto_priv.0", several in a row; demangled,
// " (.constprop.0)" or " [clone .isra.0]"): a clone's symbol is its
// function's name with one, and a rule naming either means the function.
size_t without_clone_suffix(const char *s, size_t n);

// The name a rule's function key is compared by: the "::"-separated scopes of
// `function` without template arguments, parameters or return type, e.g.
// "ns::Tree::alloc_node" from "ns::Tree<int>::alloc_node(int) const".
// Returns its length, 0 when it does not fit.
size_t normalize_function(const char *function, char *buf, size_t cap);

// True when a symbol's name, mangled (Itanium C++ ABI) or plain (C), names
// the normalized function `want`: its scopes end with want's scopes, so
// "alloc_node" matches "ns::Tree<int>::alloc_node" and "Tree::alloc_node"
// does too.
bool symbol_matches(const char *symbol, const char *want);

// Same for a demangled name as the symbolizer prints it.
bool demangled_matches(const char *demangled, const char *want);

// Where the name proper of a demangled function starts: after the return
// type function templates carry ("std::unique_ptr<T> std::make_unique<T>()").
size_t function_name_offset(const char *demangled);

// How a rule's function key names functions, on demangled names: by scopes
// (demangled_matches on the normalized key) when the key has no template
// arguments or parameter list; otherwise those must match too, so
// "Tree<int>::new_node" names Tree<int>'s new_node but not Tree<long>'s, and
// "make(int)" one overload of make.
bool function_key_matches(const char *demangled, const char *key);

// The action carries out something (pool, pad, align or huge pages).
inline bool has_action(const Rule &r) { return r.pool[0] || r.pad || r.align || r.huge_pages; }

// Whether every allocation `later` matches is matched by `first` too, by
// their keys as written: a rule after `first` in a set never routes
// anything then (the first rule that matches an allocation routes it).
bool rule_covers(const Rule &first, const Rule &later);
// The first rule of `set` before rule `i` that covers it, or `i`.
unsigned first_covering_rule(const RuleSet &set, unsigned i);

} // namespace memlayout::rules
