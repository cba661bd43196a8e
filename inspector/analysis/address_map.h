// What a trace says about the physical address behind a virtual one, and so
// which cache-set index bits of an object's lines are known.
//
// Physically indexed caches (L2, L3) index by physical bits. A trace knows
// them fully where the recorder read frame numbers (root), knows the bits
// below 21 on 2 MiB pages (virtual = physical there), and otherwise knows only
// the 4 KiB page offset, bits 0-11. Every set figure therefore comes with a
// SetBasis naming the bits it rests on (docs/cache-model.md).
#pragma once

#include "cache_model.h"
#include "heap_model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace memlayout::inspector {

// Ordered weakest first, so the weakest of several is their minimum.
enum class PageKnowledge : uint8_t {
  kPageOffset = 0, // 4 KiB page, no frame number: bits 0-11
  kHugePage = 1,   // on a 2 MiB page: bits 0-20
  kPhysical = 2,   // a frame number covers the page: every bit
};

struct Translation {
  PageKnowledge known = PageKnowledge::kPageOffset;
  bool huge = false; // on a 2 MiB page (smaps, or 512 aligned contiguous frames)
  // kPhysical: the physical address. Otherwise the virtual address, whose low
  // known_bits() equal the physical ones.
  uint64_t pa = 0;

  unsigned known_bits() const {
    return known == PageKnowledge::kPhysical ? 64 : known == PageKnowledge::kHugePage ? 21 : 12;
  }
};

// Built once per snapshot. translate() remembers its last hit, because the
// analyses walk objects in address order and consecutive lookups land in the
// same run; that makes it unsafe to share one AddressMap between threads.
class AddressMap {
public:
  AddressMap() = default; // no memory map: every address is kPageOffset
  explicit AddressMap(const MemoryMap &map);
  static AddressMap of(const HeapSnapshot &s) {
    return s.memory_map ? AddressMap(*s.memory_map) : AddressMap();
  }

  Translation translate(uint64_t va) const;

  bool has_frames() const { return !frames_.empty(); }
  bool has_huge_pages() const { return !huge_.empty() || any_huge_frames_; }
  // The most the map can say about any page: what a report's per-level
  // basis states before groups narrow it down.
  PageKnowledge best() const {
    return has_frames()     ? PageKnowledge::kPhysical
           : !huge_.empty() ? PageKnowledge::kHugePage
                            : PageKnowledge::kPageOffset;
  }

private:
  struct FrameSpan { // virtual [start, end) maps to physical pa_start..
    uint64_t start, end, pa_start;
  };
  struct Range {
    uint64_t start, end;
  };

  std::vector<FrameSpan> frames_; // sorted, disjoint
  std::vector<Range> huge_;       // 2 MiB-aligned chunks smaps says are huge
  bool any_huge_frames_ = false;
  mutable size_t last_frame_ = 0, last_huge_ = 0;
};

// Which bits a level's set index rests on.
enum class BasisKind : uint8_t {
  kVirtual,    // virtually indexed level: virtual bits, exact
  kPhysical,   // frame numbers: physical bits, exact
  kHugePage,   // 2 MiB pages: physical bits below 21
  kPageOffset, // 4 KiB pages without frames: bits 6-11, sets folded into colours
};

const char *basis_name(BasisKind k); // "virtual", "physical", "huge_page", "page_offset"

struct SetBasis {
  BasisKind kind = BasisKind::kPageOffset;
  unsigned low_bit = 0, high_bit = 0; // the index rests on address bits [low, high]
  // How many distinct indices exist on this basis: the level's sets, the sets
  // of one slice, or the colours the known bits define.
  uint32_t domain = 0;
  bool exact = false;        // domain == the level's sets: nothing folded
  bool slice_hashed = false; // index = slice * sets_per_slice + set, slice by XOR hash
  std::string text;          // for reports, e.g. "bits 6-11 (4 KiB pages, no frame numbers)"
};

// The basis for `level` when the weakest page knowledge among the lines is
// `weakest` (ignored for virtually indexed levels).
SetBasis set_basis(const CacheLevel &level, PageKnowledge weakest);

// Intel's LLC slice for 2, 4 or 8 slices (Maurice et al., RAID 2015: XOR of
// the physical bits under each mask). Other counts have no public mapping:
// returns -1.
int intel_slice(uint64_t pa, uint32_t slices);

// Maps a line to its index in [0, basis.domain).
class SetIndexer {
public:
  SetIndexer(const CacheLevel &level, const SetBasis &basis);
  // `va` the line's virtual address, `t` its translation.
  uint32_t index(uint64_t va, const Translation &t) const {
    uint64_t a = basis_ == BasisKind::kVirtual ? va : t.pa;
    uint64_t line = a >> line_bits_;
    uint32_t set =
        mask_ ? static_cast<uint32_t>(line & mask_) : static_cast<uint32_t>(line % modulus_);
    if (slices_)
      set += static_cast<uint32_t>(intel_slice(a, slices_)) * modulus_;
    return set;
  }

private:
  BasisKind basis_;
  unsigned line_bits_;
  uint64_t mask_ = 0;    // domain - 1 when the per-slice domain is a power of two
  uint32_t modulus_ = 1; // per-slice domain
  uint32_t slices_ = 0;  // nonzero when the slice hash applies
};

} // namespace memlayout::inspector
