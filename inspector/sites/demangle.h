// C++ names as people read them, one definition for the symbolizer, the code
// map and the rules.
#pragma once

#include <string>

namespace memlayout::inspector {

// An Itanium-mangled name demangled, or the name as it is. LLVM 14's
// demangler gives some names back unchanged (std::make_shared<T>'s, whose
// return type holds `!std::is_array<T>::value`); libstdc++'s, which c++filt
// uses, is tried then.
std::string demangle(const std::string &name);

} // namespace memlayout::inspector
