// Where an allocator can put a record: the slot it takes (size class or
// chunk), and the offsets within a cache line its objects can start at,
// with the lines each start makes the object span and the fields it makes
// straddle a line. pahole assumes every object starts on a line; malloc
// does not.
//
// jemalloc 5.3: small regions lie at slab + i * class in page-aligned slabs,
// so the starts are the multiples of gcd(class, line), each as frequent as
// the next over a slab; larger objects are page aligned. glibc 2.36: user
// pointers are 16-byte aligned (a multiple of the type's alignment when it
// asks for more, through aligned new or aligned_alloc) and chunks follow one
// another at any 16-byte offset; requests at or over the mmap threshold
// (128 KiB by default) get their own mapping and start 16 bytes into a page.
#pragma once

#include "record_layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace memlayout::inspector {

struct LineStart {
  uint32_t offset = 0; // the object's start, modulo the line
  uint32_t lines = 0;  // lines the whole object spans from there
  // Indices into RecordLayout::fields of the members crossing a line they
  // would not cross from a line start (padding members left out).
  std::vector<uint32_t> straddling;
};

struct Placement {
  std::string allocator;  // "jemalloc", "glibc"
  uint64_t slot = 0;      // jemalloc: the size class; glibc: the chunk, its 8-byte header included
  uint64_t waste = 0;     // slot - size
  uint32_t min_lines = 0; // lines the object needs at best
  std::vector<LineStart> starts;           // ascending offset, each equally likely
  double straddle_fraction = 0;            // share of starts that span more than min_lines
  std::vector<uint32_t> straddling_fields; // at some start, ascending
};

inline constexpr uint64_t kGlibcMmapThreshold = 128 * 1024;
inline constexpr uint64_t kJemallocSmallMax = 14336; // the largest slab-allocated class

Placement place_jemalloc(const RecordLayout &r, uint32_t line_size);
Placement place_glibc(const RecordLayout &r, uint32_t line_size);
// Both, jemalloc first.
std::vector<Placement> place(const RecordLayout &r, uint32_t line_size);

// Lines [offset, offset + size) touches; a zero-size range touches none.
uint64_t lines_spanned(uint64_t offset, uint64_t size, uint32_t line_size);

} // namespace memlayout::inspector
