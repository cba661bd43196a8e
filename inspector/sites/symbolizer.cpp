#include "symbolizer.h"

#include "code_map.h"
#include "cxx_names.h"

#include "rules.h"

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/DebugInfo/DWARF/DWARFCompileUnit.h>
#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/Symbolize/Symbolize.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

#include <string_view>
#include <unordered_map>

namespace memlayout::inspector {

namespace {

bool starts_with(const std::string &s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Whether a name has a scope of its own ("a::f"), not only inside its
// template or function arguments ("f<main()::<lambda()> >").
bool has_scope(std::string_view name) {
  int depth = 0;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    char c = name[i];
    if (c == '<' || c == '(' || c == '[')
      ++depth;
    else if ((c == '>' || c == ')' || c == ']') && depth > 0)
      --depth;
    else if (c == ':' && name[i + 1] == ':' && depth == 0)
      return true;
  }
  return false;
}

} // namespace

bool is_allocator_frame(const std::string &function) {
  // Function templates carry their return type first: judge the name.
  const std::string_view f =
      std::string_view(function).substr(rules::function_name_offset(function.c_str()));
  static constexpr std::string_view kPrefixes[] = {
      "operator new", "operator delete", "malloc", "calloc", "realloc", "reallocarray",
      "aligned_alloc", "posix_memalign", "memalign", "valloc", "pvalloc",
      // glibc's own entry points and the
      // helpers that allocate for libc's
      // callers; not __libc_start_main,
      // the outermost frame of every stack
      "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_reallocarray", "__libc_memalign",
      "__libc_valloc", "__libc_pvalloc", "__libc_free", "__libc_scratch_buffer_",
      "__libc_dynarray_", "__libc_alloc_buffer_", "std::allocator", "std::allocator_traits",
      "__gnu_cxx::new_allocator", "std::__new_allocator", "__gnu_cxx::__alloc_traits",
      "std::__allocate_guarded", "memlayout::preload::", "memlayout::seg::", "seg_malloc",
      "seg_calloc", "seg_aligned_alloc", "seg_realloc", "mlje_", "je_", "mallocx", "rallocx"};
  for (std::string_view p : kPrefixes) {
    if (f.substr(0, p.size()) != p)
      continue;
    // A whole name or a prefix ending at a scope/template/argument boundary:
    // "malloc" but not "mallocate_things".
    if (f.size() == p.size() || p.back() == '_' || p.back() == ':')
      return true;
    char next = f[p.size()];
    if (next == '(' || next == '<' || next == ' ' || next == '[')
      return true;
  }
  return false;
}

bool is_allocation_call(const std::string &function) {
  if (!is_allocator_frame(function))
    return false;
  const std::string_view f =
      std::string_view(function).substr(rules::function_name_offset(function.c_str()));
  std::string_view name = f.substr(0, f.find('('));
  for (std::string_view w : {"free", "delete", "dealloc", "dalloc", "usable_size", "sallocx",
                             "nallocx", "mallctl", "pool_of", "stats", "construct", "destroy"})
    if (name.find(w) != std::string_view::npos)
      return false;
  // What obtains says so (malloc, operator new, pool_alloc, mallocx,
  // allocate, memalign), but for libc's growing buffers; the rest of the
  // allocator's code (a dispatch's resolve, a lock) obtains nothing.
  for (std::string_view w : {"alloc", "new", "memalign", "scratch_buffer_", "dynarray_"})
    if (name.find(w) != std::string_view::npos)
      return true;
  return false;
}

struct Symbolizer::Impl {
  struct ModuleState {
    bool checked = false; // build-id compared
    bool failed = false;  // LLVM could not load it; warned once
    // The module's own DWARF, read when a frame's name lacks its scopes.
    bool dwarf_tried = false;
    llvm::object::OwningBinary<llvm::object::ObjectFile> binary;
    std::unique_ptr<llvm::DWARFContext> dwarf;
  };
  struct Key {
    uint64_t pc;
    bool ret;
    bool operator==(const Key &o) const { return pc == o.pc && ret == o.ret; }
  };
  struct KeyHash {
    size_t operator()(const Key &k) const { return std::hash<uint64_t>()(k.pc * 2 + k.ret); }
  };

  std::vector<ModuleEntry> modules;
  std::vector<ModuleState> state;
  Options opts;
  llvm::symbolize::LLVMSymbolizer llvm;
  std::unordered_map<Key, SymbolizedAddress, KeyHash> cache; // node-based: references stay valid
  std::vector<std::string> warnings;

  static llvm::symbolize::LLVMSymbolizer::Options llvm_options(const Options &o) {
    llvm::symbolize::LLVMSymbolizer::Options l;
    l.PrintFunctions = llvm::symbolize::FunctionNameKind::LinkageName;
    // Mangled, demangled by demangle() as c++filt does: LLVM's demangler
    // spells a lambda 'lambda'(long) where GCC's, the rules' and every
    // other frame's spelling is {lambda(long)#1}.
    l.Demangle = false;
    l.UseSymbolTable = true; // names without line info for code without DWARF
    l.DebugFileDirectory = o.debug_dirs;
    return l;
  }

  Impl(std::vector<ModuleEntry> m, Options o)
      : modules(std::move(m)), state(modules.size()), opts(std::move(o)), llvm(llvm_options(opts)) {
  }

  std::string path_of(const ModuleEntry &m) const {
    return m.path.empty() ? opts.main_executable : m.path;
  }

  void check_build_id(size_t i, const std::string &path) {
    if (state[i].checked)
      return;
    state[i].checked = true;
    if (modules[i].build_id.empty())
      return;
    std::string found = elf_build_id(path);
    if (!found.empty() && found != modules[i].build_id)
      warnings.push_back(path + ": build-id " + hex_bytes(found) + " differs from the trace's " +
                         hex_bytes(modules[i].build_id) +
                         "; the file changed since recording, symbols may be wrong");
  }

  // The DIEs of the inlined frames at `offset`, innermost first (as LLVM
  // orders its frames), from the module's own debug information; empty when
  // that is elsewhere (a debuglink) or unreadable.
  void inlined_chain(size_t i, const std::string &path, uint64_t offset,
                     llvm::SmallVectorImpl<llvm::DWARFDie> &chain) {
    ModuleState &st = state[i];
    if (!st.dwarf_tried) {
      st.dwarf_tried = true;
      auto bin = llvm::object::ObjectFile::createObjectFile(path);
      if (!bin) {
        llvm::consumeError(bin.takeError());
        return;
      }
      st.binary = std::move(*bin);
      st.dwarf = llvm::DWARFContext::create(*st.binary.getBinary());
    }
    if (!st.dwarf)
      return;
    llvm::DWARFCompileUnit *cu = st.dwarf->getCompileUnitForAddress(offset);
    if (cu)
      cu->getInlinedChainForAddress(offset, chain);
  }

  void lookup(SymbolizedAddress &out, bool ret) {
    SourceFrame unknown{"??", "", 0, 0, false};
    const ModuleEntry *m = out.module;
    if (!m) {
      out.frames.push_back(unknown);
      return;
    }
    size_t i = static_cast<size_t>(m - modules.data());
    std::string path = path_of(*m);
    // Pseudo-modules ([vdso], linux-vdso.so.1) have no file to read.
    if (path.empty() || path[0] == '[' || starts_with(path, "linux-vdso") || state[i].failed) {
      out.frames.push_back(unknown);
      return;
    }
    check_build_id(i, path);
    uint64_t offset = out.module_offset - (ret && out.module_offset > 0 ? 1 : 0);
    auto info =
        llvm.symbolizeInlinedCode(path, {offset, llvm::object::SectionedAddress::UndefSection});
    if (!info) {
      state[i].failed = true;
      warnings.push_back(path + ": cannot symbolize: " + llvm::toString(info.takeError()));
      out.frames.push_back(unknown);
      return;
    }
    uint32_t n = info->getNumberOfFrames();
    llvm::SmallVector<llvm::DWARFDie, 4> chain; // the frames' DIEs, when a name needs them
    bool chain_read = false;
    for (uint32_t f = 0; f < n; ++f) {
      const llvm::DILineInfo &li = info->getFrame(f);
      SourceFrame sf;
      bool has_fn = li.FunctionName != llvm::DILineInfo::BadString;
      // Mangled names demangled as c++filt does; DWARF short names as they are.
      sf.function = !has_fn ? "??"
                    : li.FunctionName.rfind("_Z", 0) == 0 || li.FunctionName.rfind("_R", 0) == 0
                        ? demangle(li.FunctionName)
                        : li.FunctionName;
      // LLVM names a DIE without a linkage name by its short name: a member
      // of std::function inlined into the caller is "_M_create<...>", which
      // the code maps (and so the rules) know as std::_Function_base::
      // _Base_manager<...>::_M_create. The scopes come from the DIE.
      if (has_fn && li.FunctionName.rfind("_Z", 0) != 0 && li.FunctionName.rfind("_R", 0) != 0 &&
          !has_scope(li.FunctionName) && !li.FileName.empty()) {
        if (!chain_read) {
          chain_read = true;
          inlined_chain(i, path, offset, chain);
        }
        if (chain.size() == n)
          if (std::string q = dwarf_function_name(chain[f]); !q.empty())
            sf.function = std::move(q);
      }
      sf.file = li.FileName != llvm::DILineInfo::BadString ? li.FileName : "";
      sf.line = li.Line;
      sf.column = li.Column;
      sf.inlined = f + 1 < n;
      out.resolved |= has_fn;
      out.frames.push_back(std::move(sf));
    }
    if (out.frames.empty())
      out.frames.push_back(unknown);
  }
};

Symbolizer::Symbolizer(std::vector<ModuleEntry> modules, Options opts)
    : impl_(std::make_unique<Impl>(std::move(modules), std::move(opts))) {}

Symbolizer::~Symbolizer() = default;

const ModuleEntry *Symbolizer::find_module(uint64_t address) const {
  const auto &mods = impl_->modules;
  // Latest first: a library unloaded and another loaded at its place must win.
  for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
    if (it->what != trace::ModuleEvent::kLoaded)
      continue;
    for (const ModuleSegment &s : it->segments) {
      uint64_t lo = it->load_bias + s.vaddr;
      if (address >= lo && address - lo < s.memsz)
        return &*it;
    }
  }
  return nullptr;
}

const std::vector<ModuleEntry> &Symbolizer::modules() const { return impl_->modules; }

const SymbolizedAddress &Symbolizer::symbolize(uint64_t pc, bool return_address) {
  auto [it, fresh] = impl_->cache.try_emplace(Impl::Key{pc, return_address});
  SymbolizedAddress &out = it->second;
  if (!fresh)
    return out;
  out.address = pc;
  out.module = find_module(pc);
  out.module_offset = out.module ? pc - out.module->load_bias : pc;
  impl_->lookup(out, return_address);
  return out;
}

std::string Symbolizer::module_path(const ModuleEntry &m) const {
  std::string path = impl_->path_of(m);
  if (path.empty() || path[0] == '[' || starts_with(path, "linux-vdso"))
    return {};
  return path;
}

std::vector<std::string> Symbolizer::take_warnings() {
  std::vector<std::string> w;
  w.swap(impl_->warnings);
  return w;
}

} // namespace memlayout::inspector
