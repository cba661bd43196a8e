#include "seg_class_map.h"

#include <sys/mman.h>

namespace memlayout::seg {

bool ClassMap::reserve(uintptr_t begin, size_t bytes) {
  size_t map_bytes = (bytes >> kPageShift) * sizeof(Entry);
  void *p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return false;
  entries_ = static_cast<Entry *>(p);
  by_page_ = entries_ - (begin >> kPageShift);
  bytes_ = map_bytes;
  return true;
}

void ClassMap::release() {
  if (entries_)
    munmap(entries_, bytes_);
  entries_ = by_page_ = nullptr;
  bytes_ = 0;
}

} // namespace memlayout::seg
