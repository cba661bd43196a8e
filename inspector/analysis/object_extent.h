// The bytes of an object that an analysis counts: the whole object, or the
// hot part `--hot` names. That part starts where the group's record starts,
// which is not the object's first byte when the record sits behind a header
// (make_shared's control block).
#pragma once

#include <algorithm>
#include <cstdint>

namespace memlayout::inspector {

// [addr, addr + bytes).
struct ObjectExtent {
  uint64_t addr = 0;
  uint64_t bytes = 0;
};

struct HotRange {
  uint64_t offset = 0; // into each object
  uint64_t bytes = 0;  // 0: the whole object

  explicit operator bool() const { return bytes != 0; }

  // An object's hot part, cut to the object.
  ObjectExtent of(uint64_t addr, uint64_t size) const {
    if (!bytes)
      return {addr, size};
    uint64_t skip = std::min(offset, size);
    return {addr + skip, std::min(bytes, size - skip)};
  }
};

} // namespace memlayout::inspector
