// What `memlayout structs` says about a set of records and allocation
// sites: each record's layout, where the allocators put it, its risks and
// the suggested fixes. Its JSON form (schema memlayout.structs/1) is the
// type map `memlayout report --types` reads back (type_map.h).
#pragma once

#include "layout_advice.h"
#include "record_layout.h"
#include "record_placement.h"

#include <cstdint>
#include <string>
#include <vector>

namespace memlayout::inspector {

inline constexpr const char *kStructsSchema = "memlayout.structs/1";

struct RecordReport {
  RecordLayout layout;
  std::vector<Placement> placements; // jemalloc, glibc
  RecordAdvice advice;
};

struct StructsReport {
  uint32_t line_size = 64;
  std::vector<RecordReport> records;
  std::vector<AllocSite> sites;
  std::vector<std::string> failed; // files that did not compile
};

StructsReport analyse_structs(std::vector<RecordLayout> records, std::vector<AllocSite> sites,
                              uint32_t line_size);

// Whether `name` selects the record: its full name or its last scopes,
// either with or without its own template arguments ("Node" and
// "Tree<int>::Node" select "ns::Tree<int>::Node", "Tree" "ns::Tree<int>").
bool record_selected(const std::string &record, const std::string &name);
// The same for either of the record's names: as printed, or as spelled.
bool record_selected(const RecordLayout &record, const std::string &name);

} // namespace memlayout::inspector
