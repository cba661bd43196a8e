#include "ycsb_lite_options.h"

#include "option_table.h"
#include "tree_options.h"

namespace memlayout::trees::ycsb {

YcsbCommand make_ycsb_command(YcsbOptions &o) {
  YcsbCommand c;
  c.app = cli::make_program(
      "ycsb-lite",
      "An in-memory table of 100-byte rows indexed by one of the study's trees, with row "
      "wrappers and per-row locks, running YCSB-style transactions (docs/trees.md). Exit "
      "status: 0; 1 when --check fails; 2 for bad arguments.",
      "Usage: ycsb-lite --tree NAME [options]");
  CLI::App &app = *c.app;
  bench::add_tree_option(app, o.tree, "the index (memlayout-bench --list shows them)");
  bench::add_run_options(app, o.threads, o.duration_s, o.seed,
                         "seconds of transactions; 0 = load only, then exit");
  app.add_option("--rows", o.rows, "rows, keys 1..N")
      ->type_name("N")
      ->check(cli::whole_number(1, uint64_t{1} << 32, "a row count"))
      ->capture_default_str();
  app.add_option("--theta", o.theta, "Zipf skew of the rows a transaction picks")
      ->type_name("T")
      ->check(cli::real_number(1e-9, 100, "a Zipf exponent"))
      ->capture_default_str();
  app.add_option("--txn-rows", o.txn_rows, "rows per transaction")
      ->type_name("N")
      ->check(cli::whole_number(1, 1024, "rows per transaction"))
      ->capture_default_str();
  app.add_option("--read-pct", o.read_pct, "read-only transactions, in percent; the others update")
      ->type_name("P")
      ->check(cli::whole_number(0, 100, "a percentage"))
      ->capture_default_str();
  bench::add_tree_config_options(
      app, o.config,
      "malloc, or segregated: rows, wrappers, locks and tree records each in their own "
      "memlayout pool");
  app.add_flag("--pad-locks", o.pad_locks,
               "64-byte, line-aligned row locks instead of 48-byte ones");
  app.add_flag("--check", o.check,
               "verify after the run that no update was lost; exit 1 if any was");
  app.add_option_function<std::string>(
         "--format", [&o](const std::string &v) { o.json = v == "json"; }, "text or json (text)")
      ->type_name("text|json")
      ->check(cli::one_of({"text", "json"}));
  c.htm_group = bench::add_htm_options(app, o.config.htm);
  return c;
}

std::string check_ycsb_options(const YcsbOptions &o, const YcsbCommand &command) {
  if (std::string e = bench::check_tree_choice(o.tree, command.htm_group); !e.empty())
    return e;
  if (std::string e = bench::check_tree_config(o.tree, o.config); !e.empty())
    return e;
  if (o.txn_rows > o.rows)
    return "--txn-rows: " + std::to_string(o.txn_rows) +
           " rows per transaction, but the table has only " + std::to_string(o.rows);
  return {};
}

int parse_ycsb_command_line(int argc, char **argv, YcsbOptions &o) {
  YcsbCommand command = make_ycsb_command(o);
  if (int rc = cli::parse_command(*command.app, argc, argv); rc >= 0)
    return rc;
  if (std::string e = check_ycsb_options(o, command); !e.empty())
    return cli::usage_error(*command.app, e);
  return -1;
}

} // namespace memlayout::trees::ycsb
