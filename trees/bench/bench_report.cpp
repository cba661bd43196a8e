#include "bench_report.h"

#include "htm_options.h"
#include "json_writer.h"

#include <cstdio>
#include <string>

namespace memlayout::trees::bench {
namespace {

const char *layout_name(Layout l) { return l == Layout::kFixed ? "fixed" : "baseline"; }
const char *alloc_name(AllocPolicy a) {
  return a == AllocPolicy::kSegregated ? "segregated" : "malloc";
}
const char *check_name(CheckState c) {
  switch (c) {
  case CheckState::kOk:
    return "ok";
  case CheckState::kFailed:
    return "failed";
  case CheckState::kSkipped:
    break;
  }
  return "skipped";
}
std::string dist_name(const KeyDist &d) {
  if (!d.zipf)
    return "uniform";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s:%g", d.adjacent ? "zipf-adjacent" : "zipf", d.theta);
  return buf;
}
std::string mix_name(const OpMix &m) {
  std::string s =
      std::to_string(m.lookup) + "/" + std::to_string(m.insert) + "/" + std::to_string(m.remove);
  if (m.put || m.scan)
    s += "/" + std::to_string(m.put) + "/" + std::to_string(m.scan);
  return s;
}
bool counted(const BenchResult &r, int e) { return r.counters[e] >= 0; }

} // namespace

void print_text(const BenchOptions &o, const BenchResult &r, std::ostream &out) {
  char line[256];
  out << "memlayout-bench: " << o.tree << " (" << layout_name(o.config.layout) << " layout, "
      << alloc_name(o.config.alloc) << ")\n";
  out << "  records:";
  for (const RecordKind &k : r.records)
    out << ' ' << k.kind << " " << k.size << " B";
  std::snprintf(line, sizeof line, "%.3f", r.prefill_s);
  out << "\n  keys 1.." << o.key_range << ", prefilled " << r.prefilled << " in " << line
      << " s, ops " << mix_name(o.mix)
      << (o.mix.put || o.mix.scan ? " (lookup/insert/remove/put/scan %), "
                                  : " (lookup/insert/remove %), ")
      << dist_name(o.dist)
      << (o.noise ? ", noise" : "") << (o.pin ? ", pinned" : "") << ", seed " << o.seed << "\n";
  if (o.duration_s == 0) {
    out << "  duration 0: prefill only\n";
  } else {
    std::snprintf(line, sizeof line, "  %u threads, %.3f s: %llu ops, %.3f Mops/s\n", o.threads,
                  r.duration_s, static_cast<unsigned long long>(r.ops), r.mops);
    out << line;
    out << "  thread  cpu      Mops/s   CPU%         ops   lookup hit%   insert ok%   remove ok%\n";
    for (const ThreadResult &t : r.per_thread) {
      auto pct = [](uint64_t part, uint64_t whole) {
        return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
      };
      std::snprintf(
          line, sizeof line, "  %6u  %3s  %10.3f  %5.0f  %10llu  %12.1f  %11.1f  %11.1f\n",
          t.thread, t.cpu < 0 ? "-" : std::to_string(t.cpu).c_str(), t.mops(),
          pct(static_cast<uint64_t>(t.cpu_seconds * 1e6), static_cast<uint64_t>(t.seconds * 1e6)),
          static_cast<unsigned long long>(t.ops()), pct(t.lookup_hits, t.lookups),
          pct(t.inserts_ok, t.inserts), pct(t.removes_ok, t.removes));
      out << line;
    }
    bool any = false;
    for (int e = 0; e < kPmuEventCount; ++e) {
      if (!counted(r, e))
        continue;
      std::snprintf(line, sizeof line, "  %s: %lld (%.3f per op)\n",
                    pmu_event_key(static_cast<PmuEvent>(e)), static_cast<long long>(r.counters[e]),
                    r.ops ? static_cast<double>(r.counters[e]) / static_cast<double>(r.ops) : 0.0);
      out << line;
      any = true;
    }
    if (!r.counters_unavailable.empty())
      out << "  hardware counters " << (any ? "partly " : "")
          << "unavailable: " << r.counters_unavailable << "\n";
  }
  if (r.htm)
    print_htm_text(*r.htm, r.ops, out);
  out << "  check: " << check_name(r.check);
  if (o.linearizable)
    out << ", " << r.history_ops << " operations checked for linearizability";
  if (!r.check_error.empty())
    out << " (" << r.check_error << ")";
  out << "\n";
}

void print_json(const BenchOptions &o, const BenchResult &r, std::ostream &out) {
  JsonWriter j(out);
  j.begin_object();
  j.field("schema", "memlayout.bench/1");
  j.field("tree", o.tree);
  j.field("layout", layout_name(o.config.layout));
  j.field("alloc", alloc_name(o.config.alloc));
  j.field("threads", o.threads);
  j.field("duration_s", r.duration_s);
  j.field("key_range", o.key_range);
  j.field("prefill", r.prefilled);
  j.field("prefill_s", r.prefill_s);
  j.key("ops_mix");
  j.begin_object();
  j.field("lookup", o.mix.lookup);
  j.field("insert", o.mix.insert);
  j.field("remove", o.mix.remove);
  j.field("put", o.mix.put);
  j.field("scan", o.mix.scan);
  j.end_object();
  if (o.mix.scan)
    j.field("scan_length", o.scan_length);
  j.field("dist", dist_name(o.dist));
  j.field("noise", o.noise);
  j.field("pin", o.pin);
  j.field("seed", o.seed);
  j.key("records");
  j.begin_array();
  for (const RecordKind &k : r.records) {
    j.begin_object();
    j.field("kind", k.kind);
    j.field("size", static_cast<uint64_t>(k.size));
    j.end_object();
  }
  j.end_array();
  j.field("ops", r.ops);
  j.field("mops", r.mops);
  j.key("per_thread");
  j.begin_array();
  for (const ThreadResult &t : r.per_thread) {
    j.begin_object();
    j.field("thread", t.thread);
    j.key("cpu");
    if (t.cpu < 0)
      j.null();
    else
      j.value(t.cpu);
    j.field("seconds", t.seconds);
    j.field("cpu_seconds", t.cpu_seconds);
    j.field("ops", t.ops());
    j.field("mops", t.mops());
    j.field("lookups", t.lookups);
    j.field("lookup_hits", t.lookup_hits);
    j.field("inserts", t.inserts);
    j.field("inserts_ok", t.inserts_ok);
    j.field("removes", t.removes);
    j.field("removes_ok", t.removes_ok);
    if (r.htm) {
      j.field("puts", t.puts);
      j.field("puts_inserted", t.puts_inserted);
      j.field("scans", t.scans);
      j.field("scanned", t.scanned);
    }
    j.end_object();
  }
  j.end_array();
  bool any = false;
  for (int e = 0; e < kPmuEventCount; ++e)
    any = any || counted(r, e);
  if (any) {
    j.key("counters");
    j.begin_object();
    for (int e = 0; e < kPmuEventCount; ++e) {
      if (!counted(r, e))
        continue;
      j.key(pmu_event_key(static_cast<PmuEvent>(e)));
      j.begin_object();
      j.field("total", r.counters[e]);
      j.field("per_op",
              r.ops ? static_cast<double>(r.counters[e]) / static_cast<double>(r.ops) : 0.0);
      j.end_object();
    }
    j.end_object();
  }
  if (!r.counters_unavailable.empty())
    j.field("counters_unavailable", r.counters_unavailable);
  if (r.htm)
    write_htm_json(j, *r.htm, o.config.htm, r.ops);
  j.field("check", check_name(r.check));
  if (o.linearizable)
    j.field("history_ops", r.history_ops);
  if (!r.check_error.empty())
    j.field("check_error", r.check_error);
  j.end_object();
  out << "\n";
}

} // namespace memlayout::trees::bench
