// Zipf-distributed ranks in [1, n] with P(k) proportional to k^-theta, by
// rejection-inversion (Hörmann & Derflinger, "Rejection-inversion to generate
// variates from monotone discrete distributions", 1996): O(1) per sample, no
// table, exact for any theta > 0 (YCSB's approximation is only for theta < 1).
#pragma once

#include "random.h"

#include <cstdint>

namespace memlayout::trees::bench {

class ZipfGenerator {
public:
  ZipfGenerator(uint64_t n, double theta);
  uint64_t operator()(Xoshiro256 &rng) const;
  uint64_t n() const { return n_; }
  double theta() const { return theta_; }

private:
  double h(double x) const;                  // the density's hat, x^-theta
  double h_integral(double x) const;         // its antiderivative
  double h_integral_inverse(double x) const; // and that one's inverse

  uint64_t n_;
  double theta_;
  double h_integral_x1_; // H(1.5) - 1
  double h_integral_n_;  // H(n + 0.5)
  double squeeze_;       // accept without the exact test when k - x <= this
};

// A fixed bijection of [1, n] that spreads neighbouring ranks over the key
// range (YCSB scrambles its Zipf keys for the same reason: otherwise the hot
// keys are adjacent and share a subtree): k -> 1 + (k - 1) * m mod n with m
// coprime to n.
class KeyScrambler {
public:
  explicit KeyScrambler(uint64_t n);
  uint64_t operator()(uint64_t rank) const {
    return 1 + static_cast<uint64_t>((static_cast<unsigned __int128>(rank - 1) * m_) % n_);
  }

private:
  uint64_t n_, m_;
};

} // namespace memlayout::trees::bench
