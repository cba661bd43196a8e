#include "seg_magazine.h"

#include "seg_mallocx.h"

#include <cstring>
#include <sys/mman.h>

namespace memlayout::seg {

using magazine_detail::kTables;

Magazine *magazine_create() {
  void *p =
      mmap(nullptr, sizeof(Magazine), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Magazine *>(p);
}

void magazine_destroy(Magazine *m) {
  if (m)
    munmap(m, sizeof(Magazine));
}

void magazine_spill(Magazine *m, unsigned c, int flags) {
  void **slots = m->slots + kTables.first_slot[c];
  uint32_t n = m->count[c], spilled = n / 2;
  for (uint32_t i = 0; i < spilled; ++i)
    mlje_sdallocx(slots[i], kTables.size[c], flags);
  memmove(slots, slots + spilled, (n - spilled) * sizeof *slots);
  m->count[c] = n - spilled;
}

void magazine_flush(Magazine *m, int flags) {
  for (unsigned c = 0; c < kMagazineClasses; ++c) {
    void **slots = m->slots + kTables.first_slot[c];
    for (uint32_t i = 0; i < m->count[c]; ++i)
      mlje_sdallocx(slots[i], kTables.size[c], flags);
    m->count[c] = 0;
  }
}

} // namespace memlayout::seg
