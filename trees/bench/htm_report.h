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

void print_htm_text(const htm::HtmReport &r, uint64_t ops, std::ostream &out);
// The "htm" object.
cli::Json htm_json(const htm::HtmReport &r, const htm::HtmTreeOptions &o, uint64_t ops);

} // namespace memlayout::trees::bench
