// ycsb-lite: YCSB-style transactions on a table indexed by one of the
// study's trees (docs/trees.md). Exit status: 0, 1 when --check fails, 2 on
// bad arguments.
#include "htm_report.h"
#include "json_write.h"
#include "tree_options.h"
#include "ycsb_lite_options.h"
#include "ycsb_lite_run.h"

#include <cstdio>
#include <iostream>
#include <new>
#include <stdexcept>

using namespace memlayout::trees;
using namespace memlayout::trees::ycsb;
using memlayout::trees::bench::alloc_name;
using memlayout::trees::bench::layout_name;

namespace {

const char *check_name(const YcsbResult &r) {
  return !r.checked ? "skipped" : r.check_error.empty() ? "ok" : "failed";
}

// An HTM index's counts are the run's, per index operation; a load-only
// run's are the load's, per row inserted.
bench::HtmPhase htm_phase(const YcsbOptions &o) {
  return o.duration_s > 0 ? bench::HtmPhase::kRun : bench::HtmPhase::kLoad;
}
uint64_t htm_ops(const YcsbOptions &o, const YcsbResult &r) {
  return o.duration_s > 0 ? r.txns * o.txn_rows : o.rows;
}

void print_json(const YcsbOptions &o, const YcsbResult &r) {
  using memlayout::cli::Json;
  Json j;
  j["schema"] = "memlayout.ycsb-lite/1";
  j["tree"] = o.tree;
  j["layout"] = layout_name(o.config.layout);
  j["alloc"] = alloc_name(o.config.alloc);
  j["pad_locks"] = o.pad_locks;
  j["threads"] = o.threads;
  j["rows"] = o.rows;
  j["theta"] = o.theta;
  j["txn_rows"] = o.txn_rows;
  j["read_pct"] = o.read_pct;
  j["seed"] = o.seed;
  j["load_s"] = r.load_s;
  j["duration_s"] = r.duration_s;
  j["txns"] = r.txns;
  j["txn_per_s"] = r.txn_per_s;
  Json &threads = j["per_thread"] = Json::array();
  for (const ThreadTxns &t : r.per_thread)
    threads.push_back(
        {{"thread", t.thread},
         {"seconds", t.seconds},
         {"txns", t.txns()},
         {"reads", t.reads},
         {"updates", t.updates},
         {"txn_per_s", t.seconds > 0 ? static_cast<double>(t.txns()) / t.seconds : 0.0}});
  if (r.htm)
    j["htm"] = bench::htm_json(*r.htm, o.config.htm, htm_ops(o, r), htm_phase(o));
  j["check"] = check_name(r);
  if (!r.check_error.empty())
    j["check_error"] = r.check_error;
  memlayout::cli::write_json_line(j, std::cout);
}

void print_text(const YcsbOptions &o, const YcsbResult &r) {
  std::printf("ycsb-lite: %llu rows indexed by %s (%s layout, %s, %s row locks)\n",
              static_cast<unsigned long long>(o.rows), o.tree.c_str(), layout_name(o.config.layout),
              alloc_name(o.config.alloc), o.pad_locks ? "64-byte padded" : "48-byte");
  std::printf("  loaded in %.3f s; transactions of %u rows, %u%% read-only, zipf:%g, seed %llu\n",
              r.load_s, o.txn_rows, o.read_pct, o.theta, static_cast<unsigned long long>(o.seed));
  if (o.duration_s > 0) {
    std::printf("  %u threads, %.3f s: %llu transactions, %.0f txn/s\n", o.threads, r.duration_s,
                static_cast<unsigned long long>(r.txns), r.txn_per_s);
    std::printf("  thread       txn/s        reads      updates\n");
    for (const ThreadTxns &t : r.per_thread)
      std::printf("  %6u  %10.0f  %11llu  %11llu\n", t.thread,
                  t.seconds > 0 ? static_cast<double>(t.txns()) / t.seconds : 0.0,
                  static_cast<unsigned long long>(t.reads),
                  static_cast<unsigned long long>(t.updates));
  } else {
    std::printf("  duration 0: load only\n");
  }
  if (r.htm) {
    std::fflush(stdout);
    bench::print_htm_text(*r.htm, htm_ops(o, r), std::cout, htm_phase(o));
    std::cout.flush();
  }
  std::printf("  check: %s%s%s%s\n", check_name(r), r.check_error.empty() ? "" : " (",
              r.check_error.c_str(), r.check_error.empty() ? "" : ")");
}

} // namespace

int main(int argc, char **argv) {
  YcsbOptions o;
  if (int rc = parse_ycsb_command_line(argc, argv, o); rc >= 0)
    return rc;
  YcsbResult r;
  try {
    r = run_ycsb(o);
  } catch (const std::runtime_error &e) { // --htm rtm on a CPU without RTM
    std::cerr << "ycsb-lite: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc &) {
    std::cerr << "ycsb-lite: out of memory loading " << o.rows << " rows\n";
    return 1;
  }
  if (o.json)
    print_json(o, r);
  else
    print_text(o, r);
  return r.checked && !r.check_error.empty() ? 1 : 0;
}
