#include "bench_report.h"

#include "epoch.h"
#include "htm_report.h"
#include "json_write.h"
#include "tree_options.h"

#include <cstdio>
#include <string>
#include <utility>

namespace memlayout::trees::bench {
namespace {

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

// Whose HTM counts a run reports, and per how many operations: with
// --duration 0 there is no run, and they are the prefill's, per insert.
std::pair<uint64_t, HtmPhase> htm_phase(const BenchOptions &o, const BenchResult &r) {
  if (o.duration_s <= 0)
    return {r.prefilled, HtmPhase::kPrefill};
  return {r.ops, HtmPhase::kRun};
}

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
      << dist_name(o.dist) << (o.noise ? ", noise" : "") << (o.pin ? ", pinned" : "") << ", seed "
      << o.seed << "\n";
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
  if (r.htm) {
    auto [ops, phase] = htm_phase(o, r);
    print_htm_text(*r.htm, ops, out, phase);
  }
  out << "  check: " << check_name(r.check);
  if (o.linearizable)
    out << ", " << r.history_ops << " operations checked for linearizability";
  if (r.history_full_threads) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "; %u of %zu threads filled their share of the history and stopped early "
                  "(the first after %.3f s): a shorter --duration checks the whole run",
                  r.history_full_threads, r.per_thread.size(), r.history_full_after_s);
    out << line;
  }
  if (!r.check_error.empty())
    out << " (" << r.check_error << ")";
  out << "\n";
}

void print_json(const BenchOptions &o, const BenchResult &r, std::ostream &out) {
  using cli::Json;
  Json j;
  j["schema"] = "memlayout.bench/1";
  j["tree"] = o.tree;
  j["layout"] = layout_name(o.config.layout);
  j["alloc"] = alloc_name(o.config.alloc);
  j["threads"] = o.threads;
  j["duration_s"] = r.duration_s;
  j["key_range"] = o.key_range;
  j["prefill"] = r.prefilled;
  j["prefill_s"] = r.prefill_s;
  j["ops_mix"] = {{"lookup", o.mix.lookup},
                  {"insert", o.mix.insert},
                  {"remove", o.mix.remove},
                  {"put", o.mix.put},
                  {"scan", o.mix.scan}};
  if (o.mix.scan)
    j["scan_length"] = o.scan_length;
  j["dist"] = dist_name(o.dist);
  j["noise"] = o.noise;
  j["pin"] = o.pin;
  j["seed"] = o.seed;
  j["epoch_announcement"] = epoch_announcement();
  Json &records = j["records"] = Json::array();
  for (const RecordKind &k : r.records)
    records.push_back({{"kind", k.kind}, {"size", k.size}});
  j["ops"] = r.ops;
  j["mops"] = r.mops;
  Json &threads = j["per_thread"] = Json::array();
  for (const ThreadResult &t : r.per_thread) {
    Json &tj = threads.emplace_back();
    tj["thread"] = t.thread;
    tj["cpu"] = t.cpu < 0 ? Json() : Json(t.cpu);
    tj["seconds"] = t.seconds;
    tj["cpu_seconds"] = t.cpu_seconds;
    tj["ops"] = t.ops();
    tj["mops"] = t.mops();
    tj["lookups"] = t.lookups;
    tj["lookup_hits"] = t.lookup_hits;
    tj["inserts"] = t.inserts;
    tj["inserts_ok"] = t.inserts_ok;
    tj["removes"] = t.removes;
    tj["removes_ok"] = t.removes_ok;
    if (r.htm) {
      tj["puts"] = t.puts;
      tj["puts_inserted"] = t.puts_inserted;
      tj["scans"] = t.scans;
      tj["scanned"] = t.scanned;
    }
  }
  Json counters = Json::object();
  for (int e = 0; e < kPmuEventCount; ++e)
    if (counted(r, e))
      counters[pmu_event_key(static_cast<PmuEvent>(e))] = {
          {"total", r.counters[e]},
          {"per_op",
           r.ops ? static_cast<double>(r.counters[e]) / static_cast<double>(r.ops) : 0.0}};
  if (!counters.empty())
    j["counters"] = std::move(counters);
  if (!r.counters_unavailable.empty())
    j["counters_unavailable"] = r.counters_unavailable;
  if (r.htm) {
    auto [ops, phase] = htm_phase(o, r);
    j["htm"] = htm_json(*r.htm, o.config.htm, ops, phase);
  }
  j["check"] = check_name(r.check);
  if (o.linearizable) {
    j["history_ops"] = r.history_ops;
    j["history_full"] = {{"threads", r.history_full_threads},
                         {"first_stopped_after_s", r.history_full_after_s}};
  }
  if (!r.check_error.empty())
    j["check_error"] = r.check_error;
  cli::write_json_line(j, out);
}

} // namespace memlayout::trees::bench
