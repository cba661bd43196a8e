// How many pages a group's objects occupy against how few a segregated
// allocator would need, and how contiguous they are. The study's node-chunk
// maps: tree nodes interleaved with application objects spread over many more
// 4 KiB pages (and TLB entries) than the nodes need; segregating them cut TLB
// misses by 61%.
#pragma once

#include "heap_model.h"

#include <array>
#include <cstdint>
#include <vector>

namespace memlayout::inspector {

struct PageSpreadOptions {
  uint64_t page_size = 4096;         // power of two
  uint64_t region_size = 2ull << 20; // the huge page; a power-of-two multiple of page_size
};

struct PageSpread {
  uint64_t page_size = 4096, region_size = 2ull << 20;
  uint64_t objects = 0;
  uint64_t bytes = 0;     // usable bytes (requested where usable is unknown)
  uint64_t pages = 0;     // pages overlapped by at least one object
  uint64_t pages_min = 0; // the group packed alone: ceil(bytes / page_size), each object of an
                          // aligned entry point on the boundary it asked for
  uint64_t regions = 0;   // 2 MiB regions overlapped
  uint64_t regions_min = 0;
  double spread = 0;        // pages / pages_min; 1 = as packed as it can be, 0 when empty
  uint64_t page_runs = 0;   // maximal runs of consecutive touched pages
  uint64_t longest_run = 0; // pages in the longest of them
  double mean_fill = 0;     // bytes / (pages * page_size): the average page's share of the group
  // Touched pages by how much of them the group fills: bucket i holds fills
  // in [i/10, (i+1)/10), a completely filled page in bucket 9.
  std::array<uint64_t, 10> fill_histogram{};
};

// One pass over the group in address order, O(n) (O(n log n) if its index
// list is not address-sorted); a page interior to a large object costs nothing.
PageSpread analyse_page_spread(const HeapSnapshot &snapshot, const Group &group,
                               const PageSpreadOptions &opts = {});

// For plotting: each region the group touches, with a bit per page set where
// the group has bytes.
struct ChunkMap {
  uint64_t page_size = 4096, region_size = 2ull << 20;
  uint32_t pages_per_region = 512;
  uint32_t words_per_region = 8; // 64-bit words of `bits` per region
  std::vector<uint64_t> regions; // base addresses, ascending
  std::vector<uint64_t> bits;    // regions.size() * words_per_region; bit p of
                                 // region r: word r*wpr + p/64, bit p%64
  bool holds(size_t region, uint32_t page) const {
    return (bits[region * words_per_region + page / 64] >> (page % 64)) & 1;
  }
};

// O(n + touched pages + regions * pages_per_region / 64), the pages only of
// the first `max_regions` regions (a plot's rows: one huge object need not
// be walked page by page); PageSpread::regions counts them all.
ChunkMap chunk_map(const HeapSnapshot &snapshot, const Group &group,
                   const PageSpreadOptions &opts = {}, size_t max_regions = SIZE_MAX);

} // namespace memlayout::inspector
