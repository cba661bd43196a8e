// The HTM trees' options and statistics as memlayout-bench and ycsb-lite
// take and print them (docs/htm.md): --htm, --htm-l1, --htm-retries,
// --node-bytes, --key-bytes, --value-bytes, --euno-control; the `htm`
// object of their JSON and its text lines.
#pragma once

#include "htm/htm_config.h"
#include "htm/htm_stats.h"
#include "json_writer.h"

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace memlayout::trees::bench {

// nullopt when `name` is not an HTM option; else "" or what is wrong.
std::optional<std::string> apply_htm_option(std::string_view name, std::string_view value,
                                            htm::HtmTreeOptions &o);
// The options' lines of --help.
const char *htm_usage();
// The trees the options apply to.
bool is_htm_tree(std::string_view tree);

void print_htm_text(const htm::HtmReport &r, uint64_t ops, std::ostream &out);
// "htm": {...} inside the caller's open object.
void write_htm_json(JsonWriter &j, const htm::HtmReport &r, const htm::HtmTreeOptions &o,
                    uint64_t ops);

} // namespace memlayout::trees::bench
