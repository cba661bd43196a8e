// The HTM trees' statistics as memlayout-bench and ycsb-lite print them
// (docs/htm.md): the `htm` object of their JSON and its text lines. Their
// options are in tree_options.h.
#pragma once

#include "htm/htm_config.h"
#include "htm/htm_stats.h"
#include "json_write.h"

#include <ostream>
#include <string>

namespace memlayout::trees::bench {

// Whose transactions the counts are: the measured run's, or with
// --duration 0 (no run) the prefill's (ycsb-lite: the load's), its inserts
// the operations.
enum class HtmPhase { kRun, kPrefill, kLoad };

void print_htm_text(const htm::HtmReport &r, uint64_t ops, std::ostream &out,
                    HtmPhase phase = HtmPhase::kRun);
// The "htm" object; `of` says the phase ("run", "prefill" or "load").
cli::Json htm_json(const htm::HtmReport &r, const htm::HtmTreeOptions &o, uint64_t ops,
                   HtmPhase phase = HtmPhase::kRun);

} // namespace memlayout::trees::bench
