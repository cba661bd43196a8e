#include "cxx_names.h"

#include <cstdlib>
#include <cxxabi.h>
#include <llvm/Demangle/Demangle.h>
#include <vector>

namespace memlayout::inspector {

namespace {

// Rust's legacy mangling is Itanium's with a hash for last component
// ("h" and 16 hex digits) and punctuation escaped in the identifiers:
// alloc::raw_vec::RawVec$LT$T$C$A$GT$::grow::h0123456789abcdef is
// alloc::raw_vec::RawVec<T,A>::grow, as rustc-demangle and perf print it.
bool rust_hash(std::string_view s) {
  if (s.size() != 17 || s[0] != 'h')
    return false;
  for (char c : s.substr(1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

std::string rust_legacy(std::string_view demangled) {
  size_t last = demangled.rfind("::");
  if (last == std::string_view::npos || !rust_hash(demangled.substr(last + 2)))
    return std::string(demangled);
  std::string_view path = demangled.substr(0, last);
  static constexpr std::pair<std::string_view, char> kEscapes[] = {
      {"$SP$", '@'}, {"$BP$", '*'}, {"$RF$", '&'}, {"$LT$", '<'},
      {"$GT$", '>'}, {"$LP$", '('}, {"$RP$", ')'}, {"$C$", ','}};
  std::string out;
  for (size_t i = 0; i < path.size();) {
    // A component that starts with an escape has '_' before it.
    bool component_start = i == 0 || (i >= 2 && path.substr(i - 2, 2) == "::");
    if (component_start && path.substr(i, 2) == "_$") {
      ++i;
      continue;
    }
    if (path[i] == '$') {
      bool done = false;
      for (const auto &[code, c] : kEscapes)
        if (path.substr(i, code.size()) == code) {
          out += c;
          i += code.size();
          done = true;
          break;
        }
      if (!done && path.substr(i, 2) == "$u") {
        size_t end = path.find('$', i + 2);
        unsigned long v = 0;
        bool hex = end != std::string_view::npos && end > i + 2 && end - i - 2 <= 6;
        for (size_t k = i + 2; hex && k < end; ++k) {
          char c = path[k];
          hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
          v = v * 16 + static_cast<unsigned long>(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        if (hex && v >= 0x20 && v < 0x7f) {
          out += static_cast<char>(v);
          i = end + 1;
          done = true;
        }
      }
      if (done)
        continue;
    }
    if (path.substr(i, 2) == ".." && path.substr(i, 3) != "...") {
      out += "::";
      i += 2;
      continue;
    }
    out += path[i++];
  }
  return out;
}

} // namespace

std::string demangle(const std::string &name) {
  if (name.rfind("_ZN", 0) == 0 && name.back() == 'E' && name.find("17h") != std::string::npos) {
    int status = 0;
    char *gnu = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    std::string out = status == 0 && gnu ? rust_legacy(gnu) : name;
    std::free(gnu);
    if (status == 0 && out.find("::h") == std::string::npos)
      return out;
  }
  std::string out = llvm::demangle(name);
  // LLVM spells closures and unnamed types 'lambda'(long) and 'unnamed';
  // GCC, c++filt, perf and the rules {lambda(long)#1} and {unnamed type#1}.
  bool gnu_spells_differently =
      out.find("'lambda") != std::string::npos || out.find("'unnamed") != std::string::npos;
  if ((out != name && !gnu_spells_differently) || name.rfind("_Z", 0) != 0)
    return out;
  int status = 0;
  char *gnu = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status == 0 && gnu)
    out = gnu;
  std::free(gnu);
  return out;
}

namespace {

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether `arg` is the standard library's default for its place after
// `before` (the list's earlier arguments): std::allocator<T>, std::hash<K>,
// std::less<K>... of an earlier argument, or a map's allocator of
// std::pair<const K, V>. Only then: Map<char, std::hash<int>> is not
// Map<char>.
bool is_default_argument(std::string_view arg, const std::vector<std::string> &before) {
  for (std::string_view d : {"std::allocator<", "std::char_traits<", "std::less<", "std::hash<",
                             "std::equal_to<", "std::default_delete<"}) {
    if (arg.size() <= d.size() || arg.substr(0, d.size()) != d || arg.back() != '>')
      continue;
    std::string_view inner = arg.substr(d.size(), arg.size() - d.size() - 1);
    for (const std::string &b : before)
      if (inner == b)
        return true;
    if (before.size() >= 2 && (inner == "std::pair<const " + before[0] + "," + before[1] + ">" ||
                               inner == "std::pair<" + before[0] + " const," + before[1] + ">"))
      return true;
  }
  return false;
}

// Where the argument list opened at `open` closes, or npos (an operator<,
// or a name cut short).
size_t closing(std::string_view s, size_t open) {
  int angle = 0, paren = 0;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(')
      ++paren;
    else if (c == ')' && --paren < 0)
      return std::string_view::npos;
    else if (paren == 0 && c == '<')
      ++angle;
    else if (paren == 0 && c == '>' && --angle == 0)
      return i;
  }
  return std::string_view::npos;
}

// `s` without spaces, with every argument list's defaults dropped.
std::string without_defaults(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    size_t close = s[i] == '<' && !(i >= 8 && s.substr(i - 8, 8) == "operator")
                       ? closing(s, i)
                       : std::string_view::npos;
    if (close == std::string_view::npos) {
      out += s[i];
      continue;
    }
    std::string_view args = s.substr(i + 1, close - i - 1);
    std::string list;
    std::vector<std::string> before;
    size_t from = 0;
    int depth = 0;
    for (size_t k = 0; k <= args.size(); ++k) {
      char c = k < args.size() ? args[k] : ',';
      if (c == '<' || c == '(')
        ++depth;
      else if (c == '>' || c == ')')
        --depth;
      if (c != ',' || depth != 0)
        continue;
      std::string arg = without_defaults(args.substr(from, k - from));
      if (before.empty() || !is_default_argument(arg, before))
        list += (list.empty() ? "" : ",") + arg;
      before.push_back(std::move(arg));
      from = k + 1;
    }
    out += "<" + list + ">";
    i = close;
  }
  return out;
}

} // namespace

std::string canonical_cxx_name(std::string_view name) {
  std::string s;
  s.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    if (name.substr(i, 9) == "__cxx11::") {
      i += 8;
      continue;
    }
    if (name.substr(i, 5) == "__1::" && (i == 0 || !identifier_char(name[i - 1]))) {
      i += 4;
      continue;
    }
    // A space only separates two words ("unsigned long").
    if (name[i] == ' ' && !(i > 0 && identifier_char(name[i - 1]) && i + 1 < name.size() &&
                            identifier_char(name[i + 1])))
      continue;
    s += name[i];
  }
  // Each argument list is scanned for its end: bounded, as names are.
  if (s.size() <= 4096)
    s = without_defaults(s);
  for (size_t at; (at = s.find("std::basic_string<char>")) != std::string::npos;)
    s.replace(at, 23, "std::string");
  return s;
}

} // namespace memlayout::inspector
