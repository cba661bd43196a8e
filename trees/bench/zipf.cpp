#include "zipf.h"

#include <cmath>
#include <numeric>

namespace memlayout::trees::bench {
namespace {

// log(1 + x) / x and (exp(x) - 1) / x, accurate near 0 where the plain
// formulas cancel.
double log1p_over_x(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x / 2; }
double expm1_over_x(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2; }

} // namespace

ZipfGenerator::ZipfGenerator(uint64_t n, double theta) : n_(n), theta_(theta) {
  h_integral_x1_ = h_integral(1.5) - 1;
  h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
  squeeze_ = 2 - h_integral_inverse(h_integral(2.5) - h(2));
}

double ZipfGenerator::h(double x) const { return std::exp(-theta_ * std::log(x)); }

// (x^(1-theta) - 1) / (1 - theta), and log x at theta = 1, in one formula.
double ZipfGenerator::h_integral(double x) const {
  double log_x = std::log(x);
  return expm1_over_x((1 - theta_) * log_x) * log_x;
}

double ZipfGenerator::h_integral_inverse(double x) const {
  double t = x * (1 - theta_);
  if (t < -1)
    t = -1; // rounding can step just outside the domain
  return std::exp(log1p_over_x(t) * x);
}

uint64_t ZipfGenerator::operator()(Xoshiro256 &rng) const {
  for (;;) {
    double u = h_integral_n_ + rng.unit() * (h_integral_x1_ - h_integral_n_);
    double x = h_integral_inverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1)
      k = 1;
    else if (k > static_cast<double>(n_))
      k = static_cast<double>(n_);
    if (k - x <= squeeze_ || u >= h_integral(k + 0.5) - h(k))
      return static_cast<uint64_t>(k);
  }
}

KeyScrambler::KeyScrambler(uint64_t n) : n_(n) {
  // A multiplier near n times the golden ratio's fraction, moved to the next
  // value coprime with n.
  m_ = n > 2 ? static_cast<uint64_t>(static_cast<double>(n) * 0.6180339887498949) : 1;
  while (m_ > 1 && std::gcd(m_, n_) != 1)
    ++m_;
}

} // namespace memlayout::trees::bench
