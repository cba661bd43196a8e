#include "heap_model.h"

#include <algorithm>

namespace memlayout::inspector {

bool same_site(const Group::Site &a, const Group::Site &b) {
  return a.function == b.function && a.file == b.file && a.line == b.line && a.caller == b.caller;
}

std::vector<uint32_t> objects_by_address(const HeapSnapshot &snapshot, const Group &group) {
  std::vector<uint32_t> order;
  order.reserve(group.objects.size());
  for (uint32_t idx : group.objects)
    if (idx < snapshot.objects.size())
      order.push_back(idx);
  auto addr_less = [&](uint32_t a, uint32_t b) {
    return snapshot.objects[a].addr < snapshot.objects[b].addr;
  };
  if (!std::is_sorted(order.begin(), order.end(), addr_less))
    std::sort(order.begin(), order.end(), addr_less);
  return order;
}

} // namespace memlayout::inspector
