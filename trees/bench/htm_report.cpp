#include "htm_report.h"

#include <cstdio>
#include <string>

namespace memlayout::trees::bench {
namespace {

using CC = htm::HtmTreeOptions::ConflictControl;

const char *control_name(CC c) {
  return c == CC::kAlways ? "always" : c == CC::kNever ? "never" : "adaptive";
}

const char *phase_name(HtmPhase p) {
  return p == HtmPhase::kPrefill ? "prefill" : p == HtmPhase::kLoad ? "load" : "run";
}

double ratio(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

cli::Json counts_json(const htm::HtmCounts &c) {
  cli::Json aborts = cli::Json::object();
  for (int i = 0; i < htm::kAbortCauses; ++i)
    aborts[htm::abort_cause_name(static_cast<htm::AbortCause>(i))] = c.aborts[i];
  return {{"commits", c.commits}, {"aborts", std::move(aborts)}, {"fallbacks", c.fallbacks}};
}

} // namespace

void print_htm_text(const htm::HtmReport &r, uint64_t ops, std::ostream &out, HtmPhase phase) {
  const htm::HtmCounts &c = r.counts;
  char line[512];
  uint64_t aborts = c.total_aborts();
  uint64_t conflicts = c.aborts[static_cast<int>(htm::AbortCause::kConflict)];
  const std::string of =
      phase == HtmPhase::kRun ? "" : std::string(" of the ") + phase_name(phase) + "'s inserts";
  std::snprintf(
      line, sizeof line,
      "  htm (%s%s%s)%s: %llu commits, %llu aborts (%.3f per op): conflict %llu, capacity "
      "%llu, explicit %llu, other %llu; %llu fallbacks (%.2f%% of executions)\n",
      r.backend.c_str(), r.l1.empty() ? "" : ", L1 ", r.l1.c_str(), of.c_str(),
      static_cast<unsigned long long>(c.commits), static_cast<unsigned long long>(aborts),
      ratio(aborts, ops), static_cast<unsigned long long>(conflicts),
      static_cast<unsigned long long>(c.aborts[1]), static_cast<unsigned long long>(c.aborts[2]),
      static_cast<unsigned long long>(c.aborts[3]), static_cast<unsigned long long>(c.fallbacks),
      100 * ratio(c.fallbacks, c.commits + c.fallbacks));
  out << line;
  if (r.backend == "emulate" && conflicts) {
    std::snprintf(
        line, sizeof line,
        "  conflicts: %.1f%% false (same line, disjoint bytes), %.1f%% true; by key: "
        "%.1f%% other keys sharing a line, %.1f%% other keys on shared bytes "
        "(metadata), %.1f%% same key, %.1f%% the fallback lock\n",
        100 * ratio(c.conflicts_false, conflicts), 100 * ratio(c.conflicts_true, conflicts),
        100 * ratio(c.conflicts_other_key_false, conflicts),
        100 * ratio(c.conflicts_other_key_true, conflicts),
        100 * ratio(c.conflicts_same_key, conflicts), 100 * ratio(c.conflicts_lock, conflicts));
    out << line;
  }
  if (r.regions.size() > 1)
    for (const auto &[name, rc] : r.regions) {
      std::snprintf(line, sizeof line,
                    "    region %-6s %llu commits, %llu aborts, %llu fallbacks\n", name.c_str(),
                    static_cast<unsigned long long>(rc.commits),
                    static_cast<unsigned long long>(rc.total_aborts()),
                    static_cast<unsigned long long>(rc.fallbacks));
      out << line;
    }
  for (const htm::KindAborts &k : r.kinds) {
    if (!k.conflicts_false && !k.conflicts_true && !k.capacity_lines)
      continue;
    std::snprintf(line, sizeof line,
                  "    %-8s %llu false, %llu true conflicts; %llu lines in overflowing sets",
                  k.kind.c_str(), static_cast<unsigned long long>(k.conflicts_false),
                  static_cast<unsigned long long>(k.conflicts_true),
                  static_cast<unsigned long long>(k.capacity_lines));
    out << line;
    if (!k.false_offsets.empty()) {
      out << "; false at offsets";
      for (size_t i = 0; i < k.false_offsets.size() && i < 4; ++i)
        out << ' ' << k.false_offsets[i].first << " (" << k.false_offsets[i].second << ")";
    }
    out << "\n";
  }
}

cli::Json htm_json(const htm::HtmReport &r, const htm::HtmTreeOptions &o, uint64_t ops,
                   HtmPhase phase) {
  using cli::Json;
  const htm::HtmCounts &c = r.counts;
  Json j = {{"backend", r.backend}, {"of", phase_name(phase)}};
  j.update(counts_json(c));
  j["conflicts"] = {{"true", c.conflicts_true},
                    {"false", c.conflicts_false},
                    {"same_key", c.conflicts_same_key},
                    {"other_key_false", c.conflicts_other_key_false},
                    {"other_key_true", c.conflicts_other_key_true},
                    {"fallback_lock", c.conflicts_lock},
                    {"plain", c.conflicts_plain}};
  j["capacity"] = {{"write", c.capacity_write}, {"read", c.capacity_read}};
  j["explicit"] = {{"lock_held", c.lock_held}, {"need_records", c.need_records}};
  j["aborts_per_op"] = ratio(c.total_aborts(), ops);
  j["fallback_rate"] = ratio(c.fallbacks, c.commits + c.fallbacks);
  Json &regions = j["regions"] = Json::array();
  for (const auto &[name, rc] : r.regions) {
    Json &region = regions.emplace_back(Json{{"name", name}});
    region.update(counts_json(rc));
  }
  Json &kinds = j["by_kind"] = Json::array();
  for (const htm::KindAborts &k : r.kinds) {
    auto offsets = [](const auto &list) {
      Json a = Json::array();
      for (const auto &[off, n] : list)
        a.push_back({{"offset", off}, {"aborts", n}});
      return a;
    };
    kinds.push_back({{"kind", k.kind},
                     {"conflicts_true", k.conflicts_true},
                     {"conflicts_false", k.conflicts_false},
                     {"capacity_lines", k.capacity_lines},
                     {"false_offsets", offsets(k.false_offsets)},
                     {"capacity_offsets", offsets(k.capacity_offsets)}});
  }
  j["options"] = {{"requested", htm::backend_name(o.htm.backend)},
                  {"l1", htm::l1_model_text(o.htm.l1)},
                  {"retries", std::to_string(o.htm.retries.conflict) + "/" +
                                  std::to_string(o.htm.retries.capacity) + "/" +
                                  std::to_string(o.htm.retries.other)},
                  {"schedule", o.htm.lockstep ? "lockstep" : "free"},
                  {"node_bytes", o.node_bytes},
                  {"key_bytes", o.key_bytes},
                  {"value_bytes", o.value_bytes},
                  {"euno_control", control_name(o.conflict_control)}};
  return j;
}

} // namespace memlayout::trees::bench
