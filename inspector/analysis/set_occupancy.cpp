#include "set_occupancy.h"

#include <algorithm>
#include <cmath>

namespace memlayout::inspector {

namespace {

// How far (in standard deviations) an observation must sit from what uniform
// placement predicts before the estimator believes the deviation: 3 keeps
// random placement at 1.0 in all but ~0.1% of samples.
constexpr double kZ = 3.0;
// Below the domain size, the sample must already cover this much of the
// group's probability mass (Good-Turing) for the estimate to stand.
constexpr double kMinCoverage = 0.9;

constexpr uint64_t kPage = 4096;

// Lines of one object indexed one by one; past them (objects over 64 MiB:
// a buffer of 16 GiB would take seconds, a damaged size of 2^62 forever)
// the rest of the object is spread evenly over the sets, as a contiguous
// range that long covers every set alike.
constexpr uint64_t kLinesPerObjectIndexed = uint64_t{1} << 20;

// The object's last byte, within the address space however large its size.
uint64_t last_byte(const ObjectExtent &e) {
  return e.addr + std::min<uint64_t>(e.bytes - 1, UINT64_MAX - e.addr);
}

// (1 - 1/s)^n without the loss of 1 - 1/s for large s.
double stay_empty(double s, double n, double k = 1) {
  return k >= s ? 0.0 : std::exp(n * std::log1p(-k / s));
}

template <class ExtentAt>
SetOccupancy occupancy(size_t count, ExtentAt extent_at, const CacheLevel &level,
                       const AddressMap &map) {
  SetOccupancy r;
  r.level = level.level;
  r.objects = count;
  const unsigned lb = level.line_bits();
  const bool physical = level.indexing == Indexing::kPhysical;

  // Pass 1: the weakest knowledge among the pages the group touches decides
  // the basis, so that every line is indexed on the same bits.
  PageKnowledge weakest = PageKnowledge::kPhysical;
  if (physical) {
    for (size_t i = 0; i < count && weakest != PageKnowledge::kPageOffset; ++i) {
      ObjectExtent e = extent_at(i);
      if (e.bytes == 0)
        continue;
      uint64_t first = e.addr >> lb;
      uint64_t last = std::min(last_byte(e) >> lb, first + kLinesPerObjectIndexed - 1);
      for (uint64_t p = e.addr / kPage; p <= (last << lb) / kPage; ++p)
        weakest = std::min(weakest, map.translate(p * kPage).known);
    }
  }
  r.basis = set_basis(level, weakest);
  const SetIndexer indexer(level, r.basis);
  r.histogram.assign(r.basis.domain, 0);

  // Pass 2: one translation per page, one histogram increment per line.
  uint64_t prev_line = UINT64_MAX;
  uint64_t cur_page = UINT64_MAX;
  Translation page_t;
  for (size_t i = 0; i < count; ++i) {
    ObjectExtent e = extent_at(i);
    if (e.bytes == 0)
      continue;
    uint64_t first = e.addr >> lb, last = last_byte(e) >> lb;
    if (last - first >= kLinesPerObjectIndexed) {
      uint64_t rest = last - first + 1 - kLinesPerObjectIndexed;
      last = first + kLinesPerObjectIndexed - 1;
      const size_t domain = r.histogram.size();
      for (size_t set = 0; set < domain; ++set) {
        uint64_t add = rest / domain + (set < rest % domain ? 1 : 0);
        r.histogram[set] =
            static_cast<uint32_t>(std::min<uint64_t>(uint64_t{r.histogram[set]} + add, UINT32_MAX));
      }
      r.lines += rest;
      if (physical)
        r.lines_known[static_cast<int>(weakest)] += rest;
    }
    for (uint64_t line = first; line <= last; ++line) {
      if (line == prev_line)
        continue;
      prev_line = line;
      uint64_t va = line << lb;
      Translation t;
      if (physical) {
        if (va / kPage != cur_page) {
          cur_page = va / kPage;
          page_t = map.translate(cur_page * kPage);
        }
        t = page_t;
        t.pa += va % kPage;
        ++r.lines_known[static_cast<int>(t.known)];
      }
      uint32_t &count = r.histogram[indexer.index(va, t)];
      count += count != UINT32_MAX; // saturates, as the spread of a huge object does
      ++r.lines;
    }
  }
  for (uint32_t c : r.histogram)
    r.occupied += c != 0;
  r.effective = effective_sets(r.histogram);
  return r;
}

} // namespace

EffectiveSets effective_sets(std::span<const uint32_t> histogram) {
  EffectiveSets out;
  const double S = static_cast<double>(histogram.size());
  double N = 0, K = 0, f1 = 0, Q = 0;
  for (uint32_t c : histogram) {
    double x = c;
    N += x;
    K += c != 0;
    f1 += c == 1;
    Q += x * x;
  }
  if (histogram.empty() || N < static_cast<double>(kMinOccupancyLines))
    return out;

  // Good-Turing sample coverage: the share of the group's probability mass
  // that falls on sets already seen.
  const double coverage = 1.0 - f1 / N;
  if (N < S && coverage < kMinCoverage)
    return out;

  // Support. Uniform placement over all S sets leaves K occupied with known
  // mean and variance; a K inside that band cannot be told from a full spread.
  const double e_k = S * (1.0 - stay_empty(S, N));
  const double var_k = S * (S - 1) * stay_empty(S, N, 2) + S * stay_empty(S, N) -
                       S * S * stay_empty(S, N) * stay_empty(S, N);
  out.full_spread = K >= e_k - kZ * std::sqrt(std::max(var_k, 0.0));
  // Otherwise the coverage estimator for equally likely sets: the K seen sets
  // hold `coverage` of the mass, so K / coverage sets hold all of it.
  double m = S;
  if (!out.full_spread && coverage > 0)
    m = std::min(S, K / coverage);
  out.support = m;

  // Evenness within the support. Uniform placement over m sets gives
  // E[sum c^2] = N + N(N-1)/m with sd (N/m) sqrt(2(m-1)(1-1/N)) (Pearson's
  // statistic for equal cells). Only the excess beyond kZ sd counts as skew,
  // turned into the inverse Simpson number N(N-1) / (sum c^2 - N).
  const double mu = N + N * (N - 1) / m;
  const double sd = (N / m) * std::sqrt(2 * std::max(m - 1, 0.0) * (1 - 1 / N));
  const double excess = Q - kZ * sd;
  out.sets = excess > mu ? N * (N - 1) / (excess - N) : m;
  out.fraction = out.sets / S;
  return out;
}

SetOccupancy set_occupancy(std::span<const ObjectExtent> objects, const CacheLevel &level,
                           const AddressMap &map) {
  return occupancy(
      objects.size(), [&](size_t i) { return objects[i]; }, level, map);
}

SetOccupancy set_occupancy(const HeapSnapshot &snapshot, std::span<const uint32_t> objects,
                           HotRange hot, const CacheLevel &level, const AddressMap &map) {
  return occupancy(
      objects.size(),
      [&](size_t i) {
        const LiveObject &o = snapshot.objects[objects[i]];
        return hot.of(o.addr, o.size);
      },
      level, map);
}

} // namespace memlayout::inspector
