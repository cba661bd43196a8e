#include "bench_options.h"

#include "option_table.h"
#include "option_values.h"
#include "tree_options.h"

#include <string_view>

namespace memlayout::trees::bench {
namespace {

constexpr uint64_t kMaxKeyRange = uint64_t{1} << 32;

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

} // namespace

BenchCommand make_bench_command(BenchOptions &o) {
  BenchCommand c;
  c.app = cli::make_program(
      "memlayout-bench",
      "Runs a concurrent map workload on one tree of the study and reports throughput "
      "(docs/trees.md). Exit status: 0; 1 when --check fails; 2 for bad arguments.",
      "Usage: memlayout-bench --tree NAME [options]");
  CLI::App &app = *c.app;
  add_tree_option(app, o.tree, "the tree (--list shows them)");
  add_run_options(app, o.threads, o.duration_s, o.seed,
                  "seconds of measured run; 0 = prefill only, then exit");
  app.add_option("--key-range", o.key_range, "keys are 1..K")
      ->type_name("K")
      ->check(cli::whole_number(1, kMaxKeyRange, "a key count"))
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--prefill",
         [&o](const std::string &v) {
           if (v.find('.') != std::string::npos) {
             std::optional<double> f = parse_double(v);
             if (!f || !(*f >= 0) || *f > 1)
               throw cli::refused("--prefill", "a fraction of the key range from 0.0 to 1.0", v);
             o.prefill_fraction = *f;
             o.prefill_count.reset();
           } else {
             std::optional<uint64_t> n = parse_unsigned(v);
             if (!n)
               throw cli::refused("--prefill",
                                  "a key count, or a fraction of the key range such as 0.5", v);
             o.prefill_count = *n;
           }
         },
         "keys inserted before the run, by the workers in random order: a count (1000) or a "
         "fraction of K (0.5, the default)")
      ->type_name("P");
  app.add_option_function<std::string>(
         "--ops",
         [&o](const std::string &v) {
           if (!parse_mix(v, &o.mix))
             throw cli::refused("--ops",
                                "LOOKUP/INSERT/REMOVE[/PUT[/SCAN]] percentages summing to 100, "
                                "such as 80/10/10 or 50/0/0/50",
                                v);
         },
         "lookup/insert/remove[/put/scan] percentages (80/10/10); put (insert or overwrite) and "
         "scan: the HTM trees only")
      ->type_name("L/I/R[/P[/S]]");
  app.add_option("--scan-length", o.scan_length, "pairs a scan visits")
      ->type_name("N")
      ->check(cli::whole_number(1, 1'000'000, "pairs per scan"))
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--dist",
         [&o](const std::string &v) {
           if (!parse_dist(v, &o.dist))
             throw cli::refused("--dist",
                                "uniform, zipf[:THETA] or zipf-adjacent[:THETA] with THETA > 0", v);
         },
         "uniform; zipf:THETA (zipf = zipf:0.99), hot keys scattered over the key range; "
         "zipf-adjacent:THETA, hot keys next to each other (uniform)")
      ->type_name("D");
  add_tree_config_options(app, o.config,
                          "malloc, or segregated: one memlayout pool per record kind");
  app.add_flag("--noise", o.noise, "malloc/free a random-size object (8-512 B) between operations");
  app.add_flag("--check", o.check,
               "verify the contents and structure after the run; exit 1 if wrong");
  app.add_flag_callback(
      "--linearizable", [&o] { o.linearizable = o.check = true; },
      "--check, and record every operation with its invocation and return times, then check "
      "per key that some order of them consistent with those times explains every result (up "
      "to 2 M operations, then the workers stop early)");
  app.add_option_function<std::string>(
         "--format",
         [&o](const std::string &v) {
           o.format = v == "json" ? OutputFormat::kJson : OutputFormat::kText;
         },
         "text or json (text)")
      ->type_name("text|json")
      ->check(cli::one_of({"text", "json"}));
  app.add_flag("--pin", o.pin, "pin worker i to the i-th allowed CPU, round-robin");
  app.add_flag("--list", o.list, "list the trees and exit");
  c.htm_group = add_htm_options(app, o.config.htm);
  return c;
}

std::string check_bench_options(const BenchOptions &o, const BenchCommand &command) {
  if (o.list)
    return {};
  if (std::string e = check_tree_choice(o.tree, command.htm_group); !e.empty())
    return e;
  if (std::string e = check_tree_config(o.tree, o.config); !e.empty())
    return e;
  if ((o.mix.put || o.mix.scan) && !is_htm_tree(o.tree))
    return "--ops: put and scan need an HTM tree (htm-bptree, euno-bptree), not " + o.tree;
  if (o.linearizable && (o.mix.put || o.mix.scan))
    return "--linearizable checks histories of lookups, inserts and removes; the --ops mix "
           "has puts or scans";
  if (o.prefill_keys() > o.key_range)
    return "--prefill: " + std::to_string(o.prefill_keys()) +
           " keys do not fit in a key range of " + std::to_string(o.key_range);
  return {};
}

int parse_bench_command_line(int argc, char **argv, BenchOptions &o) {
  BenchCommand command = make_bench_command(o);
  if (int rc = cli::parse_command(*command.app, argc, argv); rc >= 0)
    return rc;
  if (std::string e = check_bench_options(o, command); !e.empty())
    return cli::usage_error(*command.app, e);
  return -1;
}

ParsedOptions parse_bench_options(int argc, char **argv) {
  ParsedOptions r;
  BenchCommand command = make_bench_command(r.options);
  cli::ParseOutcome parsed = cli::parse_arguments(*command.app, argc, argv);
  r.exit_status = parsed.exit_status;
  r.error = parsed.error;
  if (r.exit_status < 0) {
    r.error = check_bench_options(r.options, command);
    if (!r.error.empty())
      r.exit_status = 2;
  }
  return r;
}

} // namespace memlayout::trees::bench
