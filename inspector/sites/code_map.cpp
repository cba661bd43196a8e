#include "code_map.h"

#include "cxx_names.h"
#include "route_table_format.h"
#include "rules.h"
#include "symbolizer.h"
#include "trace_records.h"

#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/DWARF/DWARFDie.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/CRC.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <map>
#include <unistd.h>

namespace memlayout::inspector {

namespace {

std::string build_id_of(const llvm::object::ObjectFile &obj) {
  const auto *elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(&obj);
  if (!elf)
    return {};
  const auto &file = elf->getELFFile();
  auto phdrs = file.program_headers();
  if (!phdrs) {
    llvm::consumeError(phdrs.takeError());
    return {};
  }
  for (const auto &ph : *phdrs) {
    if (ph.p_type != llvm::ELF::PT_NOTE)
      continue;
    llvm::Error err = llvm::Error::success();
    for (const auto &note : file.notes(ph, err))
      if (note.getType() == llvm::ELF::NT_GNU_BUILD_ID && note.getName() == "GNU") {
        auto desc = note.getDesc();
        llvm::consumeError(std::move(err));
        return std::string(reinterpret_cast<const char *>(desc.data()), desc.size());
      }
    llvm::consumeError(std::move(err));
  }
  return {};
}

bool has_section(const llvm::object::ObjectFile &obj, llvm::StringRef name) {
  for (const auto &s : obj.sections()) {
    auto n = s.getName();
    if (n && *n == name)
      return true;
    if (!n)
      llvm::consumeError(n.takeError());
  }
  return false;
}

// The file a module's .gnu_debuglink names (`objcopy --add-gnu-debuglink`,
// for debug info kept apart without a build-id), where GDB and
// llvm-symbolizer look for it: beside the module, in its .debug directory,
// under each debug directory at the module's own directory; the first whose
// CRC is the link's. "" when there is no link or no such file.
std::string debuglink_target(const llvm::object::ObjectFile &obj, const std::string &path,
                             const std::vector<std::string> &debug_dirs) {
  llvm::StringRef link;
  for (const auto &s : obj.sections()) {
    auto n = s.getName();
    if (!n) {
      llvm::consumeError(n.takeError());
      continue;
    }
    if (*n != ".gnu_debuglink")
      continue;
    auto c = s.getContents();
    if (!c) {
      llvm::consumeError(c.takeError());
      return {};
    }
    link = *c;
    break;
  }
  // The name, NUL-terminated and padded to 4 bytes, then its file's CRC-32.
  size_t end = link.find('\0');
  if (end == llvm::StringRef::npos || end == 0)
    return {};
  size_t crc_at = (end + 4) & ~size_t{3};
  if (link.size() < crc_at + 4)
    return {};
  const auto *b = reinterpret_cast<const uint8_t *>(link.data() + crc_at);
  const uint32_t crc = b[0] | b[1] << 8 | b[2] << 16 | uint32_t{b[3]} << 24;
  const std::string name = link.substr(0, end).str();
  const std::string dir = llvm::sys::path::parent_path(path).str();
  std::vector<std::string> candidates = {dir + "/" + name, dir + "/.debug/" + name};
  for (const std::string &d : debug_dirs)
    candidates.push_back(d + (dir.empty() || dir[0] != '/' ? "/" : "") + dir + "/" + name);
  for (const std::string &c : candidates) {
    if (c == path || access(c.c_str(), R_OK) != 0)
      continue;
    auto text = llvm::MemoryBuffer::getFile(c, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (text && llvm::crc32(llvm::arrayRefFromStringRef((*text)->getBuffer())) == crc)
      return c;
  }
  return {};
}

// The DIE that carries `attr` for `die`: itself, or what its abstract origin
// or specification chain leads to (inlined copies and out-of-line
// definitions of declared members keep their type there).
llvm::DWARFDie with_attribute(llvm::DWARFDie die, llvm::dwarf::Attribute attr) {
  for (int hops = 0; die && hops < 8; ++hops) {
    if (die.find(attr))
      return die;
    llvm::DWARFDie next = die.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_abstract_origin);
    if (!next)
      next = die.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_specification);
    die = next;
  }
  return {};
}

llvm::DWARFDie strip_qualifiers(llvm::DWARFDie t) {
  for (int hops = 0; t && hops < 16; ++hops) {
    switch (t.getTag()) {
    case llvm::dwarf::DW_TAG_typedef:
    case llvm::dwarf::DW_TAG_const_type:
    case llvm::dwarf::DW_TAG_volatile_type:
    case llvm::dwarf::DW_TAG_restrict_type:
    case llvm::dwarf::DW_TAG_atomic_type:
      t = t.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_type);
      continue;
    default:
      return t;
    }
  }
  return t;
}

// Whether a subprogram returns memory of no particular type.
Tri returns_untyped(llvm::DWARFDie fn) {
  llvm::DWARFDie holder = with_attribute(fn, llvm::dwarf::DW_AT_type);
  if (!holder)
    return Tri::kNo; // void
  llvm::DWARFDie t =
      strip_qualifiers(holder.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_type));
  if (!t || t.getTag() != llvm::dwarf::DW_TAG_pointer_type)
    return Tri::kNo;
  if (!t.find(llvm::dwarf::DW_AT_type))
    return Tri::kYes; // void *
  llvm::DWARFDie base =
      strip_qualifiers(t.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_type));
  if (!base)
    return Tri::kYes; // a pointer to an unnamed (void) type
  if (base.getTag() == llvm::dwarf::DW_TAG_base_type) {
    auto enc = llvm::dwarf::toUnsigned(base.find(llvm::dwarf::DW_AT_encoding));
    auto size = llvm::dwarf::toUnsigned(base.find(llvm::dwarf::DW_AT_byte_size));
    if (enc && size && *size == 1 &&
        (*enc == llvm::dwarf::DW_ATE_signed_char || *enc == llvm::dwarf::DW_ATE_unsigned_char))
      return Tri::kYes;
    return Tri::kNo;
  }
  if (base.getTag() == llvm::dwarf::DW_TAG_enumeration_type) {
    const char *name = base.getShortName();
    if (name && std::string_view(name) == "byte")
      return Tri::kYes; // std::byte
  }
  return Tri::kNo;
}

// The DIE that declares a function: through its abstract origin (an
// inlined or out-of-line instance) and its specification (a definition
// outside its class), to the one inside its scopes.
llvm::DWARFDie declaring_die(llvm::DWARFDie die) {
  for (int hops = 0; die && hops < 8; ++hops) {
    llvm::DWARFDie next = die.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_abstract_origin);
    if (!next)
      next = die.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_specification);
    if (!next)
      break;
    die = next;
  }
  return die;
}

std::string qualified_from_scopes(llvm::DWARFDie die, const char *name);

// A lambda's closure type as GCC describes it: unnamed, with a constructor
// named "<lambda>" (or at least an operator()).
bool is_closure_type(llvm::DWARFDie t) {
  auto tag = t.getTag();
  if ((tag != llvm::dwarf::DW_TAG_structure_type && tag != llvm::dwarf::DW_TAG_class_type) ||
      t.getShortName())
    return false;
  for (llvm::DWARFDie c : t.children())
    if (c.getTag() == llvm::dwarf::DW_TAG_subprogram)
      if (const char *n = c.getShortName();
          n && (std::string_view(n) == "<lambda>" || std::string_view(n) == "operator()"))
        return true;
  return false;
}

// A base type as the demangler spells it ("long", not DWARF's "long int").
std::string demangler_base_name(std::string_view dwarf) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"long int", "long"},           {"long unsigned int", "unsigned long"},
      {"short int", "short"},         {"short unsigned int", "unsigned short"},
      {"long long int", "long long"}, {"long long unsigned int", "unsigned long long"},
      {"__int128", "__int128"},       {"__int128 unsigned", "unsigned __int128"}};
  for (const auto &[from, to] : kNames)
    if (dwarf == from)
      return std::string(to);
  return std::string(dwarf);
}

// A parameter's type as the demangler spells it: GCC's lambda names carry
// them (main::{lambda(char const*, unsigned long)#1}). Typedefs resolved,
// qualifiers after what they qualify.
std::string demangled_type_name(llvm::DWARFDie t, int depth = 0) {
  if (!t)
    return "void";
  if (depth > 16)
    return "?";
  llvm::DWARFDie inner = t.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_type);
  switch (t.getTag()) {
  case llvm::dwarf::DW_TAG_base_type:
    return demangler_base_name(t.getShortName() ? t.getShortName() : "?");
  case llvm::dwarf::DW_TAG_typedef:
    return demangled_type_name(inner, depth + 1);
  case llvm::dwarf::DW_TAG_const_type:
    return demangled_type_name(inner, depth + 1) + " const";
  case llvm::dwarf::DW_TAG_volatile_type:
    return demangled_type_name(inner, depth + 1) + " volatile";
  case llvm::dwarf::DW_TAG_pointer_type:
    return demangled_type_name(inner, depth + 1) + "*";
  case llvm::dwarf::DW_TAG_reference_type:
    return demangled_type_name(inner, depth + 1) + "&";
  case llvm::dwarf::DW_TAG_rvalue_reference_type:
    return demangled_type_name(inner, depth + 1) + "&&";
  case llvm::dwarf::DW_TAG_structure_type:
  case llvm::dwarf::DW_TAG_class_type:
  case llvm::dwarf::DW_TAG_union_type:
  case llvm::dwarf::DW_TAG_enumeration_type:
    if (const char *n = t.getShortName())
      return qualified_from_scopes(t, n);
    return "{unnamed type}";
  default:
    return "?";
  }
}

// GCC's name for a closure type: {lambda(PARAMETERS)#N}, N its place among
// the closures of its function (or namespace), in order, nested blocks
// included. The demangler gives inlined lambdas' out-of-line copies that
// name, and rules spell it so (docs/segregation.md).
std::string closure_name(llvm::DWARFDie closure) {
  std::string params;
  for (llvm::DWARFDie c : closure.children()) {
    const char *n = c.getTag() == llvm::dwarf::DW_TAG_subprogram ? c.getShortName() : nullptr;
    if (!n || std::string_view(n) != "operator()")
      continue;
    for (llvm::DWARFDie a : c.children())
      if (a.getTag() == llvm::dwarf::DW_TAG_formal_parameter &&
          !llvm::dwarf::toUnsigned(a.find(llvm::dwarf::DW_AT_artificial), 0))
        params += (params.empty() ? "" : ", ") +
                  demangled_type_name(a.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_type));
    break;
  }
  llvm::DWARFDie context = closure.getParent();
  while (context && context.getTag() == llvm::dwarf::DW_TAG_lexical_block)
    context = context.getParent();
  unsigned number = 0;
  bool found = false;
  // Depth first through the context's blocks, not into nested functions or
  // other closures (their lambdas are numbered in their own scope).
  auto walk = [&](auto &&self, llvm::DWARFDie scope) -> void {
    for (llvm::DWARFDie c : scope.children()) {
      if (found)
        return;
      if (is_closure_type(c)) {
        ++number;
        found = c == closure;
      } else if (c.getTag() == llvm::dwarf::DW_TAG_lexical_block) {
        self(self, c);
      }
    }
  };
  if (context)
    walk(walk, context);
  return "{lambda(" + params + ")#" + std::to_string(found ? number : 1) + "}";
}

// "ns::Class<Args>::name" from the scopes that enclose the declaration.
std::string qualified_from_scopes(llvm::DWARFDie die, const char *name) {
  std::string qualified = name;
  for (llvm::DWARFDie p = declaring_die(die).getParent(); p; p = p.getParent()) {
    switch (p.getTag()) {
    case llvm::dwarf::DW_TAG_namespace:
    case llvm::dwarf::DW_TAG_class_type:
    case llvm::dwarf::DW_TAG_structure_type:
    case llvm::dwarf::DW_TAG_union_type: {
      const char *scope = p.getShortName();
      std::string named = scope                                         ? std::string(scope)
                          : p.getTag() == llvm::dwarf::DW_TAG_namespace ? "(anonymous namespace)"
                          : is_closure_type(p)                          ? closure_name(p)
                                                                        : "{unnamed type}";
      qualified = named + "::" + qualified;
      break;
    }
    case llvm::dwarf::DW_TAG_lexical_block: // a local class or lambda in a nested block
      break;
    case llvm::dwarf::DW_TAG_subprogram: // a member of a local class
      return dwarf_function_name(p) + "::" + qualified;
    default:
      return qualified;
    }
  }
  return qualified;
}

// Where the symbolizer names code from the symbol table (routes::
// symbol_extents says how; `llvm-symbolizer --obj=LIB ADDR` shows it).
std::vector<ModuleCode::Range> symbol_coverage(const llvm::object::ObjectFile &obj) {
  const auto *elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(&obj);
  if (!elf)
    return {};
  auto syms = elf->symbols();
  if (syms.begin() == syms.end())
    syms = elf->getDynamicSymbolIterators();
  std::vector<routes::SymbolExtent> found; // {addr, size}, then what each names
  for (const llvm::object::ELFSymbolRef &s : syms) {
    auto sec = s.getSection();
    if (!sec) {
      llvm::consumeError(sec.takeError());
      continue;
    }
    if (*sec == obj.section_end())
      continue;
    uint8_t type = s.getELFType();
    if (type != llvm::ELF::STT_NOTYPE && type != llvm::ELF::STT_FUNC &&
        type != llvm::ELF::STT_OBJECT && type != llvm::ELF::STT_GNU_IFUNC)
      continue;
    auto flags = s.getFlags();
    if (!flags) {
      llvm::consumeError(flags.takeError());
      continue;
    }
    if (*flags & llvm::object::SymbolRef::SF_FormatSpecific)
      continue;
    auto addr = s.getAddress();
    if (!addr) {
      llvm::consumeError(addr.takeError());
      continue;
    }
    found.push_back({*addr, s.getSize()});
  }
  found.resize(routes::symbol_extents(found.data(), found.size()));
  std::vector<ModuleCode::Range> out;
  for (const routes::SymbolExtent &e : found)
    out.push_back({e.lo, e.hi});
  return out;
}

// The module's executable sections.
std::vector<ModuleCode::Range> executable_code(const llvm::object::ObjectFile &obj) {
  std::vector<ModuleCode::Range> out;
  for (const auto &s : obj.sections()) {
    if (!s.isText() || s.isVirtual() || !s.getSize())
      continue;
    if (llvm::isa<llvm::object::ELFObjectFileBase>(&obj) &&
        !(llvm::object::ELFSectionRef(s).getFlags() & llvm::ELF::SHF_ALLOC))
      continue;
    out.push_back({s.getAddress(), s.getAddress() + s.getSize()});
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.lo < b.lo; });
  return out;
}

// `ranges` (sorted, disjoint) minus `holes` (sorted by lo, may overlap).
std::vector<ModuleCode::Range> minus(const std::vector<ModuleCode::Range> &ranges,
                                     const std::vector<ModuleCode::Range> &holes) {
  std::vector<ModuleCode::Range> joined;
  for (const auto &h : holes)
    if (!joined.empty() && h.lo <= joined.back().hi)
      joined.back().hi = std::max(joined.back().hi, h.hi);
    else
      joined.push_back(h);
  std::vector<ModuleCode::Range> out;
  size_t j = 0;
  for (const auto &r : ranges) {
    uint64_t at = r.lo;
    while (j < joined.size() && joined[j].hi <= at)
      ++j;
    for (size_t k = j; k < joined.size() && joined[k].lo < r.hi; ++k) {
      if (joined[k].lo > at)
        out.push_back({at, joined[k].lo});
      at = std::max(at, joined[k].hi);
    }
    if (at < r.hi)
      out.push_back({at, r.hi});
  }
  return out;
}

} // namespace

std::string dwarf_function_name(llvm::DWARFDie die) {
  if (const char *linkage =
          llvm::dwarf::toString(die.findRecursively({llvm::dwarf::DW_AT_linkage_name,
                                                     llvm::dwarf::DW_AT_MIPS_linkage_name}),
                                nullptr))
    return demangle(linkage);
  // No linkage name: GCC leaves it out for the members of a class whose
  // template arguments name a lambda or a local class. The short name
  // alone would lose the scopes that rules match and reports print.
  const char *name = die.getSubroutineName(llvm::DINameKind::ShortName);
  if (!name)
    return {};
  return qualified_from_scopes(die, name);
}

std::string elf_build_id(const std::string &path) {
  auto bin = llvm::object::ObjectFile::createObjectFile(path);
  if (!bin) {
    llvm::consumeError(bin.takeError());
    return {};
  }
  return build_id_of(*bin->getBinary());
}

// Calls visit(address, size, name) for each named function symbol of an
// ELF file's symbol table and dynamic symbol table.
template <class Visit>
void for_each_function_symbol(const llvm::object::ObjectFile &obj, Visit visit) {
  const auto *elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(&obj);
  if (!elf)
    return;
  auto one = [&](const llvm::object::ELFSymbolRef &s) {
    auto type = s.getType();
    auto name = s.getName();
    auto addr = s.getAddress();
    if (type && name && addr && *type == llvm::object::SymbolRef::ST_Function && !name->empty())
      visit(*addr, s.getSize(), *name);
    if (!type)
      llvm::consumeError(type.takeError());
    if (!name)
      llvm::consumeError(name.takeError());
    if (!addr)
      llvm::consumeError(addr.takeError());
  };
  for (const auto &s : elf->symbols())
    one(s);
  for (const auto &s : elf->getDynamicSymbolIterators())
    one(s);
}

// The module file's function symbols by address, mangled as they are: what
// the symbolizer names a body's outermost frame by (LLVMSymbolizer's
// UseSymbolTable).
std::multimap<uint64_t, std::string> function_symbols(const llvm::object::ObjectFile &obj) {
  std::multimap<uint64_t, std::string> out;
  for_each_function_symbol(
      obj, [&](uint64_t addr, uint64_t, llvm::StringRef name) { out.emplace(addr, name.str()); });
  return out;
}

struct ModuleCodeReader {
  ModuleCode &out;
  llvm::DWARFContext &ctx;
  // DIE offset -> function index, so a function's name is read once.
  std::unordered_map<uint64_t, uint32_t> die_function;
  std::vector<ModuleCode::Range> covered;       // out-of-line DWARF bodies
  std::multimap<uint64_t, std::string> symbols; // function_symbols() of the module file

  // A body whose DWARF has no linkage name (GCC leaves it out for static
  // C++ functions, and for members of classes with lambda arguments) by
  // the symbol at its entry, as the symbolizer names its frames: the
  // parameter list then is there (`by_ptr(S*, int)`), which rules may name.
  uint32_t named_by_symbol(llvm::DWARFDie die, const std::vector<ModuleCode::Range> &ranges,
                           uint32_t f) {
    if (die.findRecursively(
            {llvm::dwarf::DW_AT_linkage_name, llvm::dwarf::DW_AT_MIPS_linkage_name}))
      return f;
    uint64_t entry =
        llvm::dwarf::toAddress(die.find(llvm::dwarf::DW_AT_low_pc)).getValueOr(ranges.front().lo);
    const std::string dwarf = out.functions_[f].name;
    auto [from, to] = symbols.equal_range(entry);
    for (auto it = from; it != to; ++it) {
      if (it->second.rfind("_Z", 0) != 0)
        continue; // C: the symbol is DWARF's name, or a clone's (`f.constprop.0`)
      std::string named = demangle(it->second);
      if (named != dwarf && rules::function_key_matches(named.c_str(), dwarf.c_str()))
        return out.add_function(named, out.functions_[f].returns_untyped);
    }
    return f;
  }

  uint32_t function_of(llvm::DWARFDie die) {
    auto it = die_function.find(die.getOffset());
    if (it != die_function.end())
      return it->second;
    std::string name = dwarf_function_name(die);
    uint32_t f = name.empty() ? UINT32_MAX : out.add_function(name, Tri::kUnknown);
    if (f != UINT32_MAX && out.functions_[f].returns_untyped == Tri::kUnknown)
      out.functions_[f].returns_untyped = returns_untyped(die);
    die_function.emplace(die.getOffset(), f);
    return f;
  }

  static std::vector<ModuleCode::Range> ranges_of(llvm::DWARFDie die) {
    std::vector<ModuleCode::Range> r;
    auto ranges = die.getAddressRanges();
    if (!ranges) {
      llvm::consumeError(ranges.takeError());
      return r;
    }
    for (const auto &a : *ranges)
      if (a.HighPC > a.LowPC)
        r.push_back({a.LowPC, a.HighPC});
    return r;
  }

  void call_site(llvm::DWARFDie die, uint32_t scope) {
    llvm::DWARFDie callee = die.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_call_origin);
    if (!callee)
      callee = die.getAttributeValueAsReferencedDie(llvm::dwarf::DW_AT_abstract_origin);
    if (!callee)
      return; // an indirect call
    uint32_t f = function_of(callee);
    if (f == UINT32_MAX)
      return;
    bool tail = die.find(llvm::dwarf::DW_AT_call_tail_call).hasValue() ||
                die.find(llvm::dwarf::DW_AT_GNU_tail_call).hasValue();
    // DWARF 5 names the return address; GCC's DWARF 4 extension gives it as
    // the call site's low_pc.
    uint64_t return_pc =
        llvm::dwarf::toAddress(die.find(llvm::dwarf::DW_AT_call_return_pc)).getValueOr(0);
    if (!return_pc && die.getTag() == llvm::dwarf::DW_TAG_GNU_call_site)
      return_pc = llvm::dwarf::toAddress(die.find(llvm::dwarf::DW_AT_low_pc)).getValueOr(0);
    out.calls_.push_back({scope, f, tail, return_pc});
  }

  // Walks the children of `die`, whose code belongs to `scope`.
  void walk(llvm::DWARFDie die, uint32_t scope, uint32_t depth) {
    for (llvm::DWARFDie child : die.children()) {
      switch (child.getTag()) {
      case llvm::dwarf::DW_TAG_subprogram:
        subprogram(child);
        break;
      case llvm::dwarf::DW_TAG_inlined_subroutine: {
        uint32_t f = function_of(child);
        auto ranges = ranges_of(child);
        if (f == UINT32_MAX || ranges.empty() || scope == ModuleCode::kNoScope) {
          walk(child, scope, depth);
          break;
        }
        uint32_t s = out.add_scope(f, scope, std::move(ranges));
        out.scopes_[s].depth = depth + 1;
        walk(child, s, depth + 1);
        break;
      }
      case llvm::dwarf::DW_TAG_call_site:
      case llvm::dwarf::DW_TAG_GNU_call_site:
        if (scope != ModuleCode::kNoScope)
          call_site(child, scope);
        break;
      case llvm::dwarf::DW_TAG_lexical_block:
      case llvm::dwarf::DW_TAG_namespace:
      case llvm::dwarf::DW_TAG_class_type:
      case llvm::dwarf::DW_TAG_structure_type:
      case llvm::dwarf::DW_TAG_union_type:
        walk(child, scope, depth);
        break;
      default:
        break;
      }
    }
  }

  void subprogram(llvm::DWARFDie die) {
    auto ranges = ranges_of(die);
    if (ranges.empty()) {
      walk(die, ModuleCode::kNoScope, 0); // a declaration: local classes may hold bodies
      return;
    }
    uint32_t f = function_of(die);
    if (f == UINT32_MAX) {
      walk(die, ModuleCode::kNoScope, 0);
      return;
    }
    f = named_by_symbol(die, ranges, f);
    covered.insert(covered.end(), ranges.begin(), ranges.end());
    uint32_t s = out.add_scope(f, ModuleCode::kNoScope, std::move(ranges));
    walk(die, s, 0);
  }

  void read_dwarf() {
    for (const auto &cu : ctx.compile_units()) {
      llvm::DWARFDie unit = cu->getUnitDIE(false);
      if (unit)
        walk(unit, ModuleCode::kNoScope, 0);
    }
  }

  // Function symbols whose code no DWARF body covers (assembly, objects
  // built without -g, a module with no debug info at all).
  void read_symbols(const llvm::object::ObjectFile &obj) {
    std::sort(covered.begin(), covered.end(),
              [](const auto &a, const auto &b) { return a.lo < b.lo; });
    auto is_covered = [&](uint64_t a) {
      auto it = std::upper_bound(covered.begin(), covered.end(), a,
                                 [](uint64_t v, const ModuleCode::Range &r) { return v < r.lo; });
      return it != covered.begin() && a < std::prev(it)->hi;
    };
    std::vector<std::pair<uint64_t, uint64_t>> seen;
    for_each_function_symbol(obj, [&](uint64_t addr, uint64_t size, llvm::StringRef name) {
      if (size == 0 || is_covered(addr))
        return;
      std::pair<uint64_t, uint64_t> key{addr, size};
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        return;
      seen.push_back(key);
      uint32_t f = out.add_function(demangle(name.str()), Tri::kUnknown);
      out.add_scope(f, ModuleCode::kNoScope, {{addr, addr + size}});
    });
  }
};

std::unique_ptr<ModuleCode> ModuleCode::load(const std::string &path,
                                             const std::vector<std::string> &debug_dirs,
                                             std::string *error) {
  auto bin = llvm::object::ObjectFile::createObjectFile(path);
  if (!bin) {
    if (error)
      *error = path + ": " + llvm::toString(bin.takeError());
    return nullptr;
  }
  const llvm::object::ObjectFile *obj = bin->getBinary();
  llvm::object::OwningBinary<llvm::object::ObjectFile> debug;
  if (!has_section(*obj, ".debug_info")) {
    std::string id = hex_bytes(build_id_of(*obj));
    for (const auto &dir : debug_dirs) {
      if (id.size() < 4)
        break;
      std::string p = dir + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
      if (access(p.c_str(), R_OK) != 0)
        continue;
      auto d = llvm::object::ObjectFile::createObjectFile(p);
      if (!d) {
        llvm::consumeError(d.takeError());
        continue;
      }
      debug = std::move(*d);
      obj = debug.getBinary();
      break;
    }
  }
  if (!has_section(*obj, ".debug_info")) {
    std::string linked = debuglink_target(*obj, path, debug_dirs);
    if (!linked.empty()) {
      auto d = llvm::object::ObjectFile::createObjectFile(linked);
      if (d) {
        debug = std::move(*d);
        obj = debug.getBinary();
      } else {
        llvm::consumeError(d.takeError());
      }
    }
  }
  auto code = std::make_unique<ModuleCode>();
  code->path_ = path;
  code->has_dwarf_ = has_section(*obj, ".debug_info");
  std::unique_ptr<llvm::DWARFContext> ctx = llvm::DWARFContext::create(
      *obj, llvm::DWARFContext::ProcessDebugRelocations::Process, nullptr, "",
      [](llvm::Error e) { llvm::consumeError(std::move(e)); },
      [](llvm::Error e) { llvm::consumeError(std::move(e)); });
  ModuleCodeReader reader{*code, *ctx, {}, {}, function_symbols(*bin->getBinary())};
  if (code->has_dwarf_)
    reader.read_dwarf();
  // What the symbolizer names: DWARF's functions, and the symbols of the
  // module file itself (not of a separate debug file).
  std::vector<Range> named = reader.covered;
  std::vector<Range> symbols = symbol_coverage(*bin->getBinary());
  named.insert(named.end(), symbols.begin(), symbols.end());
  std::sort(named.begin(), named.end(), [](const Range &a, const Range &b) { return a.lo < b.lo; });
  code->unnamed_ = minus(executable_code(*bin->getBinary()), named);
  reader.read_symbols(*obj);
  code->index_calls();
  return code;
}

void ModuleCode::index_calls() {
  by_return_.clear();
  for (uint32_t i = 0; i < calls_.size(); ++i)
    if (calls_[i].return_pc)
      by_return_.push_back(i);
  std::stable_sort(by_return_.begin(), by_return_.end(), [&](uint32_t a, uint32_t b) {
    return calls_[a].return_pc < calls_[b].return_pc;
  });
  tail_call_.assign(functions_.size(), UINT32_MAX);
  std::vector<char> plumbing(functions_.size(), 2); // 2: not judged yet
  auto is_plumbing = [&](uint32_t f) {
    if (plumbing[f] == 2)
      plumbing[f] = is_allocator_frame(functions_[f].name);
    return plumbing[f] == 1;
  };
  for (uint32_t i = 0; i < calls_.size(); ++i) {
    const Call &c = calls_[i];
    if (!c.tail || c.scope >= scopes_.size())
      continue;
    // The function whose body holds the call: the outermost scope.
    uint32_t s = c.scope;
    for (int hops = 0; scopes_[s].parent != kNoScope && hops < 256; ++hops)
      s = scopes_[s].parent;
    uint32_t &best = tail_call_[scopes_[s].function];
    if (best == UINT32_MAX || (!is_plumbing(calls_[best].callee) && is_plumbing(c.callee)))
      best = i;
  }
}

const ModuleCode::Function *ModuleCode::function(const std::string &name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &functions_[it->second];
}

uint32_t ModuleCode::function_index(const std::string &name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? UINT32_MAX : it->second;
}

const ModuleCode::Call *ModuleCode::call_returning_to(uint64_t return_pc) const {
  auto it = std::lower_bound(by_return_.begin(), by_return_.end(), return_pc,
                             [&](uint32_t c, uint64_t pc) { return calls_[c].return_pc < pc; });
  return it != by_return_.end() && calls_[*it].return_pc == return_pc ? &calls_[*it] : nullptr;
}

void ModuleCode::add_call(uint32_t scope, uint32_t callee, bool tail, uint64_t return_pc) {
  calls_.push_back({scope, callee, tail, return_pc});
  index_calls(); // few calls: tests and builders
}

void ModuleCode::add_unnamed_code(Range r) { unnamed_.push_back(r); }

const ModuleCode::Call *ModuleCode::tail_call(uint32_t f) const {
  return f < tail_call_.size() && tail_call_[f] != UINT32_MAX ? &calls_[tail_call_[f]] : nullptr;
}

uint32_t ModuleCode::add_function(const std::string &name, Tri returns_untyped) {
  auto [it, fresh] = by_name_.emplace(name, static_cast<uint32_t>(functions_.size()));
  if (fresh) {
    functions_.push_back({name, returns_untyped});
    has_code_.push_back(0);
  } else if (functions_[it->second].returns_untyped == Tri::kUnknown)
    functions_[it->second].returns_untyped = returns_untyped;
  return it->second;
}

uint32_t ModuleCode::add_scope(uint32_t function, uint32_t parent, std::vector<Range> ranges) {
  uint32_t depth = parent == kNoScope ? 0 : scopes_[parent].depth + 1;
  scopes_.push_back({function, parent, depth, std::move(ranges)});
  if (function < has_code_.size())
    has_code_[function] = 1;
  return static_cast<uint32_t>(scopes_.size() - 1);
}

} // namespace memlayout::inspector
