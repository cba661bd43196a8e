#include "tree_options.h"

#include "euno_bptree.h"
#include "option_table.h"

#include <charconv>

namespace memlayout::trees::bench {

using CC = htm::HtmTreeOptions::ConflictControl;

const char *layout_name(Layout l) { return l == Layout::kFixed ? "fixed" : "baseline"; }
const char *alloc_name(AllocPolicy a) {
  return a == AllocPolicy::kSegregated ? "segregated" : "malloc";
}

std::string known_tree_names() {
  std::string names;
  for (const TreeInfo &t : all_trees())
    names += (names.empty() ? "" : " ") + std::string(t.name);
  return names;
}

bool is_htm_tree(std::string_view tree) { return tree == "htm-bptree" || tree == "euno-bptree"; }

void add_tree_option(CLI::App &app, std::string &tree, const std::string &what) {
  app.add_option("--tree", tree, what)
      ->type_name("NAME")
      ->check(CLI::Validator(
          [](std::string &v) -> std::string {
            if (find_tree(v))
              return {};
            return "no tree named '" + v + "' (known: " + known_tree_names() + ")";
          },
          ""));
}

void add_run_options(CLI::App &app, unsigned &threads, double &duration_s, uint64_t &seed,
                     const std::string &duration_what) {
  app.add_option("--threads", threads, "worker threads")
      ->type_name("N")
      ->check(cli::whole_number(1, 1024, "a thread count"))
      ->capture_default_str();
  app.add_option("--duration", duration_s, duration_what)
      ->type_name("S")
      ->check(cli::real_number(0, 1e6, "seconds"))
      ->capture_default_str();
  app.add_option("--seed", seed, "random seed")
      ->type_name("N")
      ->check(cli::whole_number(0, UINT64_MAX, "an unsigned integer"))
      ->capture_default_str();
}

void add_tree_config_options(CLI::App &app, TreeConfig &config, const std::string &alloc_what) {
  app.add_option_function<std::string>(
         "--alloc",
         [&config](const std::string &v) {
           config.alloc = v == "segregated" ? AllocPolicy::kSegregated : AllocPolicy::kMalloc;
         },
         alloc_what + " (malloc)")
      ->type_name("malloc|segregated")
      ->check(cli::one_of({"malloc", "segregated"}));
  app.add_option_function<std::string>(
         "--layout",
         [&config](const std::string &v) {
           config.layout = v == "fixed" ? Layout::kFixed : Layout::kBaseline;
         },
         "baseline (the published layout) or fixed (the study's fixes) (baseline)")
      ->type_name("baseline|fixed")
      ->check(cli::one_of({"baseline", "fixed"}));
}

CLI::App *add_htm_options(CLI::App &app, htm::HtmTreeOptions &o) {
  CLI::App *g = app.add_option_group("HTM trees (htm-bptree, euno-bptree)");
  g->add_option_function<std::string>(
       "--htm",
       [&o](const std::string &v) {
         if (!htm::parse_backend(v, &o.htm.backend))
           throw cli::refused("--htm", "auto, rtm, emulate or lock", v);
       },
       "auto (RTM when this CPU has it, else the emulator), rtm, emulate, or lock (no "
       "transactions: every operation takes the lock) (auto)")
      ->type_name("B");
  g->add_option_function<std::string>(
       "--htm-l1",
       [&o](const std::string &v) {
         std::string why;
         if (!htm::parse_l1_model(v, &o.htm.l1, &why))
           throw CLI::ValidationError("--htm-l1", why + ", not '" + v + "'");
       },
       "the emulator's L1: S sets of W ways, R read-only lines tracked beyond it (64x8)")
      ->type_name("SxW[+R]");
  g->add_option_function<std::string>(
       "--htm-retries",
       [&o](const std::string &v) {
         if (!htm::parse_retry_policy(v, &o.htm.retries))
           throw cli::refused("--htm-retries",
                              "CONFLICT/CAPACITY/OTHER abort counts such as 128/16/3", v);
       },
       "conflict/capacity/other aborts before the fallback lock (128/16/3)")
      ->type_name("C/K/O");
  g->add_option_function<std::string>(
       "--htm-schedule", [&o](const std::string &v) { o.htm.lockstep = v == "lockstep"; },
       "free: the threads run as the OS schedules them; lockstep: the emulator runs them "
       "access by access in turn, as if each had a core of its own (slow; for abort "
       "statistics on a small machine) (free)")
      ->type_name("S")
      ->check(cli::one_of({"free", "lockstep"}));
  g->add_option("--node-bytes", o.node_bytes, "bytes of entries per node: sets the fanout")
      ->type_name("N")
      ->check(cli::whole_number(16, 1u << 20, "bytes per node"))
      ->capture_default_str();
  auto multiple_of_8 = [](const char *what, uint32_t hi) {
    return CLI::Validator(
        [what, hi](std::string &v) -> std::string {
          uint64_t n = 0;
          auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
          if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < 8 || n > hi ||
              n % 8)
            return std::string("takes ") + what + " that is a multiple of 8 from 8 to " +
                   std::to_string(hi) + ", not '" + v + "'";
          return {};
        },
        "");
  };
  g->add_option("--key-bytes", o.key_bytes, "key size, a multiple of 8")
      ->type_name("N")
      ->check(multiple_of_8("a key size", 1024))
      ->capture_default_str();
  g->add_option("--value-bytes", o.value_bytes, "payload size, a multiple of 8")
      ->type_name("N")
      ->check(multiple_of_8("a payload size", 4096))
      ->capture_default_str();
  g->add_option_function<std::string>(
       "--euno-control",
       [&o](const std::string &v) {
         o.conflict_control = v == "always"  ? CC::kAlways
                              : v == "never" ? CC::kNever
                                             : CC::kAdaptive;
       },
       "euno-bptree's lock and mark bits: adaptive, always, never (adaptive)")
      ->type_name("C")
      ->check(cli::one_of({"adaptive", "always", "never"}));
  return g;
}

std::string check_tree_choice(const std::string &tree, const CLI::App *htm_group) {
  if (tree.empty())
    return "--tree is required (known: " + known_tree_names() + ")";
  if (htm_group->count_all() > 0 && !is_htm_tree(tree))
    return "the HTM options (--htm, --htm-l1, --node-bytes, ...) apply to htm-bptree and "
           "euno-bptree, not " +
           tree;
  return {};
}

std::string check_tree_config(const std::string &tree, const TreeConfig &config) {
  if (tree == "euno-bptree" && config.layout == Layout::kBaseline) {
    uint32_t entry = config.htm.key_bytes + config.htm.value_bytes;
    uint32_t most = EunoBptree::baseline_max_node_bytes(entry);
    if (config.htm.node_bytes > most)
      return "--node-bytes: euno-bptree's baseline leaf counts a segment's entries in one byte, "
             "as the published layout does: at most " +
             std::to_string(most) + " bytes of " + std::to_string(entry) +
             "-byte entries per node, not " + std::to_string(config.htm.node_bytes) +
             " (--layout fixed has no such limit)";
  }
  return {};
}

} // namespace memlayout::trees::bench
