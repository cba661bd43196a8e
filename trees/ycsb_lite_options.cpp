#include "ycsb_lite_options.h"

#include "htm_options.h"
#include "option_values.h"

#include <string_view>

namespace memlayout::trees::ycsb {
namespace {

using bench::parse_double;
using bench::parse_unsigned;

std::string known_tree_names() {
  std::string names;
  for (const TreeInfo &t : all_trees())
    names += (names.empty() ? "" : " ") + std::string(t.name);
  return names;
}

std::string apply(YcsbOptions &o, std::string_view name, std::string_view value) {
  auto bad = [&](const char *expected) {
    return "--" + std::string(name) + ": expected " + expected + ", got '" + std::string(value) +
           "'";
  };
  if (std::optional<std::string> htm_error = bench::apply_htm_option(name, value, o.config.htm)) {
    o.htm_given = true;
    return *htm_error;
  }
  if (name == "tree") {
    if (!find_tree(value))
      return "--tree: no tree named '" + std::string(value) + "' (known: " + known_tree_names() +
             ")";
    o.tree = value;
  } else if (name == "threads") {
    auto v = parse_unsigned(value);
    if (!v || *v == 0 || *v > 1024)
      return bad("a thread count from 1 to 1024");
    o.threads = static_cast<unsigned>(*v);
  } else if (name == "duration") {
    auto v = parse_double(value);
    if (!v || !(*v >= 0) || *v > 1e6)
      return bad("seconds, 0 or more");
    o.duration_s = *v;
  } else if (name == "rows") {
    auto v = parse_unsigned(value);
    if (!v || *v == 0 || *v > (uint64_t{1} << 32))
      return bad("a row count from 1 to 2^32");
    o.rows = *v;
  } else if (name == "theta") {
    auto v = parse_double(value);
    if (!v || !(*v > 0) || *v > 100)
      return bad("a Zipf exponent above 0");
    o.theta = *v;
  } else if (name == "txn-rows") {
    auto v = parse_unsigned(value);
    if (!v || *v == 0 || *v > 1024)
      return bad("rows per transaction from 1 to 1024");
    o.txn_rows = static_cast<unsigned>(*v);
  } else if (name == "read-pct") {
    auto v = parse_unsigned(value);
    if (!v || *v > 100)
      return bad("a percentage from 0 to 100");
    o.read_pct = static_cast<unsigned>(*v);
  } else if (name == "alloc") {
    if (value == "malloc")
      o.config.alloc = AllocPolicy::kMalloc;
    else if (value == "segregated")
      o.config.alloc = AllocPolicy::kSegregated;
    else
      return bad("malloc or segregated");
  } else if (name == "layout") {
    if (value == "baseline")
      o.config.layout = Layout::kBaseline;
    else if (value == "fixed")
      o.config.layout = Layout::kFixed;
    else
      return bad("baseline or fixed");
  } else if (name == "format") {
    if (value != "text" && value != "json")
      return bad("text or json");
    o.json = value == "json";
  } else if (name == "seed") {
    auto v = parse_unsigned(value);
    if (!v)
      return bad("an unsigned integer");
    o.seed = *v;
  } else {
    return "unknown option '--" + std::string(name) + "' (see --help)";
  }
  return {};
}

} // namespace

const char *ycsb_usage() {
  return R"(usage: ycsb-lite --tree NAME [options]
An in-memory table of 100-byte rows indexed by one of the study's trees, with
row wrappers and per-row locks, running YCSB-style transactions.

  --tree NAME        the index (memlayout-bench --list shows them)
  --threads N        worker threads, which also load the table (1)
  --duration S       seconds of transactions; 0 = load only, then exit (1)
  --rows N           rows, keys 1..N (1000000)
  --theta T          Zipf skew of the rows a transaction picks (0.99)
  --txn-rows N       rows per transaction (16)
  --read-pct P       read-only transactions, in percent; the others update (90)
  --alloc A          malloc, or segregated: rows, wrappers, locks and tree
                     records each in their own memlayout pool (malloc)
  --layout L         the tree's layout: baseline or fixed (baseline)
  --pad-locks        64-byte, line-aligned row locks instead of 48-byte ones
  --check            verify after the run that no update was lost; exit 1 if any was
  --format F         text or json (text)
  --seed N           random seed (1)
  --help             this text
)";
}

const char *ycsb_usage_htm() { return bench::htm_usage(); }

ParsedYcsbOptions parse_ycsb_options(int argc, char **argv) {
  ParsedYcsbOptions r;
  YcsbOptions &o = r.options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--")) {
      r.error = "unexpected argument '" + std::string(arg) + "' (options start with --)";
      return r;
    }
    std::string_view name = arg.substr(2);
    std::string_view flag_name = name.substr(0, name.find('='));
    bool is_flag = flag_name == "pad-locks" || flag_name == "check" || flag_name == "help";
    if (is_flag && flag_name != name) {
      r.error = "--" + std::string(flag_name) + " takes no value";
      return r;
    }
    if (is_flag) {
      (flag_name == "pad-locks" ? o.pad_locks : flag_name == "check" ? o.check : o.help) = true;
      continue;
    }
    std::string_view value;
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      r.error = "--" + std::string(name) + ": missing value";
      return r;
    }
    r.error = apply(o, name, value);
    if (!r.error.empty())
      return r;
  }
  if (o.help)
    return r;
  if (o.tree.empty())
    r.error = "--tree is required (known: " + known_tree_names() + ")";
  else if (o.htm_given && !bench::is_htm_tree(o.tree))
    r.error = "the HTM options (--htm, --htm-l1, --node-bytes, ...) apply to htm-bptree and "
              "euno-bptree, not " +
              o.tree;
  else if (o.txn_rows > o.rows)
    r.error = "--txn-rows: " + std::to_string(o.txn_rows) +
              " rows per transaction, but the table "
              "has only " +
              std::to_string(o.rows);
  return r;
}

} // namespace memlayout::trees::ycsb
