#include "pool_layout.h"

#include "seg_page.h"
#include "set_occupancy.h"
#include "size_class.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <vector>

namespace memlayout::inspector {
namespace {

constexpr uint64_t kLine = 64;
constexpr uint64_t kL1Sets = 64;
constexpr uint64_t kPoolPage = seg::kPageBytes; // a pool's pages of small objects
constexpr uint64_t kPoolSmallMax =
    seg::kSmallMax; // larger objects: jemalloc's, in the pool's arena

uint64_t align_up(uint64_t v, uint64_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

// Objects placed by the layout the prediction imitates: at most this many
// (a few pages of small objects: every offset pattern repeats within one).
constexpr uint64_t kPredictedObjects = 4096;

} // namespace

uint64_t pool_stride(uint64_t size, uint64_t pad, uint64_t align) {
  uint64_t n = std::max<uint64_t>({size, pad, 1});
  if (align > 1)
    n = align_up(n, align);
  uint64_t c = jemalloc_size_class(n);
  // A class holds the alignments that divide its size; jemalloc serves
  // others at the next multiple.
  return align > 1 ? align_up(c, align) : c;
}

PoolLayout predict_pool_layout(uint64_t size, uint64_t pad, uint64_t align, uint64_t extent_offset,
                               uint64_t extent_bytes, uint64_t objects) {
  PoolLayout out;
  out.stride = pool_stride(size, pad, align);
  const uint64_t bytes = std::max<uint64_t>(extent_bytes, 1);
  const uint64_t n = std::min(objects, kPredictedObjects);
  if (!n)
    return out;
  // Small classes fill 64 KiB pages from their first byte; larger objects
  // follow one another in jemalloc's page-aligned extents.
  const uint64_t per_page =
      out.stride <= kPoolSmallMax ? std::max<uint64_t>(kPoolPage / out.stride, 1) : UINT64_MAX;
  const uint64_t need = (bytes + kLine - 1) / kLine;
  std::vector<uint32_t> histogram(kL1Sets);
  uint64_t straddling = 0;
  uint64_t next_line = 0; // lines below it are counted already
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t addr = per_page == UINT64_MAX
                        ? i * out.stride
                        : (i / per_page) * kPoolPage + (i % per_page) * out.stride;
    uint64_t first = (addr + extent_offset) / kLine;
    uint64_t last = (addr + extent_offset + bytes - 1) / kLine;
    straddling += last - first + 1 > need;
    // A line two neighbours share counts once, as the report counts it.
    for (uint64_t l = std::max(first, next_line); l <= last && l < first + kL1Sets; ++l)
      ++histogram[l % kL1Sets];
    next_line = std::max(next_line, last + 1);
  }
  out.straddle_fraction = static_cast<double>(straddling) / static_cast<double>(n);
  out.l1_set_fraction = effective_sets(histogram).fraction;
  return out;
}

uint64_t straddle_align(uint64_t end) { return std::clamp<uint64_t>(std::bit_ceil(end), 16, 64); }

uint64_t odd_stride_pad(uint64_t lines) {
  // An even number of lines reaches half of the sets at most, which the
  // finding still calls high: only an odd one (or a stride of no whole
  // lines) is a fix. jemalloc has none from 512 bytes up.
  for (uint64_t l = lines + 1; l <= 2 * lines + 1; ++l) {
    uint64_t pad = l * kLine;
    uint64_t stride = jemalloc_size_class(pad);
    if (stride % kLine != 0 || std::gcd(stride / kLine, kL1Sets) == 1)
      return pad;
  }
  return 0;
}

std::string keep_pool_layout(rules::Rule &rule, const GroupReport &g, const FindingThresholds &t,
                             bool *few_sets_left) {
  if (few_sets_left)
    *few_sets_left = false;
  if (!rule.pool[0] || g.group.program_pool)
    return {};
  const uint64_t offset = g.hot_bytes ? g.hot_offset : 0;
  const uint64_t bytes = g.hot_bytes ? g.hot_bytes : g.group.requested_size;
  const uint64_t size = std::max(g.group.requested_size, g.group.requested_max);
  const uint64_t objects = g.objects;
  if (!bytes || !objects)
    return {};
  auto predict = [&] {
    return predict_pool_layout(size, rule.pad, rule.align, offset, bytes, objects);
  };
  const bool judge_straddle = bytes <= t.straddle_max_bytes && objects >= t.min_objects;
  const uint64_t lines = objects * ((offset % kLine + bytes + kLine - 1) / kLine);
  const bool judge_sets = lines >= t.set_min_lines && objects >= t.min_objects;
  auto straddles = [&](const PoolLayout &p) {
    return judge_straddle && p.straddle_fraction >= t.straddle_medium;
  };
  auto few_sets = [&](const PoolLayout &p) {
    return judge_sets && p.l1_set_fraction && *p.l1_set_fraction < t.set_fraction_medium;
  };
  std::string why;
  PoolLayout p = predict();
  if (straddles(p)) {
    const uint64_t align = offset + bytes <= kLine ? straddle_align(offset + bytes) : kLine;
    why = "align=" + std::to_string(std::max(rule.align, align)) + ": the pool's " +
          std::to_string(p.stride) + "-byte class would leave " +
          std::to_string(static_cast<int>(p.straddle_fraction * 100 + 0.5)) +
          "% of the objects across a line boundary";
    rule.align = std::max(rule.align, align);
    p = predict();
  }
  if (few_sets(p)) {
    // The objects' stride in whole lines; padding to an odd number of them
    // (the set_underutilization fix's padding) visits every set.
    const uint64_t stride_lines = (p.stride + kLine - 1) / kLine;
    uint64_t best = odd_stride_pad(stride_lines);
    if (best) {
      best = std::max(best, rule.pad);
      PoolLayout q = predict_pool_layout(size, best, rule.align, offset, bytes, objects);
      if (few_sets(q) || straddles(q))
        best = 0;
    }
    std::string sets =
        std::to_string(static_cast<int>(*p.l1_set_fraction * 100 + 0.5)) + "% of the L1 sets";
    std::string what = "the pool's class puts the objects " + std::to_string(p.stride) +
                       " bytes apart, on " + sets;
    if (best) {
      rule.pad = best;
      why += (why.empty() ? "" : "; ") + ("pad=" + std::to_string(best) + ": " + what);
    } else {
      why += (why.empty() ? "" : "; ") + ("no padding helps: " + what);
      if (few_sets_left)
        *few_sets_left = true;
    }
  }
  return why;
}

} // namespace memlayout::inspector
