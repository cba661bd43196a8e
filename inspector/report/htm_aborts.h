// Aborted transactions against the heap: each conflict's line and each
// capacity overflow's lines resolved to the objects (and so the groups) live
// at the report's moment, with the offsets in them. What the htm_* findings
// rest on (docs/findings.md).
#pragma once

#include "heap_model.h"
#include "report.h"
#include "trace_reader.h"

#include <optional>
#include <vector>

namespace memlayout::inspector {

// Empty when the trace records no aborted transaction.
std::optional<HtmAbortReport> analyse_htm_aborts(const TraceReader &r, const HeapSnapshot &snapshot,
                                                 const std::vector<Group> &groups);

} // namespace memlayout::inspector
