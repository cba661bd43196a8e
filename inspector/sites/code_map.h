// What one module's debug information says about its code, read without
// running it: every function with the scopes its code lies in (an out-of-line
// body, or a copy inlined into another function), the calls each scope makes,
// and whether a function returns untyped memory. Allocation sites are decided
// from this (alloc_site.h): which frames are wrappers, and which address
// ranges of a running program belong to which site (route_table.h).
//
// Names are the symbolizer's: demangled linkage names ("ns::Tree<int>::
// new_node(int)"), or plain names for C. A module without DWARF has only its
// symbol table: each function symbol is one scope with no calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace llvm {
class DWARFDie;
}

namespace memlayout::inspector {

enum class Tri : uint8_t { kUnknown, kNo, kYes };

// The function a DWARF subprogram or inlined-subroutine DIE is an instance
// of: its demangled linkage name, or, where GCC gives none (members of a
// class templated on a lambda or a local class, many inlined libstdc++
// members), its short name with the scopes that enclose its declaration.
// What the code maps and the symbolizer both call a function.
std::string dwarf_function_name(llvm::DWARFDie die);

// The GNU build-id note of an ELF file (raw bytes), or "" when it has none or
// cannot be read.
std::string elf_build_id(const std::string &path);

class ModuleCode {
public:
  struct Function {
    std::string name;
    // Returns void*, char*, unsigned char*, std::byte* or a typedef of one:
    // memory whose type the caller decides. kUnknown without debug info.
    Tri returns_untyped = Tri::kUnknown;
  };
  struct Range {
    uint64_t lo, hi; // module offsets (link-time addresses), [lo, hi)
  };
  // A body of a function: its out-of-line copy (parent == kNoScope) or a copy
  // inlined into the scope `parent`.
  struct Scope {
    uint32_t function;
    uint32_t parent;
    uint32_t depth; // 0 for out-of-line bodies
    std::vector<Range> ranges;
  };
  // A call the compiler recorded (DW_TAG_call_site), from code of `scope`.
  struct Call {
    uint32_t scope;
    uint32_t callee; // a function index
    bool tail;
    // The call's return address (DW_AT_call_return_pc, or DW_AT_low_pc of a
    // DWARF 4 GNU call site): what a stack frame holds; 0 when not recorded.
    uint64_t return_pc = 0;
  };
  static constexpr uint32_t kNoScope = UINT32_MAX;

  // Reads `path`, or the separate debug file its build-id names under one of
  // `debug_dirs` when the module itself has no .debug_info. Null with *error
  // when the file cannot be read as ELF.
  static std::unique_ptr<ModuleCode>
  load(const std::string &path, const std::vector<std::string> &debug_dirs, std::string *error);

  const std::vector<Function> &functions() const { return functions_; }
  const std::vector<Scope> &scopes() const { return scopes_; }
  const std::vector<Call> &calls() const { return calls_; }
  bool has_dwarf() const { return has_dwarf_; }
  const std::string &path() const { return path_; }

  // The function of that name, or nullptr.
  const Function *function(const std::string &name) const;
  // Its index, or UINT32_MAX.
  uint32_t function_index(const std::string &name) const;

  // The call whose return address is `return_pc` (a module offset), or
  // nullptr: which function a stack frame's call went to. Binary search.
  const Call *call_returning_to(uint64_t return_pc) const;
  // Whether the module holds code of function `f` (a body or inlined copy),
  // not only calls to it.
  bool has_code(uint32_t f) const { return f < has_code_.size() && has_code_[f]; }
  // A tail call that function `f` makes from its body or a copy inlined
  // there: one to allocator plumbing when it has one, else the first; nullptr
  // when none is recorded.
  const Call *tail_call(uint32_t f) const;

  // Executable code (the module's SHF_EXECINSTR sections) at which the
  // symbolizer names no function: a frame there is unresolved ("??"), and
  // alloc_site() keeps it pending until a wrapper above clears it. What the
  // symbolizer (LLVM's, with the symbol table) names is read as it reads it:
  // a DWARF subprogram with a name, or a symbol of the module file's .symtab
  // (its .dynsym when it has none; functions, data and untyped symbols): one
  // with a size covers [value, value + size) up to the next symbol, one with
  // none everything up to the next symbol. Sorted, disjoint; empty for a
  // module built by hand.
  const std::vector<Range> &unnamed_code() const { return unnamed_; }

  // For tests and builders: adds a function (deduplicated by name) / a scope.
  uint32_t add_function(const std::string &name, Tri returns_untyped);
  uint32_t add_scope(uint32_t function, uint32_t parent, std::vector<Range> ranges);
  void add_call(uint32_t scope, uint32_t callee, bool tail, uint64_t return_pc = 0);
  void add_unnamed_code(Range r); // kept sorted and disjoint by the caller

private:
  friend struct ModuleCodeReader;
  std::string path_;
  bool has_dwarf_ = false;
  std::vector<Function> functions_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<Scope> scopes_;
  std::vector<Call> calls_;
  // Indices into calls_ of those with a return address, by return address.
  std::vector<uint32_t> by_return_;
  std::vector<char> has_code_;      // per function
  std::vector<uint32_t> tail_call_; // per function: index into calls_, or UINT32_MAX
  std::vector<Range> unnamed_;
  void index_calls(); // by_return_ and tail_call_ from calls_
};

} // namespace memlayout::inspector
