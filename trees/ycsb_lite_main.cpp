// ycsb-lite: YCSB-style transactions on a table indexed by one of the
// study's trees (docs/trees.md). Exit status: 0, 1 when --check fails, 2 on
// bad arguments.
#include "htm_options.h"
#include "json_writer.h"
#include "ycsb_lite_options.h"
#include "ycsb_lite_run.h"

#include <cstdio>
#include <iostream>
#include <new>
#include <stdexcept>

using namespace memlayout::trees;
using namespace memlayout::trees::ycsb;

namespace {

const char *layout_name(Layout l) { return l == Layout::kFixed ? "fixed" : "baseline"; }
const char *alloc_name(AllocPolicy a) {
  return a == AllocPolicy::kSegregated ? "segregated" : "malloc";
}
const char *check_name(const YcsbResult &r) {
  return !r.checked ? "skipped" : r.check_error.empty() ? "ok" : "failed";
}

void print_json(const YcsbOptions &o, const YcsbResult &r) {
  bench::JsonWriter j(std::cout);
  j.begin_object();
  j.field("schema", "memlayout.ycsb-lite/1");
  j.field("tree", o.tree);
  j.field("layout", layout_name(o.config.layout));
  j.field("alloc", alloc_name(o.config.alloc));
  j.field("pad_locks", o.pad_locks);
  j.field("threads", o.threads);
  j.field("rows", o.rows);
  j.field("theta", o.theta);
  j.field("txn_rows", o.txn_rows);
  j.field("read_pct", o.read_pct);
  j.field("seed", o.seed);
  j.field("load_s", r.load_s);
  j.field("duration_s", r.duration_s);
  j.field("txns", r.txns);
  j.field("txn_per_s", r.txn_per_s);
  j.key("per_thread");
  j.begin_array();
  for (const ThreadTxns &t : r.per_thread) {
    j.begin_object();
    j.field("thread", t.thread);
    j.field("seconds", t.seconds);
    j.field("txns", t.txns());
    j.field("reads", t.reads);
    j.field("updates", t.updates);
    j.field("txn_per_s", t.seconds > 0 ? static_cast<double>(t.txns()) / t.seconds : 0.0);
    j.end_object();
  }
  j.end_array();
  if (r.htm)
    bench::write_htm_json(j, *r.htm, o.config.htm, r.txns);
  j.field("check", check_name(r));
  if (!r.check_error.empty())
    j.field("check_error", r.check_error);
  j.end_object();
  std::cout << "\n";
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
    bench::print_htm_text(*r.htm, r.txns * o.txn_rows, std::cout);
    std::cout.flush();
  }
  std::printf("  check: %s%s%s%s\n", check_name(r), r.check_error.empty() ? "" : " (",
              r.check_error.c_str(), r.check_error.empty() ? "" : ")");
}

} // namespace

int main(int argc, char **argv) {
  ParsedYcsbOptions parsed = parse_ycsb_options(argc, argv);
  if (!parsed.error.empty()) {
    std::cerr << "ycsb-lite: " << parsed.error << "\n";
    return 2;
  }
  const YcsbOptions &o = parsed.options;
  if (o.help) {
    std::cout << ycsb_usage() << "\n" << ycsb_usage_htm();
    return 0;
  }
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
