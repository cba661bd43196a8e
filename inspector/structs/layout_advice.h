// What is risky about a record's layout once an allocator places it, and
// what to change: reorder its fields, pad it, align it. Pure functions of a
// RecordLayout, its placements and its allocation sites (docs/structs.md,
// "Risks and suggestions").
#pragma once

#include "record_layout.h"
#include "record_placement.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memlayout::inspector {

struct Risk {
  // lock_shares_line, atomic_shares_line, neighbour_sharing, padding_short,
  // padding_unaligned, field_straddles, malloc_ignores_alignment
  std::string kind;
  std::string severity;            // high, medium, low
  std::vector<std::string> fields; // the members concerned, the culprit first
  std::string message;
};

struct Suggestion {
  std::string kind;               // reorder, pad, align
  uint64_t size = 0;              // the record's size after the change
  std::vector<std::string> order; // reorder: every data member in its new order
  std::string message;
};

struct RecordAdvice {
  std::vector<Risk> risks;
  std::vector<Suggestion> suggestions;
};

// `placements` as place() gives them; `sites` the allocation sites of this
// record (any others are ignored).
RecordAdvice advise(const RecordLayout &r, const std::vector<Placement> &placements,
                    uint32_t line_size, std::span<const AllocSite> sites);

} // namespace memlayout::inspector
