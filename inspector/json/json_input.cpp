#include "json_input.h"

namespace memlayout::inspector {

std::optional<llvm::json::Value> parse_json_input(std::string_view text, const std::string &name,
                                                  std::string &error) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonNesting) {
        error = name + ": offset " + std::to_string(i) + ": nested deeper than " +
                std::to_string(kMaxJsonNesting) + " levels (not a file memlayout wrote)";
        return std::nullopt;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  llvm::Expected<llvm::json::Value> doc =
      llvm::json::parse(llvm::StringRef(text.data(), text.size()));
  if (!doc) {
    error = name + ": not JSON: " + llvm::toString(doc.takeError());
    return std::nullopt;
  }
  return std::move(*doc);
}

} // namespace memlayout::inspector
