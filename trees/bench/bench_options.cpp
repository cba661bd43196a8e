#include "bench_options.h"

#include "htm_options.h"
#include "option_values.h"

#include <string_view>

namespace memlayout::trees::bench {
namespace {

constexpr uint64_t kMaxKeyRange = uint64_t{1} << 32;
constexpr unsigned kMaxThreads = 1024;

std::string known_tree_names() {
  std::string names;
  for (const TreeInfo &t : all_trees())
    names += (names.empty() ? "" : " ") + std::string(t.name);
  return names;
}

// "80/10/10": lookup/insert/remove percentages summing to 100, optionally
// followed by put and scan ones ("50/0/0/50", "45/0/0/50/5").
bool parse_mix(std::string_view text, OpMix *mix) {
  unsigned parts[5] = {};
  int n = 0;
  for (;; ++n) {
    if (n == 5)
      return false;
    size_t slash = text.find('/');
    std::optional<uint64_t> v = parse_unsigned(text.substr(0, slash));
    if (!v || *v > 100)
      return false;
    parts[n] = static_cast<unsigned>(*v);
    if (slash == std::string_view::npos)
      break;
    text = text.substr(slash + 1);
  }
  if (n < 2 || parts[0] + parts[1] + parts[2] + parts[3] + parts[4] != 100)
    return false;
  *mix = OpMix{parts[0], parts[1], parts[2], parts[3], parts[4]};
  return true;
}

// "uniform", "zipf" (theta 0.99), "zipf:THETA", or the same with
// "zipf-adjacent" (hot keys next to each other).
bool parse_dist(std::string_view text, KeyDist *dist) {
  if (text == "uniform") {
    *dist = KeyDist{};
    return true;
  }
  bool adjacent = text.starts_with("zipf-adjacent");
  if (adjacent)
    text.remove_prefix(13);
  else if (text.starts_with("zipf"))
    text.remove_prefix(4);
  else
    return false;
  double theta = 0.99;
  if (!text.empty()) {
    if (!text.starts_with(":"))
      return false;
    std::optional<double> t = parse_double(text.substr(1));
    if (!t || !(*t > 0) || *t > 100)
      return false;
    theta = *t;
  }
  *dist = KeyDist{true, theta, adjacent};
  return true;
}

std::string apply(BenchOptions &o, std::string_view name, std::string_view value) {
  auto bad = [&](const char *expected) {
    return "--" + std::string(name) + ": expected " + expected + ", got '" + std::string(value) +
           "'";
  };
  if (std::optional<std::string> htm_error = apply_htm_option(name, value, o.config.htm)) {
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
    if (!v || *v == 0 || *v > kMaxThreads)
      return bad("a thread count from 1 to 1024");
    o.threads = static_cast<unsigned>(*v);
  } else if (name == "duration") {
    auto v = parse_double(value);
    if (!v || !(*v >= 0) || *v > 1e6)
      return bad("seconds, 0 or more");
    o.duration_s = *v;
  } else if (name == "key-range") {
    auto v = parse_unsigned(value);
    if (!v || *v == 0 || *v > kMaxKeyRange)
      return bad("a key count from 1 to 2^32");
    o.key_range = *v;
  } else if (name == "prefill") {
    if (value.find('.') != std::string_view::npos) {
      auto v = parse_double(value);
      if (!v || !(*v >= 0) || *v > 1)
        return bad("a fraction of the key range from 0.0 to 1.0, or a key count");
      o.prefill_fraction = *v;
      o.prefill_count.reset();
    } else {
      auto v = parse_unsigned(value);
      if (!v)
        return bad("a key count, or a fraction of the key range such as 0.5");
      o.prefill_count = *v;
    }
  } else if (name == "ops") {
    if (!parse_mix(value, &o.mix))
      return bad("LOOKUP/INSERT/REMOVE[/PUT[/SCAN]] percentages summing to 100, such as "
                 "80/10/10 or 50/0/0/50");
  } else if (name == "scan-length") {
    auto v = parse_unsigned(value);
    if (!v || *v == 0 || *v > 1'000'000)
      return bad("pairs per scan from 1 to 1000000");
    o.scan_length = static_cast<unsigned>(*v);
  } else if (name == "dist") {
    if (!parse_dist(value, &o.dist))
      return bad("uniform, zipf[:THETA] or zipf-adjacent[:THETA] with THETA > 0");
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
    if (value == "text")
      o.format = OutputFormat::kText;
    else if (value == "json")
      o.format = OutputFormat::kJson;
    else
      return bad("text or json");
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

const char *bench_usage() {
  return R"(usage: memlayout-bench --tree NAME [options]
Runs a concurrent map workload on one tree of the study and reports throughput.

  --tree NAME          the tree (--list shows them)
  --threads N          worker threads (1)
  --duration S         seconds of measured run; 0 = prefill only, then exit (1)
  --key-range K        keys are 1..K (65536)
  --prefill P          keys inserted before the run, by the workers in random
                       order: a count (1000) or a fraction of K (0.5, the default)
  --ops L/I/R[/P[/S]]  lookup/insert/remove[/put/scan] percentages (80/10/10);
                       put (insert or overwrite) and scan: the HTM trees only
  --scan-length N      pairs a scan visits (100)
  --dist D             uniform; zipf:THETA (zipf = zipf:0.99), hot keys scattered over
                       the key range; zipf-adjacent:THETA, hot keys next to each other
                       (uniform)
  --alloc A            malloc or segregated (one memlayout pool per record kind) (malloc)
  --layout L           baseline (published layout) or fixed (the study's fixes) (baseline)
  --noise              malloc/free a random-size object (8-512 B) between operations
  --check              verify the contents and structure after the run; exit 1 if wrong
  --linearizable       --check, and record every operation with its invocation and
                       return times, then check per key that some order of them
                       consistent with those times explains every result (up to
                       2 M operations, then the workers stop early)
  --format F           text or json (text)
  --seed N             random seed (1)
  --pin                pin worker i to the i-th allowed CPU, round-robin
  --list               list the trees and exit
  --help               this text
)";
}

const char *bench_usage_htm() { return htm_usage(); }

ParsedOptions parse_bench_options(int argc, char **argv) {
  ParsedOptions r;
  BenchOptions &o = r.options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--")) {
      r.error = "unexpected argument '" + std::string(arg) + "' (options start with --)";
      return r;
    }
    std::string_view name = arg.substr(2);
    std::string_view flag_name = name.substr(0, name.find('='));
    bool is_flag = flag_name == "noise" || flag_name == "check" || flag_name == "pin" ||
                   flag_name == "list" || flag_name == "help" || flag_name == "linearizable";
    if (is_flag && flag_name != name) {
      r.error = "--" + std::string(flag_name) + " takes no value";
      return r;
    }
    if (is_flag) {
      bool &flag = name == "noise"          ? o.noise
                   : name == "check"        ? o.check
                   : name == "linearizable" ? o.linearizable
                   : name == "pin"          ? o.pin
                   : name == "list"         ? o.list
                                            : o.help;
      flag = true;
      o.check |= o.linearizable;
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
  if (o.help || o.list)
    return r;
  if (o.tree.empty()) {
    r.error = "--tree is required (known: " + known_tree_names() + ")";
  } else if ((o.mix.put || o.mix.scan) && !is_htm_tree(o.tree)) {
    r.error = "--ops: put and scan need an HTM tree (htm-bptree, euno-bptree), not " + o.tree;
  } else if (o.linearizable && (o.mix.put || o.mix.scan)) {
    r.error = "--linearizable checks histories of lookups, inserts and removes; the --ops mix "
              "has puts or scans";
  } else if (o.htm_given && !is_htm_tree(o.tree)) {
    r.error = "the HTM options (--htm, --htm-l1, --node-bytes, ...) apply to htm-bptree and "
              "euno-bptree, not " +
              o.tree;
  } else if (o.prefill_keys() > o.key_range) {
    r.error = "--prefill: " + std::to_string(o.prefill_keys()) +
              " keys do not fit in a key range of " + std::to_string(o.key_range);
  }
  return r;
}

} // namespace memlayout::trees::bench
