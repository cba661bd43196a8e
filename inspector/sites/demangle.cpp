#include "demangle.h"

#include <cstdlib>
#include <cxxabi.h>
#include <llvm/Demangle/Demangle.h>

namespace memlayout::inspector {

std::string demangle(const std::string &name) {
  std::string out = llvm::demangle(name);
  if (out != name || name.rfind("_Z", 0) != 0)
    return out;
  int status = 0;
  char *gnu = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status == 0 && gnu)
    out = gnu;
  std::free(gnu);
  return out;
}

} // namespace memlayout::inspector
