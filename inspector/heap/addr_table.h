// Address -> 64-bit value: the live set of a heap replay (heap_snapshot.cpp).
//
// Buckets of four slots, one cache line each, probed linearly bucket by
// bucket. Each bucket counts the entries that passed it full on the way to
// a later bucket (Folly F14's "overflow" counter): a lookup stops at the
// first bucket whose counter is zero, and an erase only clears its slot and
// decrements the counters it passed. Nothing ever shifts and there are no
// tombstones, so a churning heap (a free per allocation) costs about one
// line per operation, where linear probing with backward-shift deletion spent
// most of the replay walking probe runs. The load stays under 70%: every
// allocation first looks its (absent) address up, and that walks on to the
// next bucket whenever the home bucket's counter is non-zero (a quarter of
// the buckets at 70% load, over 40% at 80%). Address 0 marks an empty slot
// (allocations never return it; lookups of 0 find nothing).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memlayout::inspector {

class AddrTable {
public:
  explicit AddrTable(unsigned max_load_percent = 70) : max_load_(max_load_percent) { rehash(4); }

  // Room for n entries without growing.
  void reserve(size_t n) {
    size_t buckets = (n * 100 / max_load_ + kWays) / kWays;
    if (buckets > buckets_.size())
      rehash(buckets);
  }

  size_t size() const { return size_; }
  size_t bytes() const { return buckets_.size() * (sizeof(Bucket) + 1); }

  // Starts fetching the line a lookup of addr reads first.
  void prefetch(uint64_t addr) const { __builtin_prefetch(&buckets_[home(addr)]); }

  uint64_t *find(uint64_t addr) {
    if (addr == 0)
      return nullptr;
    for (size_t b = home(addr);; b = next(b)) {
      Bucket &k = buckets_[b];
      if (unsigned m = k.match(addr))
        return &k.value[std::countr_zero(m)];
      if (overflow_[b] == 0)
        return nullptr;
    }
  }

  void insert(uint64_t addr, uint64_t value) { // addr must be absent and non-zero
    if ((size_ + 1) * 100 > buckets_.size() * kWays * max_load_)
      rehash(buckets_.size() * 2);
    place(addr, value);
  }

  bool erase(uint64_t addr, uint64_t &value) {
    if (addr == 0)
      return false;
    size_t start = home(addr), b = start;
    unsigned m;
    while (!(m = buckets_[b].match(addr))) {
      if (overflow_[b] == 0)
        return false;
      b = next(b);
    }
    unsigned i = static_cast<unsigned>(std::countr_zero(m));
    value = buckets_[b].value[i];
    buckets_[b].addr[i] = 0;
    // A saturated counter no longer knows how many passed: it stays.
    for (size_t c = start; c != b; c = next(c))
      if (overflow_[c] != kSaturated)
        --overflow_[c];
    --size_;
    return true;
  }

  template <class F> void for_each_value(F &&f) { // f(addr, value&)
    for (Bucket &k : buckets_)
      for (unsigned i = 0; i < kWays; ++i)
        if (k.addr[i] != 0)
          f(k.addr[i], k.value[i]);
  }

  template <class F> void for_each(F &&f) const {
    for (const Bucket &k : buckets_)
      for (unsigned i = 0; i < kWays; ++i)
        if (k.addr[i] != 0)
          f(k.addr[i], k.value[i]);
  }

private:
  static constexpr unsigned kWays = 4;
  static constexpr uint8_t kSaturated = 255;

  struct alignas(64) Bucket {
    uint64_t addr[kWays];
    uint64_t value[kWays];

    unsigned match(uint64_t a) const {
      return unsigned{addr[0] == a} | unsigned{addr[1] == a} << 1 | unsigned{addr[2] == a} << 2 |
             unsigned{addr[3] == a} << 3;
    }
  };

  // Any bucket count works: the home bucket is a multiply-high of the hash.
  size_t home(uint64_t addr) const {
    uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * buckets_.size()) >> 64);
  }
  size_t next(size_t b) const { return b + 1 == buckets_.size() ? 0 : b + 1; }

  void place(uint64_t addr, uint64_t value) {
    for (size_t b = home(addr);; b = next(b)) {
      Bucket &k = buckets_[b];
      if (unsigned m = k.match(0)) {
        unsigned i = static_cast<unsigned>(std::countr_zero(m));
        k.addr[i] = addr;
        k.value[i] = value;
        ++size_;
        return;
      }
      if (overflow_[b] != kSaturated)
        ++overflow_[b];
    }
  }

  void rehash(size_t buckets) {
    std::vector<Bucket> old;
    old.swap(buckets_);
    buckets_.assign(std::max<size_t>(buckets, 1), Bucket{});
    overflow_.assign(buckets_.size(), 0);
    size_ = 0;
    for (const Bucket &k : old)
      for (unsigned i = 0; i < kWays; ++i)
        if (k.addr[i] != 0)
          place(k.addr[i], k.value[i]);
  }

  unsigned max_load_;
  std::vector<Bucket> buckets_;
  std::vector<uint8_t> overflow_;
  size_t size_ = 0;
};

} // namespace memlayout::inspector
