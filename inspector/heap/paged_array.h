// An array of trivially copyable T in pages of its own mapping. Capacity is
// address space only (a page costs memory once written), growth moves the
// mapping with mremap instead of copying through a second buffer, and
// release() hands ranges no longer needed back to the system while the
// array lives: a pass that turns one large array into another (the replay's
// object slab into a snapshot's objects) then holds little more than the
// larger of the two at any moment.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <unistd.h>
#include <utility>

namespace memlayout::inspector {

template <class T> class PagedArray {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  PagedArray() = default;
  PagedArray(const PagedArray &) = delete;
  PagedArray &operator=(const PagedArray &) = delete;
  PagedArray(PagedArray &&o) noexcept { swap(o); }
  PagedArray &operator=(PagedArray &&o) noexcept {
    PagedArray gone;
    gone.swap(o);
    swap(gone);
    return *this;
  }
  ~PagedArray() {
    if (data_)
      ::munmap(data_, capacity_bytes());
  }

  size_t size() const { return size_; }
  T &operator[](size_t i) { return data_[i]; }
  const T &operator[](size_t i) const { return data_[i]; }
  T *begin() { return data_; }
  T *end() { return data_ + size_; }

  void reserve(size_t n) {
    if (n > capacity_)
      remap(n);
  }

  // A new element at the end, zeroed (a fresh page reads as zeros, a
  // released one too, but a slot once used and dropped by shrink() may not).
  T &emplace_back() {
    if (size_ == capacity_)
      remap(capacity_ ? capacity_ * 2 : std::max<size_t>(1, page_size() / sizeof(T)));
    T *p = new (data_ + size_++) T{};
    return *p;
  }

  void shrink(size_t n) { // n <= size()
    size_ = n;
  }

  // Returns the whole pages inside elements [from, to) to the system; they
  // read as zeros afterwards. Returns where a later release of the elements
  // after these should start: the element in the page not yet returned.
  size_t release(size_t from, size_t to) {
    uintptr_t page = page_size(), base = reinterpret_cast<uintptr_t>(data_);
    uintptr_t lo = (base + from * sizeof(T) + page - 1) & ~(page - 1);
    uintptr_t hi = (base + to * sizeof(T)) & ~(page - 1);
    if (from >= to || lo >= hi)
      return from;
    ::madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_DONTNEED);
    return (hi - base) / sizeof(T);
  }

private:
  static size_t page_size() {
    static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return size;
  }
  size_t capacity_bytes() const { return bytes_for(capacity_); }
  static size_t bytes_for(size_t n) {
    size_t page = page_size();
    return (n * sizeof(T) + page - 1) / page * page;
  }

  void remap(size_t n) {
    size_t bytes = bytes_for(n);
    void *p = data_ ? ::mremap(data_, capacity_bytes(), bytes, MREMAP_MAYMOVE)
                    : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw std::bad_alloc();
    data_ = static_cast<T *>(p);
    capacity_ = bytes / sizeof(T);
  }

  void swap(PagedArray &o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

  T *data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

} // namespace memlayout::inspector
