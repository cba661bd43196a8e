// The options memlayout-bench and ycsb-lite share, declared once on their
// option tables (cli/option_table.h): the tree and its layout and allocation
// policy, threads, duration, seed, output format, and the HTM trees' group.
#pragma once

#include "map.h"

#include <cstdint>
#include <string>

// Only the files that declare option tables include CLI11: its header
// defines validator objects in every file that includes it, which would be
// live, allocated, in every recorded heap of the program.
namespace CLI {
class App;
}

namespace memlayout::trees::bench {

// The names the options give a layout and an allocation policy.
const char *layout_name(Layout l);
const char *alloc_name(AllocPolicy a);

// The registered trees' names, space-separated.
std::string known_tree_names();

// --tree NAME, checked against the registry.
void add_tree_option(CLI::App &app, std::string &tree, const std::string &what);
// --threads N (1 to 1024), --duration S, --seed N.
void add_run_options(CLI::App &app, unsigned &threads, double &duration_s, uint64_t &seed,
                     const std::string &duration_what);
// --layout baseline|fixed, --alloc malloc|segregated.
void add_tree_config_options(CLI::App &app, TreeConfig &config, const std::string &alloc_what);

// The HTM trees' options (docs/htm.md) in a group of their own; the group is
// returned so that the caller can tell whether any was given.
CLI::App *add_htm_options(CLI::App &app, htm::HtmTreeOptions &o);
bool is_htm_tree(std::string_view tree);

// What is wrong with a tree choice after parsing, or "": none given, or HTM
// options for a tree that is not an HTM tree.
std::string check_tree_choice(const std::string &tree, const CLI::App *htm_group);

// What is wrong with the tree's configuration for that tree, or "": a
// --node-bytes its layout cannot hold.
std::string check_tree_config(const std::string &tree, const TreeConfig &config);

} // namespace memlayout::trees::bench
