#include "managed_heap.h"

#include <llvm/Object/ObjectFile.h>

#include <string_view>

namespace memlayout::inspector {
namespace {

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

} // namespace

bool is_go_binary(const std::string &path) {
  auto file = llvm::object::ObjectFile::createObjectFile(path);
  if (!file) {
    llvm::consumeError(file.takeError());
    return false;
  }
  for (const llvm::object::SectionRef &s : file->getBinary()->sections()) {
    llvm::Expected<llvm::StringRef> name = s.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".go.buildinfo")
      return true;
  }
  return false;
}

std::vector<std::string> managed_heap_notes(const std::vector<ModuleEntry> &modules,
                                            const std::string &executable) {
  bool jvm = false, v8 = false, python = false, go = false;
  const std::string_view exe = basename_of(executable);
  v8 = exe == "node" || exe == "nodejs";
  python = exe.starts_with("python");
  for (const ModuleEntry &m : modules) {
    std::string_view name = basename_of(m.path);
    jvm = jvm || name == "libjvm.so";
    v8 = v8 || name.starts_with("libnode.so") || name.starts_with("libv8.so");
    python = python || name.starts_with("libpython");
  }
  // A Go runtime is linked into the executable.
  go = !executable.empty() && is_go_binary(executable);
  std::vector<std::string> notes;
  if (jvm)
    notes.push_back("a Java virtual machine ran here (libjvm.so): Java objects live in its "
                    "garbage-collected heap, which no malloc call reaches and memlayout does not "
                    "see; these groups are the JVM's own C and C++ allocations");
  if (go)
    notes.push_back("a Go program: Go values live in the Go runtime's own heap, which no malloc "
                    "call reaches and memlayout does not see; these groups are its C "
                    "allocations (cgo and the C libraries)");
  if (v8)
    notes.push_back("a V8 JavaScript engine ran here (node): JavaScript objects live in V8's "
                    "garbage-collected heap, which no malloc call reaches and memlayout does not "
                    "see; these groups are the engine's and its add-ons' C and C++ allocations");
  if (python)
    notes.push_back("a Python interpreter ran here: unless PYTHONMALLOC=malloc was in its "
                    "environment, its objects of up to 512 bytes come from pymalloc's arenas, "
                    "which it maps itself and memlayout does not see (with it, they go through "
                    "malloc and are recorded)");
  return notes;
}

} // namespace memlayout::inspector
