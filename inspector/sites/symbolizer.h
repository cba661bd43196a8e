// Turns recorded code addresses into functions, files and lines, inline frames
// included, using the trace's module list and LLVM's symbolizer. Results are
// cached per address: a trace repeats the same few thousand return addresses
// millions of times.
#pragma once

#include "trace_records.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memlayout::inspector {

struct SourceFrame {
  std::string function; // demangled; "??" when unknown
  std::string file;     // empty when unknown
  uint32_t line = 0;
  uint32_t column = 0;
  bool inlined = false; // inlined into the next (outer) frame
};

struct SymbolizedAddress {
  uint64_t address = 0;
  const ModuleEntry *module = nullptr; // nullptr when no module maps the address
  uint64_t module_offset = 0;          // address - load_bias
  bool resolved = false;               // at least one frame has a function name
  std::vector<SourceFrame> frames;     // innermost first; never empty
};

class Symbolizer {
public:
  struct Options {
    std::vector<std::string> debug_dirs = {"/usr/lib/debug"}; // searched by build-id
    // Used for modules recorded without a path (the main program, as
    // dl_iterate_phdr reports it).
    std::string main_executable;
  };

  explicit Symbolizer(std::vector<ModuleEntry> modules, Options opts);
  explicit Symbolizer(std::vector<ModuleEntry> modules)
      : Symbolizer(std::move(modules), Options{}) {}
  ~Symbolizer();
  Symbolizer(const Symbolizer &) = delete;
  Symbolizer &operator=(const Symbolizer &) = delete;

  // Stack frames are return addresses: looking up pc - 1 names the call's
  // line rather than the one after it. Pass false for an exact code address.
  // The reference stays valid for the Symbolizer's lifetime.
  const SymbolizedAddress &symbolize(uint64_t pc, bool return_address = true);

  // The latest-loaded module with a segment containing the address.
  const ModuleEntry *find_module(uint64_t address) const;
  // The trace's module records, in order.
  const std::vector<ModuleEntry> &modules() const;

  // The file a module's code is read from (the main executable's for a
  // module recorded without a path); empty for pseudo-modules ([vdso]).
  std::string module_path(const ModuleEntry &m) const;

  // Problems met so far (each module's at most once); clears the list.
  std::vector<std::string> take_warnings();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Allocator plumbing (malloc, operator new, std::allocator, the recorder) as
// opposed to the code that asked for memory; reports name the latter.
bool is_allocator_frame(const std::string &function);
// Allocator code a call to which obtains memory: is_allocator_frame named
// for it (malloc, operator new, a pool's alloc), not what gives memory back
// (free, operator delete) or answers about it (malloc_usable_size, sallocx,
// seg_pool_of, a pool's stats), nor the rest (a dispatch's resolve).
bool is_allocation_call(const std::string &function);

} // namespace memlayout::inspector
