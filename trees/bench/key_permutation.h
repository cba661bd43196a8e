// A pseudo-random permutation of [0, n) that needs no memory: a 4-round
// Feistel network over the smallest even-bit power-of-two domain holding n,
// walking the cycle until the value lands below n (fewer than 4 steps on
// average). The prefill draws its keys and their order from it, so any key
// range, up to 2^32 keys, costs nothing to shuffle.
#pragma once

#include <cstdint>

namespace memlayout::trees::bench {

class KeyPermutation {
public:
  KeyPermutation(uint64_t n, uint64_t seed) : n_(n) {
    half_bits_ = 1;
    while ((uint64_t{1} << (2 * half_bits_)) < n)
      ++half_bits_;
    mask_ = (uint64_t{1} << half_bits_) - 1;
    for (int r = 0; r < kRounds; ++r)
      keys_[r] = mix(seed + 0x632be59bd9b4e019ULL * static_cast<uint64_t>(r + 1));
  }

  uint64_t operator()(uint64_t i) const {
    uint64_t x = i;
    do
      x = encrypt(x);
    while (x >= n_);
    return x;
  }

private:
  static constexpr int kRounds = 4;
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t encrypt(uint64_t x) const {
    uint64_t left = x >> half_bits_, right = x & mask_;
    for (int r = 0; r < kRounds; ++r) {
      uint64_t next = left ^ (mix(right ^ keys_[r]) & mask_);
      left = right;
      right = next;
    }
    return left << half_bits_ | right;
  }

  uint64_t n_;
  int half_bits_;
  uint64_t mask_;
  uint64_t keys_[kRounds];
};

} // namespace memlayout::trees::bench
