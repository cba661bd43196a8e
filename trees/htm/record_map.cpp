#include "record_map.h"

#include <mutex>

namespace memlayout::trees::htm {

void RecordMap::add(const void *p, size_t size, uint32_t kind) {
  auto base = reinterpret_cast<uint64_t>(p);
  std::unique_lock g(mutex_);
  by_base_[base] = Hit{kind, base, size};
}

void RecordMap::remove(const void *p) {
  std::unique_lock g(mutex_);
  by_base_.erase(reinterpret_cast<uint64_t>(p));
}

void RecordMap::clear() {
  std::unique_lock g(mutex_);
  by_base_.clear();
}

bool RecordMap::find(uint64_t addr, Hit *hit) const {
  std::shared_lock g(mutex_);
  auto it = by_base_.upper_bound(addr);
  if (it == by_base_.begin())
    return false;
  --it;
  if (addr >= it->second.base + it->second.size)
    return false;
  *hit = it->second;
  return true;
}

} // namespace memlayout::trees::htm
