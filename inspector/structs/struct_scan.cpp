#include "struct_scan.h"

#include "alloc_sites.h"
#include "cxx_names.h"
#include "json_input.h"
#include "struct_layout.h"

#include <clang/AST/ASTContext.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Driver/Options.h>
#include <clang/Driver/Types.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/JSONCompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Option/ArgList.h>
#include <llvm/Option/OptTable.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#ifndef MEMLAYOUT_CLANG_RESOURCE_DIR
#error                                                                                             \
    "MEMLAYOUT_CLANG_RESOURCE_DIR must name clang's resource directory (inspector/CMakeLists.txt)"
#endif

namespace memlayout::inspector {
namespace {

using namespace clang::ast_matchers;

// memlayout's own public headers (memlayout.h's annotation records, the
// segregation API's option structs): a program that includes them with -I,
// as pkg-config's flags do, would see them among its own records; with
// -isystem (the CMake package) they are system headers already.
bool in_memlayout_headers(llvm::StringRef file) {
  return file.endswith("/memlayout/memlayout.h") || file.endswith("/memlayout/seg.h") ||
         file.endswith("/memlayout/seg.hpp");
}

class RecordCollector : public MatchFinder::MatchCallback {
public:
  explicit RecordCollector(std::vector<RecordLayout> &out) : out_(out) {}
  void run(const MatchFinder::MatchResult &result) override {
    const auto *rd = result.Nodes.getNodeAs<clang::RecordDecl>("record");
    if (!rd)
      return;
    const clang::SourceManager &sm = *result.SourceManager;
    if (in_memlayout_headers(sm.getFilename(sm.getExpansionLoc(rd->getLocation()))))
      return;
    if (auto layout = layout_of(*rd, *result.Context))
      out_.push_back(std::move(*layout));
  }

private:
  std::vector<RecordLayout> &out_;
};

// clang reads compile_commands.json with its YAML parser, which accepts what
// JSON does not, reports errors as "YAML:5:2" on stderr, and lets an entry
// with a number for a command through to a compile that fails with "no input
// files". Checked as JSON first, the file's own errors name it, their line
// and column, or the entry and key.
bool check_database_file(const std::string &path, std::string &error) {
  auto text = llvm::MemoryBuffer::getFile(path);
  if (!text) {
    error = "cannot read '" + path + "': " + text.getError().message();
    return false;
  }
  std::optional<llvm::json::Value> doc =
      parse_json_input((*text)->getBuffer(), "'" + path + "'", error);
  if (!doc)
    return false; // "'PATH': not JSON: [line:column, byte=N]: message"
  const llvm::json::Array *entries = doc->getAsArray();
  if (!entries) {
    error = "'" + path + "' is not a compilation database: expected an array of entries";
    return false;
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string entry = "'" + path + "', entry " + std::to_string(i + 1) + ": ";
    const llvm::json::Object *e = (*entries)[i].getAsObject();
    if (!e) {
      error = entry + "expected an object";
      return false;
    }
    for (const char *key : {"directory", "file"})
      if (!e->getString(key)) {
        error = entry + "\"" + key + "\" " + (e->get(key) ? "is not a string" : "is missing");
        return false;
      }
    const llvm::json::Value *command = e->get("command");
    const llvm::json::Value *arguments = e->get("arguments");
    if (!command && !arguments) {
      error = entry + "neither \"command\" nor \"arguments\"";
      return false;
    }
    if (command && !command->getAsString()) {
      error = entry + "\"command\" is not a string";
      return false;
    }
    if (arguments) {
      const llvm::json::Array *args = arguments->getAsArray();
      bool strings =
          args && std::all_of(args->begin(), args->end(), [](const llvm::json::Value &a) {
            return a.getAsString().hasValue();
          });
      if (!strings) {
        error = entry + "\"arguments\" is not an array of strings";
        return false;
      }
      if (args->empty()) {
        error = entry + "\"arguments\" is empty: it needs the compiler and its arguments";
        return false;
      }
    }
    if (command && command->getAsString()->trim().empty()) {
      error = entry + "\"command\" is empty: it needs the compiler and its arguments";
      return false;
    }
  }
  return true;
}

std::unique_ptr<clang::tooling::CompilationDatabase> load_database(const ScanOptions &o,
                                                                   std::string &error) {
  using clang::tooling::CompilationDatabase;
  if (o.fixed_args)
    return std::make_unique<clang::tooling::FixedCompilationDatabase>(".", *o.fixed_args);
  std::string why;
  // A -p directory's own compile_commands.json is read as such: searching
  // upward, clang would take a parent's when this one is unreadable.
  std::string here = o.build_dir + "/compile_commands.json";
  if (!o.build_dir.empty() && llvm::sys::fs::is_regular_file(here)) {
    using namespace clang::tooling;
    if (!check_database_file(here, error))
      return nullptr;
    std::unique_ptr<CompilationDatabase> db =
        JSONCompilationDatabase::loadFromFile(here, why, JSONCommandLineSyntax::AutoDetect);
    if (!db) {
      error = "'" + here + "' is not a compilation database clang can read: " +
              llvm::StringRef(why).rtrim().str();
      return db;
    }
    // What clang's own search wraps it in: headers get a neighbour's command.
    return inferTargetAndDriverMode(inferMissingCompileCommands(
        expandResponseFiles(std::move(db), llvm::vfs::getRealFileSystem())));
  }
  std::unique_ptr<CompilationDatabase> db =
      o.build_dir.empty() ? CompilationDatabase::autoDetectFromSource(o.files.front(), why)
                          : CompilationDatabase::autoDetectFromDirectory(o.build_dir, why);
  if (!db) {
    std::string where = o.build_dir.empty() ? "for '" + o.files.front() + "'"
                                            : "in '" + o.build_dir + "' or a parent directory";
    std::string indented;
    for (char c : llvm::StringRef(why).rtrim().str())
      indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    error = "no compilation database " + where + ":\n  " + indented +
            "\nGive the build directory that holds compile_commands.json with -p BUILD_DIR "
            "(CMake writes one with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON), or the compiler "
            "arguments after --, e.g.\n  memlayout structs " +
            o.files.front() + " -- -std=c++20 -Iinclude";
  }
  return db;
}

// gcc's precompiled headers, as CMake's target_precompile_headers sets them
// up (-include DIR/cmake_pch.hxx beside DIR/cmake_pch.hxx.gch): clang's
// driver takes the .gch for a PCH of its own and stops ("input is not a PCH
// file"). Given to the compiler proper, the header is read as the text it is.
// CMake's header starts with `#pragma GCC system_header`, which would make
// the project's headers it includes system headers, whose records are left
// out: it is read without that line, from a copy in memory beside it
// (`text_copies`: the header's path -> the copy's).
bool is_gcc_pch_header(const std::string &path) { return llvm::sys::fs::exists(path + ".gch"); }

clang::tooling::ArgumentsAdjuster
gcc_pch_as_text(const std::map<std::string, std::string> &text_copies) {
  return [&text_copies](const clang::tooling::CommandLineArguments &args, llvm::StringRef) {
    clang::tooling::CommandLineArguments out;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "-include" && i + 1 < args.size() && is_gcc_pch_header(args[i + 1])) {
        auto copy = text_copies.find(args[i + 1]);
        if (copy != text_copies.end())
          out.insert(out.end(), {"-iquote", llvm::sys::path::parent_path(args[i + 1]).str()});
        out.insert(out.end(), {"-Xclang", "-include", "-Xclang",
                               copy == text_copies.end() ? args[i + 1] : copy->second});
        ++i;
        continue;
      }
      out.push_back(args[i]);
    }
    return out;
  };
}

// The copies gcc_pch_as_text reads instead of the PCH headers of
// `commands` that mark themselves system headers: temporary files, removed
// by the caller (the paths in `text_copies`). Their quoted includes still
// look beside the header first (-iquote, added by gcc_pch_as_text).
void write_pch_text_copies(const std::vector<clang::tooling::CompileCommand> &commands,
                           std::map<std::string, std::string> &text_copies) {
  for (const clang::tooling::CompileCommand &c : commands)
    for (size_t i = 0; i + 1 < c.CommandLine.size(); ++i) {
      std::string header = c.CommandLine[i + 1];
      if (c.CommandLine[i] != "-include" || text_copies.count(header))
        continue;
      if (!llvm::sys::path::is_absolute(header))
        header = (llvm::Twine(c.Directory) + "/" + header).str();
      if (!is_gcc_pch_header(header))
        continue;
      auto text = llvm::MemoryBuffer::getFile(header);
      if (!text)
        continue;
      std::string content = (*text)->getBuffer().str();
      constexpr llvm::StringLiteral kPragma("#pragma GCC system_header");
      size_t at = content.find(kPragma.data());
      if (at == std::string::npos)
        continue;
      content.replace(at, kPragma.size(), "");
      int fd = -1;
      llvm::SmallString<256> copy;
      if (llvm::sys::fs::createTemporaryFile("memlayout-pch", "hxx", fd, copy))
        continue;
      llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
      out << "#line 1 \"" << header << "\"\n" << content;
      out.close();
      if (out.has_error()) {
        out.clear_error();
        llvm::sys::fs::remove(copy);
        continue;
      }
      text_copies[c.CommandLine[i + 1]] = copy.str().str();
    }
}

// The indexes in `args` (args[0] is the compiler) of the arguments clang's
// driver parses into an option `which` selects.
template <class Which>
std::vector<size_t> arguments_where(const std::vector<std::string> &args, Which which) {
  std::vector<const char *> argv;
  for (size_t i = 1; i < args.size(); ++i)
    argv.push_back(args[i].c_str());
  unsigned missing_index = 0, missing_count = 0;
  llvm::opt::InputArgList list = clang::driver::getDriverOptTable().ParseArgs(
      argv, missing_index, missing_count, 0, clang::driver::options::NoDriverOption);
  std::vector<size_t> out;
  for (const llvm::opt::Arg *a : list)
    if (which(a->getOption()))
      out.push_back(a->getIndex() + 1);
  return out;
}

// Arguments clang's driver does not know (a gcc-only -mindirect-branch=..., a
// typo) or knows as ones it does not support: it reports both as errors and
// goes on without them.
std::vector<size_t> unknown_arguments(const std::vector<std::string> &args) {
  return arguments_where(args, [](const llvm::opt::Option &o) {
    return o.getKind() == llvm::opt::Option::UnknownClass ||
           o.hasFlag(clang::driver::options::Unsupported);
  });
}

// What clang's driver would take for input files.
std::vector<size_t> input_arguments(const std::vector<std::string> &args) {
  return arguments_where(args, [](const llvm::opt::Option &o) {
    return o.getKind() == llvm::opt::Option::InputClass;
  });
}

// A build's command may carry gcc's own flags, which clang's driver reports
// as errors and then ignores: they are dropped here, said once per flag.
clang::tooling::ArgumentsAdjuster without_unknown_flags(std::set<std::string> &said) {
  return [&said](const clang::tooling::CommandLineArguments &args, llvm::StringRef file) {
    std::vector<size_t> unknown = unknown_arguments(args);
    clang::tooling::CommandLineArguments out;
    for (size_t i = 0, u = 0; i < args.size(); ++i) {
      if (u < unknown.size() && unknown[u] == i) {
        ++u;
        if (said.insert(args[i]).second)
          llvm::errs() << "memlayout structs: " << file << ": ignoring " << args[i]
                       << ", a flag of the build's compiler that clang does not know\n";
        continue;
      }
      out.push_back(args[i]);
    }
    return out;
  };
}

// A .h given a C++ standard (`structs x.h -- -std=c++17`) is a C++ header:
// clang's driver takes it for C by its name, says the standard is not
// allowed with C, and parses it as C++ anyway, while the run succeeded.
clang::tooling::ArgumentsAdjuster cxx_header_when_the_standard_says() {
  return [](const clang::tooling::CommandLineArguments &args, llvm::StringRef file) {
    bool header = llvm::sys::path::extension(file) == ".h", cxx = false;
    for (const std::string &a : args) {
      llvm::StringRef arg(a);
      if (arg.startswith("-x") || arg.startswith("--language"))
        return args;
      cxx |= arg.startswith("-std=c++") || arg.startswith("-std=gnu++") ||
             arg.startswith("--std=c++") || arg.startswith("--std=gnu++");
    }
    if (!header || !cxx || args.empty())
      return args;
    clang::tooling::CommandLineArguments out(args.begin(), args.begin() + 1);
    out.insert(out.end(), {"-x", "c++-header"});
    out.insert(out.end(), args.begin() + 1, args.end());
    return out;
  };
}

// Whether clang compiles the file as C or C++ (Objective-C too): by its
// name, unless its command says the language with -x. Anything else (a
// script, an executable) would reach clang's driver as a linker input,
// which fails with no word about the file.
bool c_family(const std::string &file,
              const std::vector<clang::tooling::CompileCommand> &commands) {
  for (const clang::tooling::CompileCommand &c : commands)
    for (const std::string &arg : c.CommandLine)
      if (llvm::StringRef(arg).startswith("-x") || llvm::StringRef(arg).startswith("--language"))
        return true;
  llvm::StringRef ext = llvm::sys::path::extension(file);
  clang::driver::types::ID type =
      clang::driver::types::lookupTypeForExtension(ext.empty() ? ext : ext.drop_front());
  return type != clang::driver::types::TY_INVALID &&
         (clang::driver::types::isCXX(type) || clang::driver::types::isObjC(type) ||
          type == clang::driver::types::TY_C || type == clang::driver::types::TY_CHeader ||
          type == clang::driver::types::TY_PP_C || type == clang::driver::types::TY_PP_CHeader);
}

std::string resource_dir(const ScanOptions &o) {
  if (!o.resource_dir.empty())
    return o.resource_dir;
  if (const char *env = std::getenv("MEMLAYOUT_CLANG_RESOURCE_DIR"); env && *env)
    return env;
  return default_resource_dir();
}

// Which translation unit (a file and one of its commands) each collected
// record and site came from: ClangTool runs a file's commands one after
// another and adjusts each command's arguments just before running it, so
// what was collected since the last adjustment belongs to the previous one.
class TranslationUnits {
public:
  explicit TranslationUnits(const ScanResult &out) : out_(out) {}

  // Called before each command runs, with its arguments.
  clang::tooling::ArgumentsAdjuster starting(const std::string &file) {
    return [this, file](const clang::tooling::CommandLineArguments &args, llvm::StringRef) {
      close();
      labels_.push_back(label(file, args));
      return args;
    };
  }
  // Called after the last command: what was collected since is its own.
  void close() {
    const uint32_t current = labels_.empty() ? 0 : static_cast<uint32_t>(labels_.size() - 1);
    record_tu.resize(out_.records.size(), current);
    site_tu.resize(out_.sites.size(), current);
  }
  const std::string &operator[](uint32_t i) const { return labels_[i]; }

  std::vector<uint32_t> record_tu, site_tu; // by index in out_.records, out_.sites

private:
  // The file's absolute path and the macros its command defines: what tells
  // two layouts of one header apart.
  static std::string label(const std::string &file, const clang::tooling::CommandLineArguments &a) {
    std::string out = file;
    for (size_t i = 1; i < a.size(); ++i) {
      llvm::StringRef arg = a[i];
      if ((arg == "-D" || arg == "-U") && i + 1 < a.size())
        out += " " + arg.str() + a[++i];
      else if (arg.startswith("-D") || arg.startswith("-U"))
        out += " " + arg.str();
    }
    return out;
  }

  const ScanResult &out_;
  std::vector<std::string> labels_;
};

// The same header seen by several files gives the same records and sites:
// one of each, unless the files lay a record out differently (other -D
// flags): then one per layout, each with the translation units that gave it,
// and each site tied to the layout of its own translation unit. A site
// inside a template is kept with its instantiated types; as written (T,
// Node<K>) only where no instantiation was seen.
void merge(std::vector<RecordLayout> &records, std::vector<AllocSite> &sites,
           const TranslationUnits &tus) {
  // An instantiation spelled two ways (Tree<int, std::string> where it was
  // instantiated explicitly, Tree<int, std::basic_string<char>> elsewhere)
  // is one record.
  std::vector<std::pair<std::string, size_t>> keyed;
  for (size_t i = 0; i < records.size(); ++i)
    keyed.emplace_back(canonical_cxx_name(records[i].name), i);
  auto record_key = [&](const std::pair<std::string, size_t> &k) {
    const RecordLayout &r = records[k.second];
    return std::tie(r.file, r.line, k.first);
  };
  std::stable_sort(keyed.begin(), keyed.end(),
                   [&](const auto &a, const auto &b) { return record_key(a) < record_key(b); });
  std::vector<RecordLayout> kept;
  // (canonical name, translation unit) -> the variant it laid the record out as.
  std::map<std::pair<std::string, std::string>, uint32_t> variant_in;
  for (size_t group = 0; group < keyed.size();) {
    size_t end = group + 1;
    while (end < keyed.size() && record_key(keyed[end]) == record_key(keyed[group]))
      ++end;
    const size_t first = kept.size();
    for (size_t k = group; k < end; ++k) {
      RecordLayout &r = records[keyed[k].second];
      const std::string &tu = tus[tus.record_tu[keyed[k].second]];
      auto same = std::find_if(kept.begin() + static_cast<std::ptrdiff_t>(first), kept.end(),
                               [&](const RecordLayout &o) { return same_layout(o, r); });
      if (same == kept.end()) {
        kept.push_back(std::move(r));
        same = kept.end() - 1;
      }
      if (std::find(same->translation_units.begin(), same->translation_units.end(), tu) ==
          same->translation_units.end())
        same->translation_units.push_back(tu);
    }
    // Layouts numbered by the translation units that gave them, in order of
    // their names: whatever order the files came in, the same numbers.
    for (size_t v = first; v < kept.size(); ++v)
      std::sort(kept[v].translation_units.begin(), kept[v].translation_units.end());
    std::sort(kept.begin() + static_cast<std::ptrdiff_t>(first), kept.end(),
              [](const RecordLayout &a, const RecordLayout &b) {
                return a.translation_units < b.translation_units;
              });
    if (kept.size() - first > 1)
      for (size_t v = first; v < kept.size(); ++v) {
        kept[v].variant = static_cast<uint32_t>(v - first + 1);
        for (const std::string &tu : kept[v].translation_units)
          variant_in[{keyed[group].first, tu}] = kept[v].variant;
      }
    group = end;
  }
  records = std::move(kept);

  for (size_t i = 0; i < sites.size(); ++i)
    if (auto v = variant_in.find({canonical_cxx_name(sites[i].type), tus[tus.site_tu[i]]});
        v != variant_in.end())
      sites[i].variant = v->second;
  auto key = [](const AllocSite &s) {
    return std::tie(s.file, s.line, s.column, s.dependent, s.type, s.variant, s.call, s.function);
  };
  std::sort(sites.begin(), sites.end(),
            [&](const auto &a, const auto &b) { return key(a) < key(b); });
  sites.erase(std::unique(sites.begin(), sites.end(),
                          [&](const auto &a, const auto &b) { return key(a) == key(b); }),
              sites.end());
  std::set<std::tuple<std::string, uint32_t, uint32_t>> concrete;
  for (const AllocSite &s : sites)
    if (!s.dependent)
      concrete.emplace(s.file, s.line, s.column);
  std::erase_if(sites, [&](const AllocSite &s) {
    return s.dependent && concrete.count({s.file, s.line, s.column});
  });
}

// Said on stderr as well as in the report: a reader of one layout would
// otherwise not know that another translation unit sees a different one.
void warn_of_variants(const std::vector<RecordLayout> &records) {
  for (const RecordLayout &r : records) {
    if (r.variant != 1)
      continue;
    llvm::errs() << "memlayout structs: warning: " << r.kind << " " << r.name << " (" << r.file
                 << ":" << r.line
                 << ") has different layouts in different translation units; each is "
                    "reported:\n";
    for (const RecordLayout *v = &r; v != records.data() + records.size() && v->name == r.name &&
                                     v->file == r.file && v->line == r.line && v->variant;
         ++v) {
      llvm::errs() << "  layout " << v->variant << ": size " << v->size << ", align " << v->align
                   << ", in";
      for (const std::string &tu : v->translation_units)
        llvm::errs() << " [" << tu << "]";
      llvm::errs() << "\n";
    }
  }
}

} // namespace

const char *default_resource_dir() { return MEMLAYOUT_CLANG_RESOURCE_DIR; }

bool scan_structs(const ScanOptions &o, ScanResult &out, std::string &error) {
  out = ScanResult{};
  if (o.files.empty()) {
    error = "no source files given";
    return false;
  }
  const std::string resources = resource_dir(o);
  if (!llvm::sys::fs::is_directory(resources + "/include")) {
    error = "clang's resource directory '" + resources +
            "' has no include/ (builtin headers such as stddef.h); set "
            "MEMLAYOUT_CLANG_RESOURCE_DIR to the one of the installed clang " +
            "(clang -print-resource-dir)";
    return false;
  }
  // clang tools search a -p directory's parents too; one that does not
  // exist would silently take some parent's database.
  if (!o.build_dir.empty() && !llvm::sys::fs::is_directory(o.build_dir)) {
    error = "'" + o.build_dir +
            "' is not a directory (-p names the build directory holding compile_commands.json)";
    return false;
  }
  // Flags typed after -- are the user's: one clang does not know is a typo.
  if (o.fixed_args) {
    std::vector<std::string> args{"clang"};
    args.insert(args.end(), o.fixed_args->begin(), o.fixed_args->end());
    if (std::vector<size_t> unknown = unknown_arguments(args); !unknown.empty()) {
      error = "unknown compiler flag '" + args[unknown[0]] + "' after --";
      return false;
    }
    if (std::vector<size_t> inputs = input_arguments(args); !inputs.empty()) {
      error = "'" + args[inputs[0]] +
              "' after -- is no compiler flag; the files to read go before -- (memlayout "
              "structs FILES... -- FLAGS)";
      return false;
    }
  }
  std::unique_ptr<clang::tooling::CompilationDatabase> db = load_database(o, error);
  if (!db)
    return false;
  std::set<std::string> flags_said;

  RecordCollector records(out.records);
  AllocSiteCollector sites(out.sites);
  MatchFinder finder;
  finder.addMatcher(
      recordDecl(isDefinition(), unless(isImplicit()), unless(isExpansionInSystemHeader()))
          .bind("record"),
      &records);
  sites.add_matchers(finder);
  std::unique_ptr<clang::tooling::FrontendActionFactory> factory =
      clang::tooling::newFrontendActionFactory(&finder);
  TranslationUnits tus(out);

  for (const std::string &file : o.files) {
    llvm::SmallString<256> absolute(file);
    llvm::sys::fs::make_absolute(absolute);
    llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
    if (!llvm::sys::fs::exists(file)) {
      llvm::errs() << "memlayout structs: " << file << ": no such file\n";
      out.failed.push_back(absolute.str().str());
      continue;
    }
    if (!llvm::sys::fs::is_regular_file(file)) {
      llvm::errs() << "memlayout structs: " << file
                   << (llvm::sys::fs::is_directory(file) ? ": is a directory"
                                                         : ": not a regular file")
                   << " (FILES are C or C++ sources or headers)\n";
      out.failed.push_back(absolute.str().str());
      continue;
    }
    std::vector<clang::tooling::CompileCommand> commands = db->getCompileCommands(absolute);
    if (commands.empty()) {
      llvm::errs() << "memlayout structs: " << file
                   << ": the compilation database has no command for it (nor for a file like "
                      "it); build it in that project, or give its arguments after --\n";
      out.failed.push_back(absolute.str().str());
      continue;
    }
    // ClangTool changes into each command's directory and aborts the whole
    // process where it cannot (a database made on another machine).
    auto missing_dir = std::find_if(commands.begin(), commands.end(), [](const auto &c) {
      return !llvm::sys::fs::is_directory(c.Directory);
    });
    if (missing_dir != commands.end()) {
      llvm::errs() << "memlayout structs: " << file << ": the compilation database compiles it in "
                   << missing_dir->Directory
                   << ", which is not a directory here (a database made on another machine or "
                      "in a container? make it here, or give the file's arguments after --)\n";
      out.failed.push_back(absolute.str().str());
      continue;
    }
    if (!c_family(file, commands)) {
      llvm::errs() << "memlayout structs: " << file
                   << ": not a C or C++ source or header (by its name); to compile it as one, "
                      "give its language after --, e.g. -- -x c++ -std=c++20\n";
      out.failed.push_back(absolute.str().str());
      continue;
    }
    clang::tooling::ClangTool tool(*db, {file});
    // Warnings are the build's business; errors still print. The resource
    // directory goes first so that a database's own one still wins.
    tool.appendArgumentsAdjuster(clang::tooling::getInsertArgumentAdjuster(
        {"-resource-dir", resources, "-w"}, clang::tooling::ArgumentInsertPosition::BEGIN));
    std::map<std::string, std::string> pch_text_copies;
    write_pch_text_copies(commands, pch_text_copies);
    tool.appendArgumentsAdjuster(gcc_pch_as_text(pch_text_copies));
    tool.appendArgumentsAdjuster(without_unknown_flags(flags_said));
    tool.appendArgumentsAdjuster(cxx_header_when_the_standard_says());
    tool.appendArgumentsAdjuster(tus.starting(absolute.str().str()));
    if (tool.run(factory.get()) != 0)
      out.failed.push_back(absolute.str().str());
    for (const auto &[header, copy] : pch_text_copies)
      llvm::sys::fs::remove(copy);
  }
  tus.close();
  merge(out.records, out.sites, tus);
  warn_of_variants(out.records);
  return true;
}

} // namespace memlayout::inspector
