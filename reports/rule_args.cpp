#include "rule_args.h"

#include "preload_launch.h"

#include "code_map.h"
#include "cxx_names.h"
#include "rule_match.h"
#include "type_map.h"

#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace memlayout::cli {
namespace {

void print_error(const std::string &where, const std::string &line_text,
                 const rules::ParseError &e) {
  std::fprintf(stderr, "memlayout: %s:%u:%u: %s\n", where.c_str(), e.line, e.column, e.message);
  if (line_text.empty())
    return;
  // The line around the column, as compilers show a long one: 60 bytes
  // either side at most (a 2 MB line echoed whole buries the message).
  constexpr size_t kSide = 60;
  size_t col = e.column ? e.column - 1 : 0;
  size_t from = col > kSide ? col - kSide : 0;
  size_t to = std::min(line_text.size(), col + kSide);
  std::string shown = (from ? "..." : "") + line_text.substr(from, to - from) +
                      (to < line_text.size() ? "..." : "");
  size_t caret = col - from + (from ? 3 : 0);
  std::fprintf(stderr, "  %s\n  %*s^\n", shown.c_str(), static_cast<int>(caret), "");
}

std::string nth_line(const std::string &text, uint32_t line) {
  std::istringstream in(text);
  std::string l;
  for (uint32_t i = 0; i < line && std::getline(in, l); ++i) {
  }
  return l;
}

bool append(const std::string &text, const std::string &where, bool single, LoadedRules *out) {
  rules::RuleSet parsed{};
  rules::ParseError e{};
  bool ok;
  if (single) {
    parsed.count = 1;
    ok = rules::parse_rule(text.data(), text.size(), 1, &parsed.rules[0], &e);
  } else {
    ok = rules::parse_rules(text.data(), text.size(), &parsed, &e);
  }
  if (!ok) {
    print_error(where, single ? text : nth_line(text, e.line), e);
    return false;
  }
  for (unsigned i = 0; i < parsed.wrapper_count; ++i) {
    if (out->set->wrapper_count == rules::kMaxWrappers) {
      std::fprintf(stderr, "memlayout: %s: more than %u wrapper declarations in all\n",
                   where.c_str(), rules::kMaxWrappers);
      return false;
    }
    out->set->wrappers[out->set->wrapper_count++] = parsed.wrappers[i];
  }
  for (unsigned i = 0; i < parsed.count; ++i) {
    if (out->set->count == rules::kMaxRules) {
      std::fprintf(stderr, "memlayout: %s: more than %u rules in all\n", where.c_str(),
                   rules::kMaxRules);
      return false;
    }
    out->set->rules[out->set->count++] = parsed.rules[i];
    out->origin.push_back(single ? where
                                 : where + ":" + std::to_string(parsed.rules[i].source_line));
    out->written.push_back(parsed.rules[i]);
  }
  return true;
}

// Function names defined in an ELF file, plus the libraries it needs.
void collect_functions(const std::string &path, std::set<std::string> &names,
                       std::vector<std::string> &needed, std::vector<std::string> &runpath) {
  auto bin = llvm::object::ObjectFile::createObjectFile(path);
  if (!bin) {
    llvm::consumeError(bin.takeError());
    return;
  }
  auto *elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(bin->getBinary());
  if (!elf)
    return;
  auto add = [&](const llvm::object::ELFSymbolRef &s) {
    auto type = s.getType();
    auto name = s.getName();
    if (!type || !name || *type != llvm::object::SymbolRef::ST_Function || name->empty()) {
      if (!type)
        llvm::consumeError(type.takeError());
      if (!name)
        llvm::consumeError(name.takeError());
      return;
    }
    names.insert(name->str());
  };
  for (const auto &s : elf->symbols())
    add(s);
  for (const auto &s : elf->getDynamicSymbolIterators())
    add(s);
  auto dynamic = elf->getELFFile().dynamicEntries();
  if (!dynamic) {
    llvm::consumeError(dynamic.takeError());
    return;
  }
  std::vector<uint64_t> needed_offsets, runpath_offsets;
  for (const auto &d : *dynamic) {
    if (d.getTag() == llvm::ELF::DT_NEEDED)
      needed_offsets.push_back(d.getVal());
    else if (d.getTag() == llvm::ELF::DT_RUNPATH || d.getTag() == llvm::ELF::DT_RPATH)
      runpath_offsets.push_back(d.getVal());
  }
  for (const auto &sec : elf->sections()) {
    auto sname = sec.getName();
    if (!sname || *sname != ".dynstr") {
      if (!sname)
        llvm::consumeError(sname.takeError());
      continue;
    }
    auto contents = sec.getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      break;
    }
    auto str = [&](uint64_t off) {
      return off < contents->size() ? std::string(contents->data() + off) : std::string();
    };
    std::string origin = path.substr(0, path.rfind('/'));
    for (uint64_t off : runpath_offsets) {
      std::istringstream dirs(str(off));
      std::string dir;
      while (std::getline(dirs, dir, ':')) {
        if (dir.rfind("$ORIGIN", 0) == 0)
          dir = origin + dir.substr(7);
        runpath.push_back(dir);
      }
    }
    for (uint64_t off : needed_offsets)
      needed.push_back(str(off));
    break;
  }
}

std::string find_library(const std::string &name, const std::vector<std::string> &runpath) {
  std::vector<std::string> dirs = runpath;
  if (const char *lp = std::getenv("LD_LIBRARY_PATH")) {
    std::istringstream in(lp);
    std::string d;
    while (std::getline(in, d, ':'))
      dirs.push_back(d);
  }
  for (const char *d :
       {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib", "/usr/local/lib"})
    dirs.push_back(d);
  for (const auto &d : dirs) {
    std::string p = d + "/" + name;
    if (access(p.c_str(), R_OK) == 0)
      return p;
  }
  return {};
}

// Functions (normalized names) with code at `file` (a path suffix) and, when
// line is not 0, that line, in one module.
// Whether a line table's file `index` is `file` (a path suffix at a
// component boundary, or the whole absolute path); its path in *path.
bool file_of(const llvm::DWARFDebugLine::LineTable &lt, llvm::DWARFUnit &cu, uint64_t index,
             const std::string &file, std::string &path) {
  if (!lt.getFileNameByIndex(index, cu.getCompilationDir(),
                             llvm::DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath, path))
    return false;
  if (path.size() < file.size() || path.compare(path.size() - file.size(), file.size(), file))
    return false;
  return path.size() == file.size() || file[0] == '/' || path[path.size() - file.size() - 1] == '/';
}

// The functions that call an inlined function at file:line: a line whose
// code is all inlined from elsewhere (std::make_shared's, a header's inline
// helper) has no rows of its own, or only empty ones, yet a report names the
// caller at that line when what it inlined is looked through. The caller is
// the innermost enclosing function or inlined copy, a lambda's body standing
// for the function it is part of (as in functions_at).
void functions_calling_inline_at(llvm::DWARFContext &ctx, const std::string &file, uint32_t line,
                                 std::set<std::string> &out) {
  for (const auto &cu : ctx.compile_units()) {
    const llvm::DWARFDebugLine::LineTable *lt = ctx.getLineTableForUnit(cu.get());
    if (!lt)
      continue;
    for (const auto &entry : cu->dies()) {
      llvm::DWARFDie die(cu.get(), &entry);
      if (die.getTag() != llvm::dwarf::DW_TAG_inlined_subroutine ||
          llvm::dwarf::toUnsigned(die.find(llvm::dwarf::DW_AT_call_line), 0) != line)
        continue;
      auto call_file = llvm::dwarf::toUnsigned(die.find(llvm::dwarf::DW_AT_call_file));
      std::string path;
      if (!call_file || !file_of(*lt, *cu, *call_file, file, path))
        continue;
      for (llvm::DWARFDie p = die.getParent(); p; p = p.getParent()) {
        if (p.getTag() != llvm::dwarf::DW_TAG_subprogram &&
            p.getTag() != llvm::dwarf::DW_TAG_inlined_subroutine)
          continue;
        char norm[rules::kMaxName];
        if (!rules::normalize_function(inspector::dwarf_function_name(p).c_str(), norm,
                                       sizeof norm) ||
            std::string_view(norm) == "operator" || std::strstr(norm, "lambda"))
          continue;
        out.insert(norm);
        break;
      }
    }
  }
}

void functions_at(const std::string &module, const std::string &file, uint32_t line,
                  std::set<std::string> &out) {
  auto bin = llvm::object::ObjectFile::createObjectFile(module);
  if (!bin) {
    llvm::consumeError(bin.takeError());
    return;
  }
  const llvm::object::ObjectFile &obj = *bin->getBinary();
  // Function symbols by address, to name the code a line row points at.
  std::vector<std::pair<uint64_t, std::pair<uint64_t, std::string>>> funcs;
  for (const auto &sym : obj.symbols()) {
    auto type = sym.getType();
    auto addr = sym.getAddress();
    auto name = sym.getName();
    if (!type || !addr || !name || *type != llvm::object::SymbolRef::ST_Function) {
      if (!type)
        llvm::consumeError(type.takeError());
      if (!addr)
        llvm::consumeError(addr.takeError());
      if (!name)
        llvm::consumeError(name.takeError());
      continue;
    }
    uint64_t size = llvm::object::ELFSymbolRef(sym).getSize();
    if (size)
      funcs.push_back({*addr, {*addr + size, name->str()}});
  }
  std::sort(funcs.begin(), funcs.end());
  auto ctx = llvm::DWARFContext::create(obj);
  bool found = false;
  for (const auto &cu : ctx->compile_units()) {
    const llvm::DWARFDebugLine::LineTable *lt = ctx->getLineTableForUnit(cu.get());
    if (!lt)
      continue;
    for (const auto &row : lt->Rows) {
      if (row.EndSequence || (line && row.Line != line))
        continue;
      std::string path;
      if (!file_of(*lt, *cu, row.File, file, path))
        continue;
      uint64_t a = row.Address.Address;
      // The code at that line is the innermost function there, inlined or
      // not: a static inline mk() at f.c:7 folded into main is mk's, which
      // is what the report names and the route table labels (main's own
      // allocations are not). The symbol table's function is the fallback
      // for code without inlining records.
      // The frame whose location is this row's: the innermost one, unless
      // the row is a call into an inlined function, whose first
      // instructions carry the caller's line. A lambda's body has no name a
      // rule can spell ("operator()" alone would name every operator): the
      // function it is part of then.
      std::string name;
      llvm::DIInliningInfo inlined = ctx->getInliningInfoForAddress(
          {a, llvm::object::SectionedAddress::UndefSection},
          llvm::DILineInfoSpecifier(llvm::DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath,
                                    llvm::DILineInfoSpecifier::FunctionNameKind::LinkageName));
      bool matched = false;
      for (uint32_t f = 0; f < inlined.getNumberOfFrames(); ++f) {
        const llvm::DILineInfo &fr = inlined.getFrame(f);
        if (fr.Line != row.Line || fr.FileName != path)
          continue;
        matched = true;
        char norm[rules::kMaxName];
        if (fr.FunctionName != llvm::DILineInfo::BadString &&
            rules::normalize_function(inspector::demangle(fr.FunctionName).c_str(), norm,
                                      sizeof norm) &&
            std::string_view(norm) != "operator" && !std::strstr(norm, "lambda"))
          name = fr.FunctionName;
        break;
      }
      if (!matched && inlined.getNumberOfFrames() > 0 &&
          inlined.getFrame(0).FunctionName != llvm::DILineInfo::BadString)
        // No frame of the address is at this line: a row GCC left behind
        // where an inlined call's instructions interleave with the caller's
        // (the caller's code, at its own line, holds the address).
        continue;
      if (name.empty()) {
        auto it = std::upper_bound(funcs.begin(), funcs.end(),
                                   std::make_pair(a, std::make_pair(UINT64_MAX, std::string())));
        if (it == funcs.begin())
          continue;
        --it;
        if (a >= it->second.first)
          continue;
        name = it->second.second;
      }
      char norm[rules::kMaxName];
      if (rules::normalize_function(inspector::demangle(name).c_str(), norm, sizeof norm))
        out.insert(norm);
      found = true;
    }
  }
  if (!found && line)
    functions_calling_inline_at(*ctx, file, line, out);
}

// The functions of the modules as the route table names them: their debug
// information's, inlined-only ones included (a template member inlined
// everywhere has no symbol), else their symbol tables'.
std::vector<std::string> code_functions(const std::vector<std::string> &modules) {
  std::vector<std::string> out;
  for (const auto &code : load_code(modules))
    for (const auto &f : code->functions())
      out.push_back(f.name);
  return out;
}

// The bytes an allocation of `rec` at `site` asks for, where the site's call
// fixes them: sizeof for new and make_unique; for make_shared, libstdc++'s
// control block (its reference counts on 16 bytes, then the object at its
// alignment) when the program uses libstdc++. 0 where the arguments decide
// (malloc, new[], allocate_shared's allocator) or the layout is not one.
uint64_t site_request_bytes(const inspector::AllocSite &site, const inspector::RecordLayout *rec,
                            bool libstdcxx) {
  if (!rec || !rec->size || !rec->align || site.dependent || site.variant != 0)
    return 0;
  if (site.call == "new" || site.call == "make_unique" || site.call == "make_unique_for_overwrite")
    return rec->size;
  if (libstdcxx && (site.call == "make_shared" || site.call == "make_shared_for_overwrite"))
    return inspector::shared_block_bytes(*rec);
  return 0;
}

// Whether the modules' C++ library is libstdc++ (and not libc++).
bool uses_libstdcxx(const std::vector<std::string> &modules) {
  auto has = [&](const char *lib) {
    return std::any_of(modules.begin(), modules.end(),
                       [&](const std::string &m) { return m.find(lib) != std::string::npos; });
  };
  return has("/libstdc++.so") && !has("/libc++.so");
}

// The function key a type= rule routes for a site in `function` (as the
// type map names it): with its template arguments where the program defines
// a function of that name, so that `SkipList<int, long>::insert` routes that
// instantiation and not every SkipList's; else without them (the map spells
// arguments as clang prints them, which a demangled name need not), which
// names every instantiation. "" when it is no function name.
std::string type_rule_key(const std::string &function,
                          const std::vector<std::string> &program_functions) {
  char norm[rules::kMaxName];
  if (!rules::normalize_function(function.c_str(), norm, sizeof norm))
    return "";
  if (function.find('<') == std::string::npos || function.size() >= rules::kMaxName)
    return norm;
  std::string_view last(norm);
  if (size_t colon = last.rfind("::"); colon != std::string_view::npos)
    last.remove_prefix(colon + 2);
  for (const auto &d : program_functions)
    if (d.find(last) != std::string::npos &&
        rules::function_key_matches(d.c_str(), function.c_str()))
      return function;
  return norm;
}

// Replaces rule i by one rule per function (same size key and actions), with
// size=N where the function maps to N and the rule has no size key.
bool replace_with_functions(LoadedRules *rules, unsigned i,
                            const std::map<std::string, uint64_t> &functions) {
  rules::RuleSet &set = *rules->set;
  if (set.count - 1 + functions.size() > rules::kMaxRules) {
    std::fprintf(stderr,
                 "memlayout: %s: the rule resolves to %zu functions: more than %u rules in all\n",
                 rules->origin[i].c_str(), functions.size(), rules::kMaxRules);
    return false;
  }
  rules::Rule base = set.rules[i];
  base.file[0] = base.type[0] = 0;
  base.file_line = 0;
  std::string origin = rules->origin[i];
  std::vector<rules::Rule> expanded;
  for (const auto &[f, bytes] : functions) {
    rules::Rule r = base;
    std::snprintf(r.function, sizeof r.function, "%s", f.c_str());
    if (bytes && !r.has_size) {
      r.has_size = true;
      r.size_min = r.size_max = bytes;
    }
    expanded.push_back(r);
  }
  std::vector<rules::Rule> all(set.rules, set.rules + set.count);
  all.erase(all.begin() + i);
  all.insert(all.begin() + i, expanded.begin(), expanded.end());
  rules->origin.erase(rules->origin.begin() + i);
  rules->origin.insert(rules->origin.begin() + i, expanded.size(), origin);
  rules::Rule written = rules->written[i];
  rules->written.erase(rules->written.begin() + i);
  rules->written.insert(rules->written.begin() + i, expanded.size(), written);
  set.count = static_cast<unsigned>(all.size());
  std::copy(all.begin(), all.end(), set.rules);
  return true;
}

void rebuild_text(LoadedRules *rules) {
  rules->text.clear();
  for (unsigned i = 0; i < rules->set->count; ++i) {
    rules->text.append(inspector::rule_text(rules->set->rules[i])).push_back('\n');
  }
  for (unsigned i = 0; i < rules->set->wrapper_count; ++i) {
    const rules::WrapperDecl &d = rules->set->wrappers[i];
    rules->text += std::string(d.not_wrapper ? "not-wrapper=" : "wrapper=") + d.function + "\n";
  }
}

} // namespace

size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> program_modules(const std::string &program) {
  std::vector<std::string> out;
  std::string exe = find_in_path(program);
  if (exe.empty())
    return out;
  out.push_back(exe);
  std::set<std::string> names;
  std::vector<std::string> needed, runpath;
  collect_functions(exe, names, needed, runpath);
  std::set<std::string> seen;
  for (size_t i = 0; i < needed.size(); ++i)
    if (seen.insert(needed[i]).second)
      if (std::string lib = find_library(needed[i], runpath); !lib.empty()) {
        std::vector<std::string> more;
        collect_functions(lib, names, needed, more);
        out.push_back(lib);
      }
  return out;
}

std::vector<std::unique_ptr<inspector::ModuleCode>>
load_code(const std::vector<std::string> &modules) {
  std::vector<std::unique_ptr<inspector::ModuleCode>> out;
  for (const std::string &path : modules) {
    std::string error;
    if (auto code = inspector::ModuleCode::load(path, {"/usr/lib/debug"}, &error))
      out.push_back(std::move(code));
  }
  return out;
}

std::vector<std::string> program_modules(const std::vector<std::string> &programs) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string &p : programs)
    for (std::string &m : program_modules(p))
      if (seen.insert(m).second)
        out.push_back(std::move(m));
  return out;
}

std::vector<std::string> programs_named(const std::vector<std::string> &command) {
  std::vector<std::string> out;
  if (command.empty())
    return out;
  out.push_back(command[0]);
  std::set<std::string> seen{command[0]};
  for (size_t i = 1; i < command.size(); ++i) {
    // Words as a shell would split the argument, quotes and operators apart.
    std::string word;
    auto take = [&] {
      struct stat st;
      if (word.find('/') != std::string::npos && seen.insert(word).second &&
          stat(word.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(word.c_str(), X_OK) == 0)
        out.push_back(word);
      word.clear();
    };
    for (char c : command[i]) {
      if (std::isspace(static_cast<unsigned char>(c)) ||
          std::string_view(";&|()<>`'\"").find(c) != std::string_view::npos)
        take();
      else
        word += c;
    }
    take();
  }
  return out;
}

bool expand_match_keys(LoadedRules *rules, const std::vector<std::string> &programs,
                       const std::string &types_file, bool find_types) {
  const std::string &program = programs.front();
  if (!types_file.empty() && access(types_file.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "memlayout: %s: cannot read the type map: %s\n", types_file.c_str(),
                 std::strerror(errno));
    return false;
  }
  std::vector<std::string> modules;
  std::optional<std::vector<std::string>> program_functions; // for type= rules
  std::optional<inspector::TypeMap> types;
  bool types_tried = false;
  bool libstdcxx = false; // the program's C++ library, once its modules are known
  for (unsigned i = 0; i < rules->set->count; ++i) {
    rules::Rule &r = rules->set->rules[i];
    if (r.function[0] || (!r.file[0] && !r.type[0]))
      continue;
    // Each function the rule resolves to, with the bytes every allocation
    // of the type there asks for (0: not one size, or not known).
    std::map<std::string, uint64_t> functions;
    std::string type; // the record a type= rule names, as the map names it
    if (r.type[0]) {
      if (!types_tried) {
        types_tried = true;
        std::string path = types_file;
        if (path.empty() && find_types) {
          std::string exe = find_in_path(program);
          path = exe.empty() ? std::string() : inspector::type_map_beside(exe);
          if (!path.empty() && access(path.c_str(), R_OK) != 0)
            path.clear();
        }
        std::string error;
        if (!path.empty() && !(types = inspector::TypeMap::load(path, error))) {
          // A map the user named is an input: unusable, it is an error, as
          // for report --types. One found beside the program is a hint.
          if (!types_file.empty()) {
            std::fprintf(stderr, "memlayout: %s\n", error.c_str());
            return false;
          }
          std::fprintf(stderr, "memlayout: warning: %s\n", error.c_str());
        }
      }
      if (!types) {
        std::fprintf(stderr,
                     "memlayout: warning: %s: type=%s needs a type map (memlayout structs "
                     "--format json -o PROGRAM.memlayout-types.json, or --types MAP): the rule "
                     "matches nothing\n",
                     rules->origin[i].c_str(), r.type);
        continue;
      }
      const inspector::RecordLayout *rec = types->record(r.type);
      type = rec ? rec->name : r.type;
      if (!program_functions) {
        if (modules.empty())
          modules = program_modules(programs);
        program_functions = code_functions(modules);
        libstdcxx = uses_libstdcxx(modules);
      }
      // The interposer knows call sites, not types; where every allocation
      // of the type in a function is of one size, size= keeps that
      // function's other allocations (a string's, a container's) out.
      for (const auto &site : types->sites()) {
        if (site.type != type || site.function.empty())
          continue;
        std::string key = type_rule_key(site.function, *program_functions);
        if (key.empty())
          continue;
        uint64_t bytes = site_request_bytes(site, rec, libstdcxx);
        auto [it, added] = functions.emplace(key, bytes);
        if (!added && it->second != bytes)
          it->second = 0;
      }
    } else {
      if (modules.empty())
        modules = program_modules(programs);
      std::set<std::string> at;
      for (const auto &m : modules)
        functions_at(m, r.file, r.file_line, at);
      for (const auto &f : at)
        functions.emplace(f, 0);
    }
    if (functions.empty()) {
      if (r.type[0])
        std::fprintf(stderr,
                     "memlayout: warning: %s: the type map names no function allocating %s: the "
                     "rule matches nothing\n",
                     rules->origin[i].c_str(), r.type);
      else
        std::fprintf(stderr,
                     "memlayout: warning: %s: no function of %s or its libraries has code at "
                     "%s%s (debug line info needed): the rule matches nothing\n",
                     rules->origin[i].c_str(), program.c_str(), r.file,
                     r.file_line ? (":" + std::to_string(r.file_line)).c_str() : "");
      continue;
    }
    if (r.type[0]) {
      // Where the map has those functions allocate other types too, and no
      // size tells them apart, the rule routes them as well.
      std::map<std::string, std::string> others; // type -> its first site
      std::set<std::string> names_unsized;
      for (const auto &site : types->sites()) {
        if (site.type == type || site.function.empty())
          continue;
        auto it = functions.find(type_rule_key(site.function, *program_functions));
        if (it == functions.end() ||
            (it->second && !r.has_size &&
             site_request_bytes(site, types->record(site.type), libstdcxx) != it->second))
          continue;
        others.emplace(site.type.empty() ? "untyped memory" : site.type,
                       site.file + ":" + std::to_string(site.line));
        names_unsized.insert(it->first);
      }
      if (!others.empty()) {
        std::string names, also;
        for (const auto &f : names_unsized)
          names += (names.empty() ? "" : ", ") + f;
        size_t shown = 0;
        for (const auto &[t, where] : others)
          if (shown++ < 4)
            also += (also.empty() ? "" : ", ") + t + " (" + where + ")";
        if (others.size() > 4)
          also += " and " + std::to_string(others.size() - 4) + " more types";
        std::fprintf(stderr,
                     "memlayout: warning: %s: type=%s is allocated in %s, which the type map "
                     "says also allocate%s %s: the interposer routes by allocation site, so the "
                     "rule routes those too (memlayout replay TRACE --rules RULES counts them%s)\n",
                     rules->origin[i].c_str(), r.type, names.c_str(),
                     names_unsized.size() == 1 ? "s" : "", also.c_str(),
                     r.has_size ? "" : "; a size= key may tell them apart");
      }
    }
    if (!replace_with_functions(rules, i, functions))
      return false;
    i += static_cast<unsigned>(functions.size()) - 1;
  }
  rebuild_text(rules);
  return true;
}

bool load_rules(const RuleArgs &args, LoadedRules *out) {
  out->set = std::make_unique<rules::RuleSet>();
  *out->set = {};
  for (const auto &file : args.files) {
    std::ifstream in(file, std::ios::binary);
    struct stat st;
    bool directory = in && stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (directory)
      errno = EISDIR; // an ifstream opens one, and reads it as nothing
    if (!in || directory) {
      std::fprintf(stderr, "memlayout: cannot read the rules file '%s': %s\n", file.c_str(),
                   std::strerror(errno));
      return false;
    }
    // Read with a bound: a device or a pipe that never ends (/dev/zero) must
    // not hold the program back while memory grows. 64 rules fit in far less.
    constexpr size_t kMaxRulesFile = 4 << 20;
    std::string text(kMaxRulesFile + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxRulesFile) {
      std::fprintf(stderr,
                   "memlayout: the rules file '%s' is longer than %zu MiB: not a rules file\n",
                   file.c_str(), kMaxRulesFile >> 20);
      return false;
    }
    if (!append(text, file, false, out))
      return false;
  }
  for (const auto &spec : args.specs)
    if (!append(spec, inspector::segregate_flag(spec), true, out))
      return false;
  rebuild_text(out);
  return true;
}

bool load_rules_text(const std::string &text, const std::string &origin, LoadedRules *out) {
  out->set = std::make_unique<rules::RuleSet>();
  *out->set = {};
  if (!append(text, origin, false, out))
    return false;
  rebuild_text(out);
  return true;
}

} // namespace memlayout::cli
