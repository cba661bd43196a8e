#include "address_map.h"

#include <algorithm>
#include <bit>
#include <numeric>

namespace memlayout::inspector {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kHuge = 2ull << 20;

// Maurice et al., "Reverse Engineering Intel Last-Level Cache Complex
// Addressing Using Performance Counters", RAID 2015: slice bit i is the parity
// of the physical address under mask i.
constexpr uint64_t kSliceMasks[3] = {0x1b5f575440ull, 0x2eb5faa880ull, 0x3cccc93100ull};

std::string bits(unsigned lo, unsigned hi) {
  return "bits " + std::to_string(lo) + "-" + std::to_string(hi);
}

// Binary search for the span containing va, trying the last hit first.
template <class T> const T *find_span(const std::vector<T> &v, size_t &last, uint64_t va) {
  if (v.empty())
    return nullptr;
  if (last < v.size() && va >= v[last].start && va < v[last].end)
    return &v[last];
  auto it =
      std::upper_bound(v.begin(), v.end(), va, [](uint64_t a, const T &s) { return a < s.start; });
  if (it == v.begin())
    return nullptr;
  --it;
  if (va >= it->end)
    return nullptr;
  last = static_cast<size_t>(it - v.begin());
  return &*it;
}

} // namespace

AddressMap::AddressMap(const MemoryMap &map) {
  for (const MapRegion &r : map.regions) {
    if (map.flags & trace::kMapPfns) {
      for (const PageRun &run : map.runs_of(r)) {
        if (run.npages == 0)
          continue;
        uint64_t start = r.start + run.first_page * kPage;
        uint64_t end = start + run.npages * kPage;
        uint64_t pa = run.pfn * kPage;
        frames_.push_back({start, std::min(end, r.end), pa});
        // A run spanning a whole 2 MiB virtual chunk whose frames start
        // 2 MiB-aligned is (almost surely) a huge page.
        uint64_t chunk = (start + kHuge - 1) & ~(kHuge - 1);
        if (chunk + kHuge <= end && ((pa + (chunk - start)) & (kHuge - 1)) == 0)
          any_huge_frames_ = true;
      }
    }
    // smaps gives only a per-region total; it tells which chunks are huge only
    // when it covers every 2 MiB-aligned chunk of the region (THP cannot map
    // the unaligned ends).
    uint64_t lo = (r.start + kHuge - 1) & ~(kHuge - 1);
    uint64_t hi = r.end & ~(kHuge - 1);
    if (r.anon_huge_kib && hi > lo && r.anon_huge_kib * 1024 >= hi - lo)
      huge_.push_back({lo, hi});
  }
  auto by_start = [](const auto &a, const auto &b) { return a.start < b.start; };
  std::sort(frames_.begin(), frames_.end(), by_start);
  std::sort(huge_.begin(), huge_.end(), by_start);
}

Translation AddressMap::translate(uint64_t va) const {
  Translation t;
  if (const FrameSpan *f = find_span(frames_, last_frame_, va)) {
    t.known = PageKnowledge::kPhysical;
    t.pa = f->pa_start + (va - f->start);
    uint64_t chunk = va & ~(kHuge - 1);
    t.huge = chunk >= f->start && chunk + kHuge <= f->end &&
             ((f->pa_start + (chunk - f->start)) & (kHuge - 1)) == 0;
    return t;
  }
  t.pa = va;
  if (find_span(huge_, last_huge_, va)) {
    t.known = PageKnowledge::kHugePage;
    t.huge = true;
  }
  return t;
}

const char *basis_name(BasisKind k) {
  switch (k) {
  case BasisKind::kVirtual:
    return "virtual";
  case BasisKind::kPhysical:
    return "physical";
  case BasisKind::kHugePage:
    return "huge_page";
  case BasisKind::kPageOffset:
    break;
  }
  return "page_offset";
}

int intel_slice(uint64_t pa, uint32_t slices) {
  int n = slices == 2 ? 1 : slices == 4 ? 2 : slices == 8 ? 3 : 0;
  if (n == 0)
    return -1;
  int s = 0;
  for (int i = 0; i < n; ++i)
    s |= std::popcount(pa & kSliceMasks[i]) % 2 << i;
  return s;
}

SetBasis set_basis(const CacheLevel &level, PageKnowledge weakest) {
  SetBasis b;
  const unsigned lb = level.line_bits();
  const unsigned ib = level.index_bits();
  const uint32_t sps = level.sets_per_slice();
  b.low_bit = lb;
  // Bits a non-power-of-two index (taken modulo) reaches into.
  const unsigned span = ib ? ib : static_cast<unsigned>(std::bit_width(sps - 1));

  if (level.indexing == Indexing::kVirtual) {
    b.kind = BasisKind::kVirtual;
    b.domain = level.sets;
    b.high_bit = lb + static_cast<unsigned>(std::bit_width(level.sets - 1)) - 1;
    b.exact = true;
    b.text = "virtual " + bits(b.low_bit, b.high_bit) + " (virtually indexed: exact)";
    return b;
  }

  const std::string slice_note =
      level.slices > 1 ? ", set within one of " + std::to_string(level.slices) + " slices" : "";

  if (weakest == PageKnowledge::kPhysical) {
    b.kind = BasisKind::kPhysical;
    b.high_bit = lb + span - 1;
    bool hashable = level.slices > 1 && ib && intel_slice(0, level.slices) >= 0;
    b.slice_hashed = hashable;
    b.domain = hashable ? level.sets : sps;
    b.exact = b.domain == level.sets;
    b.text = ib ? "physical " + bits(b.low_bit, b.high_bit) + " from frame numbers"
                : "physical line number modulo " + std::to_string(sps) + " from frame numbers";
    if (hashable)
      b.text += ", slice from Intel's " + std::to_string(level.slices) + "-slice XOR hash";
    else if (level.slices > 1)
      b.text += slice_note + " (the slice mapping for " + std::to_string(level.slices) +
                " slices is not public)";
    if (b.exact)
      b.text += " (exact)";
    return b;
  }

  const bool huge = weakest == PageKnowledge::kHugePage;
  const unsigned known = huge ? 21 : 12;
  b.kind = huge ? BasisKind::kHugePage : BasisKind::kPageOffset;
  const std::string why =
      huge ? "2 MiB pages: physical = virtual below bit 21" : "4 KiB pages, no frame numbers";
  if (ib && lb + ib <= known) {
    b.domain = sps;
    b.high_bit = lb + ib - 1;
    b.exact = level.slices == 1;
    b.text = bits(b.low_bit, b.high_bit) + " (" + why + ")" + slice_note;
    if (level.slices > 1)
      b.text += " (the slice needs frame numbers)";
    if (b.exact)
      b.text += " (exact)";
    return b;
  }
  // Only the low bits are known: the index folds onto the colours they
  // define. Taken modulo a set count that is not a power of two, the known
  // bits fix the set only modulo their common factor (800 sets: lines 32
  // apart in a page may share one, so 32 colours, not 64).
  uint32_t colours = known > lb ? 1u << (known - lb) : 1u;
  b.domain = std::gcd(colours, sps);
  b.high_bit = lb + static_cast<unsigned>(std::countr_zero(b.domain)) - 1;
  b.text = "rests on " + bits(b.low_bit, b.high_bit) + " (" + why +
           "): " + std::to_string(b.domain) + " colours of " + std::to_string(sps) + " sets" +
           slice_note;
  return b;
}

SetIndexer::SetIndexer(const CacheLevel &level, const SetBasis &basis)
    : basis_(basis.kind), line_bits_(level.line_bits()) {
  uint32_t per_slice = basis.domain;
  if (basis.slice_hashed) {
    slices_ = level.slices;
    per_slice = level.sets_per_slice();
  }
  modulus_ = per_slice ? per_slice : 1;
  if (std::has_single_bit(modulus_))
    mask_ = modulus_ - 1;
}

} // namespace memlayout::inspector
