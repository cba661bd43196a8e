// The route table: what `memlayout run` and `record --rules` hand the
// interposer so that a rule naming a function routes exactly the allocations
// a report groups under that name (inspector/alloc_site.h), inlined copies
// and callers of wrappers included, without any debug information being read
// in the program's process.
//
// The CLI labels the code of the program and the libraries it links, from
// their DWARF (symbols where there is none): each range of code offsets
// either belongs to allocation sites that rules name (a rule mask), is
// wrapper/plumbing code whose allocations are decided by the caller's frame
// (kSkipFrame), or is code that no function name covers (kUnnamedCode: a
// static function of a stripped library, which reports show as "??"). Code
// in no range is a named site no rule names. Modules loaded later that the
// table does not list are matched by their symbol tables.
//
// Unnamed frames follow alloc_site()'s rule: one is pending until a wrapper
// frame above it (kSkipFrame) clears it; if a named frame comes first, the
// (innermost) pending unnamed frame is the site, which only rules without a
// function key route. So `?? -> sqlite3Malloc -> ?? -> sqlite3DbMallocZero
// -> sqlite3FindFunction` is sqlite3FindFunction's allocation.
//
// File: TableHeader, then `modules` ModuleEntry, then `ranges` RangeEntry,
// then `wrappers` WrapperName (for those later modules' symbol tables). All
// little-endian, fixed-size, so the interposer can use it in place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace memlayout::routes {

inline constexpr char kMagic[8] = {'M', 'L', 'R', 'O', 'U', 'T', 'E', '\0'};
inline constexpr uint32_t kVersion = 2; // 2: kUnnamedCode, kTailCallInWrapper
inline constexpr uint32_t kMaxModules = 4096;
inline constexpr uint32_t kMaxRanges = 1u << 22;
inline constexpr uint32_t kMaxWrapperNames = 256;

struct TableHeader {
  char magic[8];
  uint32_t version;
  uint32_t modules;
  uint32_t ranges;
  uint32_t wrappers;
};
static_assert(sizeof(TableHeader) == 24);

// A module the CLI labelled, recognised by its file's device and inode.
struct ModuleEntry {
  uint64_t dev, ino;
  uint32_t first_range, range_count; // into the ranges that follow
  char path[240];                    // for messages only
};
static_assert(sizeof(ModuleEntry) == 264);

// What a module's symbols name, as LLVM's symbolizer reads them (.symtab, or
// .dynsym when there is none; defined function, data and untyped symbols):
// at each address the symbol with the largest size; one with a size names
// [addr, addr + size) up to the next symbol's address, one without
// everything up to it. Code none names is kUnnamedCode. The CLI
// (inspector/sites/code_map.cpp) and the interposer (modules loaded later)
// both decide by this. Takes symbols as {addr, size}, sorts them, and leaves
// what they name as {lo, hi} in place, sorted and disjoint; returns how many.
struct SymbolExtent {
  uint64_t lo, hi;
};
inline size_t symbol_extents(SymbolExtent *syms, size_t n) {
  std::sort(syms, syms + n, [](const SymbolExtent &a, const SymbolExtent &b) {
    return a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi;
  });
  size_t out = 0; // <= i: the next symbol is read before anything overwrites it
  for (size_t i = 0; i < n; ++i) {
    if (i + 1 < n && syms[i + 1].lo == syms[i].lo)
      continue; // the largest size at this address is the last
    uint64_t next = i + 1 < n ? syms[i + 1].lo : UINT64_MAX;
    uint64_t hi = syms[i].hi ? std::min(next, syms[i].lo + syms[i].hi) : next;
    if (hi > syms[i].lo)
      syms[out++] = {syms[i].lo, hi};
  }
  return out;
}

// RangeEntry flags.
inline constexpr uint64_t kSkipFrame = 1;   // look at the calling frame
inline constexpr uint64_t kUnnamedCode = 2; // no function name covers it: pending
// On the one-byte label of a tail-called function's return address (rules:
// that function's) in wrapper code: above a pending unnamed frame, where
// alloc_site() looks for no tail call, the frame is the wrapper's and is
// looked through.
inline constexpr uint64_t kTailCallInWrapper = 4;

// [lo, hi) in the module's link-time addresses (add the load bias), sorted by
// lo, disjoint. Lookups use return address - 1: the call, not what follows.
struct RangeEntry {
  uint64_t lo, hi;
  uint64_t rules; // bit i: rule i names the site
  uint64_t flags;
};
static_assert(sizeof(RangeEntry) == 32);

// A wrapper's name, normalized (rules::normalize_function), for modules the
// table does not list.
struct WrapperName {
  char name[248];
  uint64_t not_wrapper; // 1: a not-wrapper declaration
};
static_assert(sizeof(WrapperName) == 256);

} // namespace memlayout::routes
