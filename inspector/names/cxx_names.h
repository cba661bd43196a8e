// C++ names as people read them, and as programs compare them: one
// definition for the symbolizer, the code map, the rules and the type map.
#pragma once

#include <string>
#include <string_view>

namespace memlayout::inspector {

// An Itanium-mangled name demangled, or the name as it is. LLVM 14's
// demangler gives some names back unchanged (std::make_shared<T>'s, whose
// return type holds `!std::is_array<T>::value`); libstdc++'s, which c++filt
// uses, is tried then.
// Rust's symbols too: v0 (_R...) by LLVM's demangler, legacy ones (_ZN...
// with a hash) without their hash and with their escapes decoded
// (alloc::raw_vec::RawVec<T,A>::grow).
std::string demangle(const std::string &name);

// A C++ name in one spelling, for comparing the names two tools wrote: the
// demangler's "std::__cxx11::basic_string<char, std::char_traits<char>,
// std::allocator<char> >" and clang's "std::basic_string<char>" both become
// "std::string". Drops libstdc++'s inline namespaces, template arguments
// after the first that are the standard defaults (allocators, char traits,
// comparators, hashers, deleters) and spaces next to punctuation.
std::string canonical_cxx_name(std::string_view name);

} // namespace memlayout::inspector
