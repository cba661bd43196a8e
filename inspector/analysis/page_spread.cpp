#include "page_spread.h"

#include <algorithm>

namespace memlayout::inspector {

namespace {

// Pages are about what the allocator reserved, so the usable size; a trace
// without it (0) falls back to the requested size, and an empty object still
// occupies the byte at its address.
uint64_t extent_of(const LiveObject &o) {
  return std::max<uint64_t>(o.usable ? o.usable : o.size, 1);
}

uint64_t last_byte(const LiveObject &o, uint64_t extent) {
  return o.addr + std::min(extent - 1, UINT64_MAX - o.addr);
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Counts distinct units (pages or regions) of ascending [first, last] ranges,
// and the runs of consecutive ones.
struct UnitCounter {
  uint64_t units = 0, runs = 0, longest = 0;
  uint64_t last = 0, run_len = 0;
  bool any = false;

  void add(uint64_t first, uint64_t lastu) {
    if (any && lastu <= last)
      return; // already counted: the previous object reached this far
    uint64_t from = first;
    if (any && first <= last + 1) {
      from = std::max(first, last + 1);
      run_len += lastu - from + 1;
    } else {
      ++runs;
      run_len = lastu - from + 1;
    }
    units += lastu - from + 1;
    longest = std::max(longest, run_len);
    last = lastu;
    any = true;
  }
};

// Bytes of the group per page, in ascending page order, into the histogram.
struct FillCounter {
  uint64_t page_size;
  std::array<uint64_t, 10> &hist;
  uint64_t page = 0, bytes = 0;
  bool open = false;

  void close() {
    if (open)
      ++hist[std::min<uint64_t>(bytes * 10 / page_size, 9)];
    open = false;
  }
  void add(uint64_t p, uint64_t b) {
    // p < page only with overlapping objects; keep the bytes on the open page
    // rather than counting a page twice.
    if (open && p <= page) {
      bytes += b;
      return;
    }
    close();
    page = p;
    bytes = b;
    open = true;
  }
};

// The page size (4096 when unknown) and a region of at least one page.
std::pair<uint64_t, uint64_t> page_and_region(const PageSpreadOptions &opts) {
  const uint64_t ps = opts.page_size ? opts.page_size : 4096;
  return {ps, std::max(opts.region_size, ps)};
}

} // namespace

PageSpread analyse_page_spread(const HeapSnapshot &snapshot, const Group &group,
                               const PageSpreadOptions &opts) {
  PageSpread out;
  const auto [ps, rs] = page_and_region(opts);
  out.page_size = ps;
  out.region_size = rs;

  // Objects the program asked aligned cannot pack closer than their
  // alignment: the one every object starts on, of a group that came through
  // an aligned entry point, is what it asked (glibc and jemalloc place each
  // at the first boundary that fits; a larger one at every object's address
  // by chance is vanishingly rare in a group large enough to judge).
  const std::vector<uint32_t> order = objects_by_address(snapshot, group);
  uint64_t align = 0;
  if (group.aligned_api) {
    align = rs;
    for (uint32_t idx : order)
      if (uint64_t a = snapshot.objects[idx].addr)
        align = std::min(align, a & (~a + 1));
  }
  uint64_t packed = 0; // bytes the group takes packed, each object on its own boundary
  uint64_t own_pages = 0;
  UnitCounter pages, regions;
  FillCounter fill{ps, out.fill_histogram};
  for (uint32_t idx : order) {
    const LiveObject &o = snapshot.objects[idx];
    const uint64_t extent = extent_of(o);
    const uint64_t end = last_byte(o, extent);
    ++out.objects;
    out.bytes += end - o.addr + 1;
    if (align > 1) {
      // What the program asked for, not the chunk: glibc's 72 usable bytes
      // of an aligned 64-byte request would round up to two alignments.
      const uint64_t asked = std::max<uint64_t>(o.size, 1);
      packed += ceil_div(asked, align) * align;
      own_pages += ceil_div(asked, ps);
    }
    const uint64_t p0 = o.addr / ps, p1 = end / ps;
    pages.add(p0, p1);
    regions.add(o.addr / rs, end / rs);
    if (p0 == p1) {
      fill.add(p0, end - o.addr + 1);
    } else {
      fill.add(p0, (p0 + 1) * ps - o.addr);
      fill.hist[9] += p1 - p0 - 1; // the interior pages are full
      fill.add(p1, end - p1 * ps + 1);
    }
  }
  fill.close();

  out.pages = pages.units;
  out.page_runs = pages.runs;
  out.longest_run = pages.longest;
  out.regions = regions.units;
  out.pages_min = align >= ps ? own_pages : ceil_div(align > 1 ? packed : out.bytes, ps);
  out.regions_min = ceil_div(out.bytes, rs);
  if (out.pages) {
    out.spread = static_cast<double>(out.pages) / static_cast<double>(out.pages_min);
    out.mean_fill = std::min(1.0, static_cast<double>(out.bytes) /
                                      (static_cast<double>(out.pages) * static_cast<double>(ps)));
  }
  return out;
}

ChunkMap chunk_map(const HeapSnapshot &snapshot, const Group &group, const PageSpreadOptions &opts,
                   size_t max_regions) {
  ChunkMap out;
  const auto [ps, rs] = page_and_region(opts);
  out.page_size = ps;
  out.region_size = rs;
  const uint64_t ppr = rs / ps;
  out.pages_per_region = static_cast<uint32_t>(ppr);
  out.words_per_region = static_cast<uint32_t>(ceil_div(ppr, 64));

  for (uint32_t idx : objects_by_address(snapshot, group)) {
    const LiveObject &o = snapshot.objects[idx];
    const uint64_t end = last_byte(o, extent_of(o));
    for (uint64_t p = o.addr / ps; p <= end / ps; ++p) {
      const uint64_t base = p / ppr * rs;
      size_t r;
      if (out.regions.empty() || base > out.regions.back()) {
        if (out.regions.size() == max_regions)
          return out; // objects come by address: nothing later is among the first
        out.regions.push_back(base);
        out.bits.resize(out.bits.size() + out.words_per_region, 0);
        r = out.regions.size() - 1;
      } else {
        // Only overlapping objects step back into an earlier region.
        r = std::lower_bound(out.regions.begin(), out.regions.end(), base) - out.regions.begin();
        if (r == out.regions.size() || out.regions[r] != base)
          continue;
      }
      const uint64_t in_region = p % ppr;
      out.bits[r * out.words_per_region + in_region / 64] |= 1ull << (in_region % 64);
      if (p == UINT64_MAX)
        break;
    }
  }
  return out;
}

} // namespace memlayout::inspector
