#include "seg_range.h"

#include <cerrno>
#include <sys/mman.h>
#include <unistd.h>

namespace memlayout::seg {

namespace {

std::atomic<bool> g_force_strict{false};

constexpr size_t kPage = 4096;

uintptr_t align_up(uintptr_t v, size_t align) { return (v + align - 1) & ~(uintptr_t{align} - 1); }

void *map_fixed_none(void *addr, size_t bytes) {
  return mmap(addr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
              0);
}

} // namespace

void force_strict_reservations(bool on) { g_force_strict.store(on); }

namespace {

// `bytes` at a multiple of `align` without the slack the over-reservation
// takes, for an address space too small for it (RLIMIT_AS): where the kernel
// would put them, then the aligned places either side, if they are free.
void *map_aligned_in_place(size_t bytes, size_t align, int prot, int flags) {
  void *probe = mmap(nullptr, bytes, prot, flags, -1, 0);
  if (probe == MAP_FAILED)
    return MAP_FAILED;
  auto at = reinterpret_cast<uintptr_t>(probe);
  if (at % align == 0)
    return probe;
  munmap(probe, bytes);
  const uintptr_t down = at / align * align;
  for (uintptr_t want : {down, down + align, down - align}) {
    if (want == 0)
      continue;
    void *got =
        mmap(reinterpret_cast<void *>(want), bytes, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == reinterpret_cast<void *>(want))
      return got;
    if (got != MAP_FAILED) // a kernel without MAP_FIXED_NOREPLACE took it as a hint
      munmap(got, bytes);
  }
  return MAP_FAILED;
}

} // namespace

bool Range::reserve(size_t bytes, size_t align, bool huge_pages) {
  if (bytes == 0 || bytes > kMaxBytes || bytes % kPage || align < kPage) {
    errno = ENOMEM;
    return false;
  }
  // Over-reserve by the alignment and trim both ends.
  size_t span = bytes + align;
  if (span < bytes) {
    errno = ENOMEM;
    return false;
  }
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  bool strict = g_force_strict.load();
  void *raw = MAP_FAILED;
  if (!strict) {
    raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, kFlags, -1, 0);
    strict = raw == MAP_FAILED;
  }
  if (strict)
    raw = mmap(nullptr, span, PROT_NONE, kFlags, -1, 0);
  if (raw == MAP_FAILED) {
    raw = map_aligned_in_place(bytes, align, strict ? PROT_NONE : PROT_READ | PROT_WRITE, kFlags);
    span = bytes;
  }
  if (raw == MAP_FAILED) {
    errno = ENOMEM;
    return false;
  }
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = align_up(start, align);
  if (aligned > start)
    munmap(raw, aligned - start);
  if (uintptr_t tail = start + span - (aligned + bytes))
    munmap(reinterpret_cast<void *>(aligned + bytes), tail);
  if (huge_pages) // best effort: the kernel may have THP off
    madvise(reinterpret_cast<void *>(aligned), bytes, MADV_HUGEPAGE);
  strict_ = strict;
  huge_pages_ = huge_pages;
  bump_.store(0, std::memory_order_relaxed);
  held_.store(0, std::memory_order_relaxed);
  lost_.store(0, std::memory_order_relaxed);
  for (auto &slot : free_)
    slot.store(0, std::memory_order_relaxed);
  size_.store(bytes, std::memory_order_relaxed);
  begin_.store(aligned, std::memory_order_release);
  return true;
}

void Range::release() {
  if (size())
    munmap(reinterpret_cast<void *>(begin()), size());
  size_.store(0, std::memory_order_relaxed);
  begin_.store(0, std::memory_order_relaxed);
}

bool Range::make_accessible(void *addr, size_t bytes) {
  return !strict_ || mprotect(addr, bytes, PROT_READ | PROT_WRITE) == 0;
}

// Purged pages read back as zero; strict mode also returns their commit charge.
void Range::make_inaccessible(void *addr, size_t bytes) {
  if (!strict_) {
    madvise(addr, bytes, MADV_DONTNEED);
    return;
  }
  if (map_fixed_none(addr, bytes) != MAP_FAILED && huge_pages_)
    madvise(addr, bytes, MADV_HUGEPAGE); // a new mapping forgets the advice
}

void *Range::carve(void *new_addr, size_t bytes, size_t align) {
  if (bytes == 0 || bytes % kPage || bytes > size())
    return nullptr;
  if (align < kPage)
    align = kPage;
  void *p =
      new_addr ? claim_at(reinterpret_cast<uintptr_t>(new_addr), bytes) : claim_free(bytes, align);
  if (!p && !new_addr)
    p = bump(bytes, align);
  if (!p)
    return nullptr;
  if (!make_accessible(p, bytes)) {
    give_back(p, bytes);
    return nullptr;
  }
  held_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

// First fit among the extents given back; what is left of the chosen one on
// either side goes back to the list.
void *Range::claim_free(size_t bytes, size_t align) {
  const uintptr_t base = begin();
  for (auto &slot : free_) {
    uint64_t v = slot.load(std::memory_order_acquire);
    if (!v)
      continue;
    uintptr_t start = base + first_page(v) * kPage, end = start + pages(v) * kPage;
    uintptr_t at = align_up(start, align);
    if (at + bytes > end || at + bytes < at)
      continue;
    if (!slot.compare_exchange_strong(v, 0, std::memory_order_acq_rel))
      continue; // taken or changed meanwhile: look on
    if (at > start && !remember(start, at - start))
      lost_.fetch_add(at - start, std::memory_order_relaxed);
    if (end > at + bytes && !remember(at + bytes, end - at - bytes))
      lost_.fetch_add(end - at - bytes, std::memory_order_relaxed);
    return reinterpret_cast<void *>(at);
  }
  return nullptr;
}

// jemalloc asks for an address only to grow an extent in place: possible at
// the bump pointer or at the start of a free extent.
void *Range::claim_at(uintptr_t addr, size_t bytes) {
  const uintptr_t base = begin();
  if (addr < base || addr % kPage)
    return nullptr;
  size_t offset = addr - base;
  size_t cur = bump_.load(std::memory_order_relaxed);
  while (cur == offset && offset + bytes <= size() && offset + bytes > offset)
    if (bump_.compare_exchange_weak(cur, offset + bytes, std::memory_order_acq_rel))
      return reinterpret_cast<void *>(addr);
  for (auto &slot : free_) {
    uint64_t v = slot.load(std::memory_order_acquire);
    if (!v || first_page(v) * kPage != offset || pages(v) * kPage < bytes)
      continue;
    if (!slot.compare_exchange_strong(v, 0, std::memory_order_acq_rel))
      continue;
    size_t rest = pages(v) * kPage - bytes;
    if (rest && !remember(addr + bytes, rest))
      lost_.fetch_add(rest, std::memory_order_relaxed);
    return reinterpret_cast<void *>(addr);
  }
  return nullptr;
}

void *Range::bump(size_t bytes, size_t align) {
  const uintptr_t base = begin();
  const size_t limit = size();
  size_t cur = bump_.load(std::memory_order_relaxed);
  for (;;) {
    size_t at = align_up(base + cur, align) - base;
    if (at < cur || at > limit || limit - at < bytes)
      return nullptr;
    if (bump_.compare_exchange_weak(cur, at + bytes, std::memory_order_acq_rel)) {
      if (at > cur && !remember(base + cur, at - cur)) // the alignment gap
        lost_.fetch_add(at - cur, std::memory_order_relaxed);
      return reinterpret_cast<void *>(base + at);
    }
  }
}

bool Range::give_back(void *addr, size_t bytes) {
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (!bytes || bytes % kPage || a % kPage || !contains(addr) || a + bytes > begin() + size())
    return false;
  make_inaccessible(addr, bytes);
  if (!remember(a, bytes))
    return false;
  held_.fetch_sub(bytes, std::memory_order_relaxed);
  return true;
}

// Puts a purged extent on the free list, merged with free neighbours, or
// back under the bump pointer when it ends there.
bool Range::remember(uintptr_t addr, size_t bytes) {
  const uintptr_t base = begin();
  size_t first = (addr - base) / kPage, count = bytes / kPage;
  bool merged = true;
  while (merged) {
    merged = false;
    for (auto &slot : free_) {
      uint64_t v = slot.load(std::memory_order_acquire);
      if (!v || (first_page(v) + pages(v) != first && first + count != first_page(v)))
        continue;
      if (!slot.compare_exchange_strong(v, 0, std::memory_order_acq_rel))
        continue;
      if (first_page(v) < first)
        first = first_page(v);
      count += pages(v);
      merged = true;
    }
  }
  size_t end = (first + count) * kPage;
  size_t cur = end;
  if (bump_.compare_exchange_strong(cur, first * kPage, std::memory_order_acq_rel))
    return true;
  if (count <= 0xffffffffu) {
    uint64_t packed = pack(first, count);
    for (auto &slot : free_) {
      uint64_t empty = 0;
      if (slot.load(std::memory_order_relaxed) == 0 &&
          slot.compare_exchange_strong(empty, packed, std::memory_order_acq_rel))
        return true;
    }
  }
  // The neighbours merged in are lost with it; the caller accounts for its own part.
  lost_.fetch_add(count * kPage - bytes, std::memory_order_relaxed);
  return false;
}

bool Range::commit(void *addr, size_t bytes) { return make_accessible(addr, bytes); }

bool Range::decommit(void *addr, size_t bytes) {
  make_inaccessible(addr, bytes);
  return true;
}

bool Range::purge_lazy(void *addr, size_t bytes) { return madvise(addr, bytes, MADV_FREE) == 0; }

bool Range::purge_forced(void *addr, size_t bytes) {
  return madvise(addr, bytes, MADV_DONTNEED) == 0;
}

} // namespace memlayout::seg
