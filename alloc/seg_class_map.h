// Which magazine class the object starting in each page of a pool's range
// has, so that a free finds it without asking jemalloc (sallocx).
//
// One byte per 4 KiB page: class + 1, or 0 for "not a magazine class" (large
// objects, or never set). Written when jemalloc hands the engine an object
// (every object of a pool passes through the engine's calls first), read
// when the object is freed. That is exact: a page cannot change hands
// between slabs of different classes, or become a large object's first
// page, while an object starting on it is live, and every object a
// magazine hands out again is still live as far as jemalloc knows.
//
// The map covers whole gigabytes (the owner table's granule), so a pointer
// anywhere in a pool's gigabytes reads a valid entry; it is indexed by
// address >> 12 directly, so a free needs no pool field to find it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::seg {

class ClassMap {
public:
  static constexpr unsigned kPageShift = 12;
  static constexpr uint8_t kNone = 0;
  using Entry = std::atomic<uint8_t>;

  // Maps one entry per page of [begin, begin + bytes) (NORESERVE: only
  // entries in use are backed). False when the mapping fails.
  bool reserve(uintptr_t begin, size_t bytes);
  void release();

  // Entries indexed by address >> kPageShift (valid inside the reserved span).
  Entry *by_page() const { return by_page_; }

  static uint8_t get(const Entry *by_page, const void *p) {
    return by_page[reinterpret_cast<uintptr_t>(p) >> kPageShift].load(std::memory_order_relaxed);
  }
  void set(const void *p, uint8_t value) {
    Entry &e = by_page_[reinterpret_cast<uintptr_t>(p) >> kPageShift];
    if (e.load(std::memory_order_relaxed) != value) // keep shared lines clean
      e.store(value, std::memory_order_relaxed);
  }

private:
  Entry *entries_ = nullptr;
  Entry *by_page_ = nullptr; // entries_ - (begin >> kPageShift)
  size_t bytes_ = 0;
};

} // namespace memlayout::seg
