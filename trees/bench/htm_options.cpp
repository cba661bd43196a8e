#include "htm_options.h"

#include "option_values.h"

#include <cstdio>

namespace memlayout::trees::bench {
namespace {

using CC = htm::HtmTreeOptions::ConflictControl;

const char *control_name(CC c) {
  return c == CC::kAlways ? "always" : c == CC::kNever ? "never" : "adaptive";
}

double ratio(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void counts_json(JsonWriter &j, const htm::HtmCounts &c) {
  j.field("commits", c.commits);
  j.key("aborts");
  j.begin_object();
  for (int i = 0; i < htm::kAbortCauses; ++i)
    j.field(htm::abort_cause_name(static_cast<htm::AbortCause>(i)), c.aborts[i]);
  j.end_object();
  j.field("fallbacks", c.fallbacks);
}

} // namespace

bool is_htm_tree(std::string_view tree) { return tree == "htm-bptree" || tree == "euno-bptree"; }

std::optional<std::string> apply_htm_option(std::string_view name, std::string_view value,
                                            htm::HtmTreeOptions &o) {
  auto bad = [&](const std::string &expected) {
    return "--" + std::string(name) + ": expected " + expected + ", got '" + std::string(value) +
           "'";
  };
  if (name == "htm") {
    if (!htm::parse_backend(value, &o.htm.backend))
      return bad("auto, rtm, emulate or lock");
  } else if (name == "htm-l1") {
    std::string why;
    if (!htm::parse_l1_model(value, &o.htm.l1, &why))
      return "--htm-l1: " + why + ", got '" + std::string(value) + "'";
  } else if (name == "htm-retries") {
    if (!htm::parse_retry_policy(value, &o.htm.retries))
      return bad("CONFLICT/CAPACITY/OTHER abort counts such as 128/16/3");
  } else if (name == "htm-schedule") {
    if (value != "free" && value != "lockstep")
      return bad("free or lockstep");
    o.htm.lockstep = value == "lockstep";
  } else if (name == "node-bytes") {
    auto v = parse_unsigned(value);
    if (!v || *v < 16 || *v > (1u << 20))
      return bad("bytes per node from 16 to 1048576");
    o.node_bytes = static_cast<uint32_t>(*v);
  } else if (name == "key-bytes") {
    auto v = parse_unsigned(value);
    if (!v || *v < 8 || *v > 1024 || *v % 8)
      return bad("a key size that is a multiple of 8 from 8 to 1024");
    o.key_bytes = static_cast<uint32_t>(*v);
  } else if (name == "value-bytes") {
    auto v = parse_unsigned(value);
    if (!v || *v < 8 || *v > 4096 || *v % 8)
      return bad("a payload size that is a multiple of 8 from 8 to 4096");
    o.value_bytes = static_cast<uint32_t>(*v);
  } else if (name == "euno-control") {
    if (value == "adaptive")
      o.conflict_control = CC::kAdaptive;
    else if (value == "always")
      o.conflict_control = CC::kAlways;
    else if (value == "never")
      o.conflict_control = CC::kNever;
    else
      return bad("adaptive, always or never");
  } else {
    return std::nullopt;
  }
  return std::string();
}

const char *htm_usage() {
  return R"(HTM trees (htm-bptree, euno-bptree):
  --htm B              auto (RTM when this CPU has it, else the emulator), rtm, emulate,
                       or lock (no transactions: every operation takes the lock) (auto)
  --htm-l1 SxW[+R]     the emulator's L1: S sets of W ways, R read-only lines tracked
                       beyond it (64x8)
  --htm-retries C/K/O  conflict/capacity/other aborts before the fallback lock (128/16/3)
  --htm-schedule S     free: the threads run as the OS schedules them; lockstep: the
                       emulator runs them access by access in turn, as if each had a
                       core of its own (slow; for abort statistics on a small machine)
  --node-bytes N       bytes of entries per node: sets the fanout (256)
  --key-bytes N        key size, a multiple of 8 (8)
  --value-bytes N      payload size, a multiple of 8 (8)
  --euno-control C     euno-bptree's lock and mark bits: adaptive, always, never (adaptive)
)";
}

void print_htm_text(const htm::HtmReport &r, uint64_t ops, std::ostream &out) {
  const htm::HtmCounts &c = r.counts;
  char line[512];
  uint64_t aborts = c.total_aborts();
  uint64_t conflicts = c.aborts[static_cast<int>(htm::AbortCause::kConflict)];
  std::snprintf(
      line, sizeof line,
      "  htm (%s%s%s): %llu commits, %llu aborts (%.3f per op): conflict %llu, capacity "
      "%llu, explicit %llu, other %llu; %llu fallbacks (%.2f%% of executions)\n",
      r.backend.c_str(), r.l1.empty() ? "" : ", L1 ", r.l1.c_str(),
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

void write_htm_json(JsonWriter &j, const htm::HtmReport &r, const htm::HtmTreeOptions &o,
                    uint64_t ops) {
  const htm::HtmCounts &c = r.counts;
  j.key("htm");
  j.begin_object();
  j.field("backend", r.backend);
  counts_json(j, c);
  j.key("conflicts");
  j.begin_object();
  j.field("true", c.conflicts_true);
  j.field("false", c.conflicts_false);
  j.field("same_key", c.conflicts_same_key);
  j.field("other_key_false", c.conflicts_other_key_false);
  j.field("other_key_true", c.conflicts_other_key_true);
  j.field("fallback_lock", c.conflicts_lock);
  j.field("plain", c.conflicts_plain);
  j.end_object();
  j.key("capacity");
  j.begin_object();
  j.field("write", c.capacity_write);
  j.field("read", c.capacity_read);
  j.end_object();
  j.key("explicit");
  j.begin_object();
  j.field("lock_held", c.lock_held);
  j.field("need_records", c.need_records);
  j.end_object();
  j.field("aborts_per_op", ratio(c.total_aborts(), ops));
  j.field("fallback_rate", ratio(c.fallbacks, c.commits + c.fallbacks));
  j.key("regions");
  j.begin_array();
  for (const auto &[name, rc] : r.regions) {
    j.begin_object();
    j.field("name", name);
    counts_json(j, rc);
    j.end_object();
  }
  j.end_array();
  j.key("by_kind");
  j.begin_array();
  for (const htm::KindAborts &k : r.kinds) {
    j.begin_object();
    j.field("kind", k.kind);
    j.field("conflicts_true", k.conflicts_true);
    j.field("conflicts_false", k.conflicts_false);
    j.field("capacity_lines", k.capacity_lines);
    for (const auto *list : {&k.false_offsets, &k.capacity_offsets}) {
      j.key(list == &k.false_offsets ? "false_offsets" : "capacity_offsets");
      j.begin_array();
      for (const auto &[off, n] : *list) {
        j.begin_object();
        j.field("offset", off);
        j.field("aborts", n);
        j.end_object();
      }
      j.end_array();
    }
    j.end_object();
  }
  j.end_array();
  j.key("options");
  j.begin_object();
  j.field("requested", htm::backend_name(o.htm.backend));
  j.field("l1", htm::l1_model_text(o.htm.l1));
  j.field("retries", std::to_string(o.htm.retries.conflict) + "/" +
                         std::to_string(o.htm.retries.capacity) + "/" +
                         std::to_string(o.htm.retries.other));
  j.field("schedule", o.htm.lockstep ? "lockstep" : "free");
  j.field("node_bytes", o.node_bytes);
  j.field("key_bytes", o.key_bytes);
  j.field("value_bytes", o.value_bytes);
  j.field("euno_control", control_name(o.conflict_control));
  j.end_object();
  j.end_object();
}

} // namespace memlayout::trees::bench
