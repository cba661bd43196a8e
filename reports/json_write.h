// Small helpers for the JSON renderers (llvm::json::OStream).
#pragma once

#include <llvm/Support/JSON.h>
#include <optional>

namespace memlayout::cli {

// "key": number, or "key": null when there is none.
inline void optional_number(llvm::json::OStream &j, const char *key,
                            const std::optional<double> &v) {
  j.attributeBegin(key);
  if (v)
    j.value(*v);
  else
    j.value(nullptr);
  j.attributeEnd();
}

} // namespace memlayout::cli
