// Reading a JSON file a user hands a command (a report for diff and advise,
// a type map): llvm::json's parser, behind a nesting limit. The parser
// recurses once per level, so a file of a few hundred KB nested 60 000 deep
// overflowed the stack; nothing memlayout reads nests more than a dozen.
#pragma once

#include <llvm/Support/JSON.h>

#include <optional>
#include <string>
#include <string_view>

namespace memlayout::inspector {

inline constexpr size_t kMaxJsonNesting = 256;

// The document, or nullopt with `error` ("NAME: offset N: nested deeper than
// 256 levels", "NAME: not JSON: ...").
std::optional<llvm::json::Value> parse_json_input(std::string_view text, const std::string &name,
                                                  std::string &error);

} // namespace memlayout::inspector
