#include "record_placement.h"

#include "size_class.h"

#include <algorithm>
#include <numeric>

namespace memlayout::inspector {
namespace {

uint64_t lines_needed(uint64_t size, uint32_t line_size) {
  return (size + line_size - 1) / line_size;
}

// The starts `first`, `first + step`, ... below the line, with what each
// does to the object and its fields.
void fill_starts(Placement &p, const RecordLayout &r, uint32_t line_size, uint64_t first,
                 uint64_t step) {
  p.min_lines = static_cast<uint32_t>(lines_needed(r.size, line_size));
  size_t straddling_starts = 0;
  for (uint64_t o = first % line_size; o < line_size; o += step) {
    LineStart s;
    s.offset = static_cast<uint32_t>(o);
    s.lines = static_cast<uint32_t>(lines_spanned(o, r.size, line_size));
    for (size_t i = 0; i < r.fields.size(); ++i) {
      const FieldLayout &f = r.fields[i];
      if (is_padding_member(f))
        continue; // nobody reads it
      if (lines_spanned(o + f.offset, f.size, line_size) > lines_needed(f.size, line_size))
        s.straddling.push_back(static_cast<uint32_t>(i));
    }
    straddling_starts += s.lines > p.min_lines;
    p.straddling_fields.insert(p.straddling_fields.end(), s.straddling.begin(), s.straddling.end());
    p.starts.push_back(std::move(s));
    if (step >= line_size)
      break;
  }
  std::sort(p.straddling_fields.begin(), p.straddling_fields.end());
  p.straddling_fields.erase(std::unique(p.straddling_fields.begin(), p.straddling_fields.end()),
                            p.straddling_fields.end());
  p.straddle_fraction = p.starts.empty() ? 0.0
                                         : static_cast<double>(straddling_starts) /
                                               static_cast<double>(p.starts.size());
}

// Types aligned beyond what malloc guarantees are taken to be allocated
// with their alignment (C++17 aligned new, aligned_alloc): their starts are
// multiples of it. A plain malloc of one is a risk of its own (layout_advice.h).
uint64_t aligned_step(uint64_t step, const RecordLayout &r, uint32_t line_size) {
  return std::max<uint64_t>(step, std::min<uint64_t>(r.align, line_size));
}

} // namespace

uint64_t lines_spanned(uint64_t offset, uint64_t size, uint32_t line_size) {
  if (size == 0)
    return 0;
  return (offset + size - 1) / line_size - offset / line_size + 1;
}

Placement place_jemalloc(const RecordLayout &r, uint32_t line_size) {
  Placement p;
  p.allocator = "jemalloc";
  p.slot = jemalloc_size_class(r.size);
  p.waste = p.slot - r.size;
  uint64_t step = p.slot <= kJemallocSmallMax ? std::gcd<uint64_t>(p.slot, line_size) : line_size;
  fill_starts(p, r, line_size, 0, aligned_step(step, r, line_size));
  return p;
}

Placement place_glibc(const RecordLayout &r, uint32_t line_size) {
  Placement p;
  p.allocator = "glibc";
  constexpr uint64_t kChunkAlign = 16, kPage = 4096;
  // glibc compares the chunk a request needs, not the request, with the
  // threshold: 131064 bytes (a 131072-byte chunk) are mmapped, where the
  // heap's top cannot serve them (it can only in a heap grown past them).
  const bool mmapped = glibc_chunk_size(r.size) >= kGlibcMmapThreshold;
  p.slot = mmapped ? (r.size + kChunkAlign + kPage - 1) / kPage * kPage : glibc_chunk_size(r.size);
  p.waste = p.slot - r.size;
  if (mmapped && r.align <= kChunkAlign)
    fill_starts(p, r, line_size, kChunkAlign, line_size); // one start: 16 bytes into a page
  else
    fill_starts(p, r, line_size, 0, aligned_step(kChunkAlign, r, line_size));
  return p;
}

std::vector<Placement> place(const RecordLayout &r, uint32_t line_size) {
  return {place_jemalloc(r, line_size), place_glibc(r, line_size)};
}

} // namespace memlayout::inspector
