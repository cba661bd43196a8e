// Size classes of the allocators memlayout models: the one definition used by
// the recorder (usable sizes without a call per allocation) and the
// inspector (which class a request lands in, internal waste).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlayout {

// jemalloc 5.3 (LG_QUANTUM 4, 4 classes per doubling): 8, 16, 32, 48, ...,
// 128, 160, 192, 224, 256, 320, ... up to the huge classes. A request of n
// bytes from malloc/calloc/realloc gets exactly this usable size.
constexpr size_t jemalloc_size_class(size_t n) {
  if (n <= 8)
    return 8;
  if (n <= 128)
    return (n + 15) & ~size_t{15};
  unsigned lg = 63 - static_cast<unsigned>(__builtin_clzll(n - 1)); // floor(log2(n - 1))
  size_t delta = size_t{1} << (lg - 2);
  return (n + delta - 1) & ~(delta - 1);
}

// glibc 2.36 on 64-bit: a chunk of max(32, align16(n + 8)) bytes whose
// usable part is the chunk less its 8-byte size field (heap chunks). That is
// the floor and the common case: carving a chunk out of a free one whose
// remainder would be under 32 bytes hands out the whole, up to 31 bytes more.
// Requests of M_MMAP_THRESHOLD and more (128 KiB by default, adaptive) are
// mmapped instead: page-rounded, 16 bytes of header.
constexpr size_t glibc_chunk_size(size_t n) {
  size_t c = (n + 8 + 15) & ~size_t{15};
  return c < 32 ? 32 : c;
}
constexpr size_t glibc_usable_size(size_t n) { return glibc_chunk_size(n) - 8; }

// The usable size glibc recorded for a live chunk it handed out, from the
// chunk's size field (what malloc_usable_size computes, without the call).
inline size_t glibc_usable_from_header(const void *p) {
  size_t field = static_cast<const size_t *>(p)[-1];
  constexpr size_t kIsMmapped = 2, kFlagBits = 7;
  return (field & ~kFlagBits) - ((field & kIsMmapped) ? 16 : 8);
}

static_assert(jemalloc_size_class(1) == 8 && jemalloc_size_class(48) == 48 &&
              jemalloc_size_class(129) == 160 && jemalloc_size_class(257) == 320 &&
              jemalloc_size_class(1025) == 1280 && jemalloc_size_class(14337) == 16384);
static_assert(glibc_usable_size(0) == 24 && glibc_usable_size(24) == 24 &&
              glibc_usable_size(25) == 40 && glibc_usable_size(48) == 56);

} // namespace memlayout
