// A pool's reserved address range and the extents carved from it.
//
// The range is reserved once (mmap, MAP_NORESERVE) and jemalloc's extent
// hooks carve extents out of it: from a list of extents given back first,
// else from a bump pointer. Nothing here takes a lock. The hooks run
// concurrently from any thread, sometimes under jemalloc's mutexes and
// sometimes under none, so a lock here would have to be ordered against
// jemalloc's at fork; instead every change is one compare-and-swap on a word
// that describes a whole extent, and a fork can never catch a half-made
// change.
//
// Memory model. The range is mapped readable and writable with
// MAP_NORESERVE: nothing is backed or charged until touched, commit costs
// nothing and the pool stays one VMA. Where the kernel refuses that (strict
// overcommit, vm.overcommit_memory=2, charges NORESERVE mappings in full)
// the range is reserved PROT_NONE instead and each carved extent is made
// accessible with mprotect ("strict" mode). Extents given back are purged
// (MADV_DONTNEED, or remapped PROT_NONE in strict mode), so carved memory is
// always zero.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::seg {

class Range {
public:
  static constexpr unsigned kFreeSlots = 128;
  // Extents and offsets are kept in pages in 32-bit fields.
  static constexpr size_t kMaxBytes = size_t{1} << 44;

  // Reserves `bytes` (a multiple of the page size) starting on a multiple of
  // `align` (a power of two). False with errno ENOMEM when the kernel refuses.
  bool reserve(size_t bytes, size_t align, bool huge_pages);
  // Unmaps the whole range; every extent carved from it is gone.
  void release();

  uintptr_t begin() const { return begin_.load(std::memory_order_relaxed); }
  size_t size() const { return size_.load(std::memory_order_relaxed); }
  bool contains(const void *p) const { return reinterpret_cast<uintptr_t>(p) - begin() < size(); }
  bool strict() const { return strict_; }

  // Leaves the first `bytes` of the range to another user: extents are
  // carved after them. Right after reserve().
  void keep_front(size_t bytes) { bump_.store(bytes, std::memory_order_relaxed); }

  // An extent of `bytes` (page multiple) aligned to `align` (a power of two,
  // at least a page), accessible and zero; at new_addr exactly when that is
  // not NULL. NULL when the range has no room.
  void *carve(void *new_addr, size_t bytes, size_t align);
  // Takes back an extent, purging its pages. False when there is no room to
  // remember it: the caller keeps it (its pages are purged all the same).
  bool give_back(void *addr, size_t bytes);

  // Pages handling for extents the range does not take back.
  bool commit(void *addr, size_t bytes);   // false on failure
  bool decommit(void *addr, size_t bytes); // false on failure
  static bool purge_lazy(void *addr, size_t bytes);
  static bool purge_forced(void *addr, size_t bytes);

  // Bytes carved and not given back.
  size_t held_bytes() const { return held_.load(std::memory_order_relaxed); }
  // Bytes given back that could not be remembered (address space only).
  size_t lost_bytes() const { return lost_.load(std::memory_order_relaxed); }
  // Bytes never carved yet, at the end of the range.
  size_t untouched_bytes() const { return size() - bump_.load(std::memory_order_relaxed); }

private:
  // A free extent as one word: page offset in the high half, page count in
  // the low half (never zero, so 0 means an empty slot).
  static uint64_t pack(size_t first_page, size_t pages) {
    return (static_cast<uint64_t>(first_page) << 32) | pages;
  }
  static size_t first_page(uint64_t v) { return static_cast<size_t>(v >> 32); }
  static size_t pages(uint64_t v) { return static_cast<size_t>(v & 0xffffffffu); }

  void *claim_free(size_t bytes, size_t align);
  void *claim_at(uintptr_t addr, size_t bytes);
  void *bump(size_t bytes, size_t align);
  bool remember(uintptr_t addr, size_t bytes);
  bool make_accessible(void *addr, size_t bytes);
  void make_inaccessible(void *addr, size_t bytes);

  std::atomic<uintptr_t> begin_{0};
  std::atomic<size_t> size_{0};
  std::atomic<size_t> bump_{0}; // offset of the first byte never carved
  std::atomic<size_t> held_{0};
  std::atomic<size_t> lost_{0};
  bool strict_ = false;
  bool huge_pages_ = false;
  std::atomic<uint64_t> free_[kFreeSlots] = {};
};

// Tests: reserve the next ranges PROT_NONE (strict mode) even where the
// kernel would grant a NORESERVE read-write mapping.
void force_strict_reservations(bool on);

} // namespace memlayout::seg
