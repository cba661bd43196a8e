#include "line_layout.h"

#include <algorithm>

namespace memlayout::inspector {

namespace {

std::vector<AddressStride> top_strides(const HeapSnapshot &snapshot,
                                       const std::vector<uint32_t> &order, uint32_t keep) {
  if (order.size() < 2 || keep == 0)
    return {};
  std::vector<uint64_t> diffs(order.size() - 1);
  for (size_t i = 1; i < order.size(); ++i)
    diffs[i - 1] = snapshot.objects[order[i]].addr - snapshot.objects[order[i - 1]].addr;
  std::sort(diffs.begin(), diffs.end());

  std::vector<AddressStride> runs;
  for (size_t i = 0; i < diffs.size();) {
    size_t j = i;
    while (j < diffs.size() && diffs[j] == diffs[i])
      ++j;
    runs.push_back({diffs[i], j - i, 0});
    i = j;
  }
  size_t kept = std::min<size_t>(keep, runs.size());
  std::partial_sort(runs.begin(), runs.begin() + kept, runs.end(),
                    [](const AddressStride &a, const AddressStride &b) {
                      return a.count != b.count ? a.count > b.count : a.bytes < b.bytes;
                    });
  runs.resize(kept);
  for (AddressStride &s : runs)
    s.share = static_cast<double>(s.count) / static_cast<double>(diffs.size());
  return runs;
}

} // namespace

LineLayout analyse_line_layout(const HeapSnapshot &snapshot, const Group &group,
                               const LineLayoutOptions &opts) {
  LineLayout out;
  const uint64_t line = opts.line_size ? opts.line_size : 64;
  out.line_size = static_cast<uint32_t>(line);
  out.hot = opts.hot;
  out.offset_histogram.assign(line, 0);
  out.straddling_by_offset.assign(line, 0);

  const std::vector<uint32_t> order = objects_by_address(snapshot, group);
  out.objects = order.size();
  if (order.empty())
    return out;

  uint64_t lines_total = 0, min_total = 0;
  for (uint32_t idx : order) {
    const LiveObject &o = snapshot.objects[idx];
    const ObjectExtent x = opts.hot.of(o.addr, o.size);
    // malloc(0) still hands out an address the program may touch: count the
    // line it starts on rather than none.
    const uint64_t extent = std::max<uint64_t>(x.bytes, 1);
    const uint64_t last = x.addr + std::min(extent - 1, UINT64_MAX - x.addr);
    const uint64_t lines = last / line - x.addr / line + 1;
    const uint64_t needed = extent / line + (extent % line != 0);
    lines_total += lines;
    min_total += needed;
    const uint64_t offset = x.addr % line;
    ++out.offset_histogram[offset];
    if (lines > needed) {
      ++out.straddling;
      ++out.straddling_by_offset[offset];
    }
  }
  const double n = static_cast<double>(out.objects);
  out.lines_per_object = static_cast<double>(lines_total) / n;
  out.min_lines_per_object = static_cast<double>(min_total) / n;
  out.straddle_fraction = static_cast<double>(out.straddling) / n;
  out.strides = top_strides(snapshot, order, opts.top_strides);
  return out;
}

std::vector<uint64_t> offset_buckets(const std::vector<uint64_t> &exact, uint32_t bucket_bytes) {
  if (bucket_bytes == 0)
    bucket_bytes = 1;
  std::vector<uint64_t> out((exact.size() + bucket_bytes - 1) / bucket_bytes, 0);
  for (size_t off = 0; off < exact.size(); ++off)
    out[off / bucket_bytes] += exact[off];
  return out;
}

} // namespace memlayout::inspector
