#include "findings.h"

#include "pool_layout.h"
#include "rule_match.h"
#include "rules.h"
#include "size_class.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>

namespace memlayout::inspector {
namespace {

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", f * 100);
  return b;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

// How a rule names a group for `memlayout advise` / --segregate.
// An unresolved site ("??"), or one whose every frame was looked through
// (the interposer looks through it too), cannot be named by function: match
// its size.
// A name longer than a rule holds (a libstdc++ hashtable's node allocator:
// 600 characters) is given by the scopes rules compare anyway.
std::string rule_match(const Group &g) {
  if (!g.site.function.empty() && g.site.function.find("??") == std::string::npos &&
      !g.site.every_frame_looked_through) {
    // A clone's suffix names code, not the function rules route by.
    std::string function = g.site.function.substr(
        0, rules::without_clone_suffix(g.site.function.c_str(), g.site.function.size()));
    if (function.size() < rules::kMaxName)
      return "function=" + function;
    char scopes[rules::kMaxName];
    if (rules::normalize_function(function.c_str(), scopes, sizeof scopes))
      return std::string("function=") + scopes;
  }
  return "size=" + std::to_string(g.requested_size);
}

// A short pool name from the site's function: its last two scopes
// ("IntLf.new_node"), in the characters rules allow.
std::string pool_name(const Group &g) {
  bool named = !g.site.function.empty() && g.site.function.find("??") == std::string::npos;
  char scopes[rules::kMaxName];
  if (!named || !rules::normalize_function(g.site.function.c_str(), scopes, sizeof scopes))
    return "group" + std::to_string(g.id);
  std::string n = scopes;
  size_t last = n.rfind("::");
  if (last != std::string::npos) {
    size_t before = last ? n.rfind("::", last - 1) : std::string::npos;
    n = n.substr(before == std::string::npos ? 0 : before + 2);
    n.replace(n.find("::"), 2, ".");
  }
  for (char &c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  if (n.size() > rules::kMaxPoolName - 1)
    n = n.substr(n.size() - (rules::kMaxPoolName - 1));
  return n;
}

// The rule that gives the group a pool of its own.
std::string own_pool(const Group &g) { return rule_match(g) + ",pool=" + pool_name(g); }

// Two groups' names for a message about both: one site's size classes, or
// sites a report names alike (inlined code, one line), are told apart by
// the ids of the report's table.
std::pair<std::string, std::string> names_of(const Group &a, const Group &b) {
  if (a.name != b.name)
    return {a.name, b.name};
  return {a.name + " [group " + std::to_string(a.id) + "]",
          b.name + " [group " + std::to_string(b.id) + "]"};
}

const GroupReport *by_id(const Report &r, uint32_t id) {
  for (const auto &g : r.groups)
    if (g.group.id == id)
      return &g;
  return nullptr;
}

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

// Objects of a group with another group's object on one of their lines or
// on the other line of their 128-byte pair, as a share of its objects. The
// two counts overlap (an object can have both), so the larger one stands for
// "on or next to" and never exceeds all of them.
double next_to_share(const GroupReport &g, const GroupReport::Neighbour &n) {
  if (!g.objects)
    return 0;
  return static_cast<double>(std::max(n.same_line, n.adjacent_line)) /
         static_cast<double>(g.objects);
}

// The neighbour whose objects sit next to this group's the most (same or
// adjacent line), other than itself.
const GroupReport::Neighbour *closest_neighbour(const GroupReport &g) {
  const GroupReport::Neighbour *best = nullptr;
  for (const auto &n : g.neighbours) {
    if (n.group == g.group.id)
      continue;
    if (!best || n.same_line + n.adjacent_line > best->same_line + best->adjacent_line)
      best = &n;
  }
  return best;
}

void set_underutilization(const Report &r, const GroupReport &g, const FindingThresholds &t,
                          std::vector<Finding> &out) {
  int worst = -1; // index into set_effective_fraction: the level - 1
  double worst_f = 1;
  for (size_t i = 0; i < g.set_effective_fraction.size(); ++i) {
    const auto &f = g.set_effective_fraction[i];
    if (!f || g.lines_counted[i] < t.set_min_lines)
      continue;
    if (*f < worst_f) {
      worst_f = *f;
      worst = static_cast<int>(i);
    }
  }
  if (worst < 0 || worst_f >= t.set_fraction_medium)
    return;
  Finding f;
  f.kind = "set_underutilization";
  f.severity = worst_f < t.set_fraction_high ? "high" : "medium";
  f.groups = {g.group.id};
  for (size_t i = 0; i < g.set_effective_fraction.size(); ++i)
    if (g.set_effective_fraction[i])
      f.metric["set_effective_fraction_L" + std::to_string(i + 1)] = *g.set_effective_fraction[i];
  const int worst_level = worst + 1;
  f.message = g.group.name + " uses " + pct(worst_f) + " of the L" + std::to_string(worst_level) +
              " sets (" + std::to_string(g.lines_counted[static_cast<size_t>(worst)]) +
              " lines): it runs as if that cache were " + num(1 / worst_f) + "x smaller";
  const GroupReport::Neighbour *n = closest_neighbour(g);
  const GroupReport *other = n ? by_id(r, n->group) : nullptr;
  if (other && next_to_share(g, *n) >= t.interleave_share &&
      other->group.size_class == g.group.size_class) {
    auto [own, others] = names_of(g.group, other->group);
    f.message.replace(0, g.group.name.size(), own); // it starts with the name
    f.message += ", interleaved with " + others + " in the " + std::to_string(g.group.size_class) +
                 "-byte size class";
    f.fix = "segregate " + own + " from " + others + ": " + segregate_flag(own_pool(g.group));
  } else if (!g.strides.empty() && g.strides[0].share >= 0.5 && g.strides[0].bytes >= 128 &&
             is_pow2(static_cast<uint64_t>(std::llabs(g.strides[0].bytes)))) {
    const uint64_t stride = static_cast<uint64_t>(std::llabs(g.strides[0].bytes));
    const uint64_t lines = stride / 64;
    f.message += "; its objects sit " + std::to_string(g.strides[0].bytes) + " bytes apart";
    // Back to back in their own class, a pool keeps them that far apart:
    // only padding changes the stride. Farther apart, something else sits
    // between them, and a pool of their own packs them.
    const bool own_stride = stride <= g.group.size_class;
    // Asked aligned: the stride is farther than their class, or the class
    // itself is the alignment's (jemalloc serves aligned_alloc(4096, 256)
    // from its 4096-byte class: stride and class alike, yet the 256 bytes
    // asked would have packed 256 apart).
    const uint64_t natural = r.allocator == "jemalloc" ? jemalloc_size_class(g.group.requested_size)
                                                       : glibc_usable_size(g.group.requested_size);
    if (g.group.aligned_api && (!own_stride || natural < stride)) {
      f.fix = "the program asks for these objects aligned (posix_memalign, aligned_alloc or "
              "an over-aligned new), and the allocator starts each on a " +
              std::to_string(stride) +
              "-byte boundary: no rule moves them off the alignment asked for. Ask for no more "
              "than the objects need (64 bytes keeps each on its own line), or start each "
              "object's hot part a different multiple of 64 bytes into its block (cache "
              "colouring)";
    } else if (uint64_t pad = odd_stride_pad(lines); pad && own_stride) {
      f.fix = "pad the objects to an odd number of lines (" + std::to_string(pad) +
              " bytes), in a pool of their own, which alone would keep them " +
              std::to_string(stride) +
              " bytes apart: " + segregate_flag(own_pool(g.group) + ",pad=" + std::to_string(pad));
    } else if (pad) {
      // A pool's class, not the program allocator's block (glibc's 56
      // usable bytes of a 48-byte request sit 48 apart in a pool).
      f.fix = "segregate them, which packs them " +
              std::to_string(pool_stride(g.group.requested_size, 0, 0)) +
              " bytes apart, or pad them to an odd number of lines (pad=" + std::to_string(pad) +
              "): " + segregate_flag(own_pool(g.group));
    } else if (stride >= 4096) {
      // jemalloc's classes from 4 KiB up are whole multiples of 16 lines, and
      // a pool's large objects start on pages too: no rule moves them.
      f.fix = "no padding gives these objects an odd line stride in a pool's size classes "
              "(jemalloc's) at " +
              std::to_string(lines * 64) +
              " bytes, and a pool keeps them page-aligned as well: stagger their hot fields "
              "in the program instead (cache colouring: start each object's hot part a "
              "different multiple of 64 bytes into it), or make them smaller than a page";
    } else {
      // From 512 bytes up, jemalloc's classes (4 to each doubling) are all an
      // even number of lines: padding reaches half the sets at best.
      f.fix = "no padding gives these objects an odd line stride in a pool's size classes "
              "(jemalloc's, all an even number of lines from 512 bytes up) at " +
              std::to_string(lines * 64) +
              " bytes: stagger their hot fields in the program instead (cache colouring: "
              "start each object's hot part a different multiple of 64 bytes into it), or "
              "make them 448 bytes or less (7 lines), which padding can then place on "
              "every set";
    }
  } else {
    f.fix =
        "segregate " + g.group.name + " into its own pool: " + segregate_flag(own_pool(g.group));
  }
  out.push_back(std::move(f));
}

void line_straddle(const GroupReport &g, const FindingThresholds &t, std::vector<Finding> &out) {
  uint64_t extent = g.hot_bytes ? g.hot_bytes : g.group.requested_size;
  if (g.objects < t.min_objects || g.straddle_fraction < t.straddle_medium ||
      extent > t.straddle_max_bytes)
    return;
  Finding f;
  f.kind = "line_straddle";
  f.severity = g.straddle_fraction >= t.straddle_high ? "high" : "medium";
  f.groups = {g.group.id};
  f.metric["straddle_fraction"] = g.straddle_fraction;
  f.metric["lines_per_object"] = g.lines_per_object;
  uint64_t bytes = g.hot_bytes ? g.hot_bytes : g.group.requested_size;
  std::string which = std::to_string(bytes) + " bytes";
  if (g.hot_bytes && g.hot_offset)
    which = "hot bytes " + std::to_string(g.hot_offset) + "-" +
            std::to_string(g.hot_offset + g.hot_bytes) + " (" + g.group.type + "'s first " +
            std::to_string(g.hot_bytes) + ", behind make_shared's control block)";
  else if (g.hot_bytes)
    which = "hot " + which;
  f.message = pct(g.straddle_fraction) + " of " + g.group.name + "'s objects have their " + which +
              " across a line boundary: one more cache miss each";
  // The smallest alignment that keeps `bytes` within a line: a start at a
  // multiple of bit_ceil(bytes) <= 64 leaves room to the line's end (24-byte
  // entries need 32, not a line each: half the memory of align=64). In a
  // pool of their own: aligned objects served from the size class they grow
  // into would interleave with that class's other groups.
  // Behind a control block, the hot part ends hot_offset + bytes into the
  // object: the start's alignment must keep all of that within a line.
  const uint64_t offset = g.hot_bytes ? g.hot_offset : 0;
  const uint64_t end = offset + bytes;
  const uint64_t align = straddle_align(end);
  const std::string rule = own_pool(g.group) + ",align=" + std::to_string(align);
  // Blocks on lines put the hot part `offset % 64` bytes into one: where it
  // then crosses more lines than its size needs, no alignment of the blocks
  // helps, only the record's own alignment or a smaller hot part.
  const uint64_t need = (bytes + 63) / 64;
  if (offset && (offset % 64 + bytes + 63) / 64 > need) {
    f.fix = "behind make_shared's " + std::to_string(offset) + "-byte control block, " +
            g.group.type + "'s hot " + std::to_string(bytes) + " bytes start " +
            std::to_string(offset % 64) +
            " bytes into a line however the blocks are aligned: "
            "no rule keeps them within " +
            std::to_string(need) + (need > 1 ? " lines" : " line") + ". In the program: give " +
            g.group.type +
            " alignas(64) (make_shared then starts it on a line of its own), or "
            "bring the fields searches read within its first " +
            std::to_string(need * 64 - offset % 64) + " bytes";
    out.push_back(std::move(f));
    return;
  }
  if (end <= 64)
    f.fix = "align the objects to " + std::to_string(align) +
            " bytes, in a pool of their own: " + segregate_flag(rule);
  else if (g.hot_bytes)
    f.fix = "the hot part is more than a line: put the fields searches read first, and align "
            "to 64, which keeps them on as few lines as their size needs: " +
            segregate_flag(rule);
  else
    f.fix = "put the fields searches read first, pass --hot to measure them, and align to 64: " +
            segregate_flag(rule);
  out.push_back(std::move(f));
}

void pair_findings(const Report &r, const GroupReport &g, const FindingThresholds &t,
                   std::vector<Finding> &out) {
  if (g.objects < t.min_objects)
    return;
  for (const auto &n : g.neighbours) {
    if (n.group == g.group.id)
      continue;
    const GroupReport *other = by_id(r, n.group);
    if (!other)
      continue;
    double next_to = next_to_share(g, n);
    // Reported once per pair: from the bigger group's side.
    bool first = g.group.id < other->group.id;
    if (first && other->group.size_class == g.group.size_class && next_to >= t.interleave_share) {
      Finding f;
      f.kind = "size_class_sharing";
      f.severity = next_to >= 0.5 ? "medium" : "low";
      f.groups = {g.group.id, other->group.id};
      f.metric["interleaved_share"] = next_to;
      f.metric["size_class"] = static_cast<double>(g.group.size_class);
      auto [own, others] = names_of(g.group, other->group);
      f.message = own + " and " + others + " share the " + std::to_string(g.group.size_class) +
                  "-byte size class: " + pct(next_to) + " of " + own +
                  "'s objects sit on or next to a line of the other";
      f.fix = "segregate them: " + segregate_flag(own_pool(g.group));
      out.push_back(std::move(f));
    }
    double adjacent = static_cast<double>(n.adjacent_line) / g.objects;
    if (g.group.size_class <= 64 && adjacent >= t.prefetch_share) {
      Finding f;
      f.kind = "prefetch_pollution";
      f.severity = "medium";
      f.groups = {g.group.id, other->group.id};
      f.metric["adjacent_share"] = adjacent;
      auto [own, others] = names_of(g.group, other->group);
      f.message = pct(adjacent) + " of " + own +
                  "'s lines pair (128-byte prefetch) with a line of " + others +
                  ": the adjacent-line prefetcher fills the cache with it";
      f.fix = "segregate " + own + ": " + segregate_flag(own_pool(g.group));
      out.push_back(std::move(f));
    }
  }
}

// True when it reported the group.
bool thread_sharing(const GroupReport &g, const FindingThresholds &t, std::vector<Finding> &out) {
  if (!g.lines_total || g.objects < t.min_objects)
    return false;
  double share = static_cast<double>(g.cross_thread_lines) / g.lines_total;
  if (share < t.cross_thread_share)
    return false;
  Finding f;
  // The record's own size: one padded to a line is still several to a line
  // in an allocator's larger chunks (64 bytes in glibc's 80).
  bool small = g.group.requested_size <= t.false_sharing_max_size;
  f.kind = small ? "false_sharing" : "cross_thread_line_sharing";
  f.severity = small ? "high" : "medium";
  f.groups = {g.group.id};
  f.metric["cross_thread_line_share"] = share;
  f.message = pct(share) + " of " + g.group.name +
              "'s lines also hold objects allocated by another thread" +
              (small ? std::string(": small objects (") + std::to_string(g.group.requested_size) +
                           " bytes, " + std::to_string(g.group.size_class) +
                           " with the allocator's rounding): if each thread writes its "
                           "own, they ping-pong the line. The trace shows who allocated "
                           "them, not who writes them: confirm with perf c2c where a PMU "
                           "exists"
                     : "");
  f.fix = small ? "pad each object to a line, in a pool of their own: " +
                      segregate_flag(own_pool(g.group) + ",pad=64,align=64")
                : "give each thread's objects their own lines or pool: " +
                      segregate_flag(own_pool(g.group));
  out.push_back(std::move(f));
  return true;
}

// Small objects that hold a lock, packed several to a line, but
// all allocated by one thread, so thread_sharing cannot see them: the design's
// DBx1000 rows, 48-byte mutexes back to back, locked by whichever worker
// takes the row. Who writes them is unknown here: a candidate to confirm.
void lock_line_sharing(const GroupReport &g, const FindingThresholds &t,
                       std::vector<Finding> &out) {
  if (g.lock_fields.empty() || g.objects < t.min_objects ||
      g.group.requested_size > t.false_sharing_max_size)
    return;
  uint64_t sharing = 0; // objects with another of the group on one of their lines
  for (const auto &n : g.neighbours)
    if (n.group == g.group.id)
      sharing = n.same_line;
  double share = static_cast<double>(sharing) / static_cast<double>(g.objects);
  if (share < t.cross_thread_share)
    return;
  std::string fields;
  for (const std::string &f : g.lock_fields)
    fields += (fields.empty() ? "" : ", ") + f;
  Finding f;
  f.kind = "false_sharing";
  f.severity = "medium";
  f.groups = {g.group.id};
  f.metric["lock_line_share"] = share;
  f.message =
      pct(share) + " of " + g.group.name + "'s objects (" + std::to_string(g.group.size_class) +
      " bytes with the allocator's rounding) share a "
      "line with another, and each holds a lock (" +
      fields + "): threads that take neighbouring objects write one line" +
      (g.group.requested_size == 64 && g.group.size_class != 64
           ? " (padded to a line but not aligned to one: the allocator starts them at different "
             "offsets of a line)"
           : std::string()) +
      ". One thread allocated them, so which threads write them is not in the trace: "
      "confirm with perf c2c where a PMU exists";
  f.fix = "pad each object to a line, in a pool of their own: " +
          segregate_flag(own_pool(g.group) + ",pad=64,align=64");
  out.push_back(std::move(f));
}

void page_spread(const GroupReport &g, const FindingThresholds &t, std::vector<Finding> &out) {
  if (g.pages_min < t.page_spread_min_pages)
    return;
  double ratio = static_cast<double>(g.pages_4k) / static_cast<double>(g.pages_min);
  if (ratio < t.page_spread_medium)
    return;
  Finding f;
  f.kind = "page_spread";
  f.severity = ratio >= t.page_spread_high ? "high" : "medium";
  f.groups = {g.group.id};
  f.metric["pages_4k"] = static_cast<double>(g.pages_4k);
  f.metric["pages_min"] = static_cast<double>(g.pages_min);
  f.metric["regions_2m"] = static_cast<double>(g.regions_2m);
  f.message = g.group.name + " spreads over " + std::to_string(g.pages_4k) +
              " pages where its bytes would fill " + std::to_string(g.pages_min) + " (" +
              num(ratio) + "x): that many more TLB entries on every traversal";
  f.fix = "segregate it into a pool (its own contiguous pages): " +
          segregate_flag(own_pool(g.group) + (g.pages_min >= 512 ? ",hugepages=1" : ""));
  out.push_back(std::move(f));
}

std::string offsets_text(const std::vector<std::pair<uint64_t, uint64_t>> &offsets, size_t n) {
  std::string s;
  for (size_t i = 0; i < offsets.size() && i < n; ++i)
    s += (i ? ", " : "") + std::to_string(offsets[i].first);
  if (offsets.size() > n)
    s += " (+" + std::to_string(offsets.size() - n) + " more)";
  return s;
}

// Transactions aborted by false conflicts on a group's lines: two of them
// touched different bytes of one line, which the hardware cannot tell apart.
void htm_false_conflict(const Report &r, const HtmGroupAborts &h, const FindingThresholds &t,
                        std::vector<Finding> &out) {
  const HtmAbortReport &hr = *r.htm;
  uint64_t conflicts = hr.by_cause[0];
  const GroupReport *g = by_id(r, h.group);
  if (!g || !conflicts || h.conflicts_false < t.htm_min_false)
    return;
  double share = static_cast<double>(h.conflicts_false) / static_cast<double>(conflicts);
  // Per 1000 completed transactions; without their count, the share decides.
  double rate = hr.transactions ? 1000.0 * static_cast<double>(h.conflicts_false) /
                                      static_cast<double>(hr.transactions)
                                : -1;
  if (share < t.htm_false_share || (rate >= 0 && rate < t.htm_false_rate_medium))
    return;
  Finding f;
  f.kind = "htm_false_conflict";
  f.severity = rate >= t.htm_false_rate_high || (rate < 0 && share >= 0.3) ? "high" : "medium";
  if (rate >= 0) {
    f.metric["false_per_1000_transactions"] = rate;
    f.metric["transactions"] = static_cast<double>(hr.transactions);
  }
  f.groups = {h.group};
  f.metric["false_conflicts"] = static_cast<double>(h.conflicts_false);
  f.metric["true_conflicts"] = static_cast<double>(h.conflicts_true);
  f.metric["conflict_aborts"] = static_cast<double>(conflicts);
  f.metric["false_share"] = share;
  if (!h.false_offsets.empty())
    f.metric["hot_offset"] = static_cast<double>(h.false_offsets[0].first);
  f.message = pct(share) + " of the transactions' conflict aborts (" +
              std::to_string(h.conflicts_false) + " of " + std::to_string(conflicts) +
              (rate >= 0 ? ", " + num(rate) + " per 1000 transactions" : std::string()) +
              ") are false conflicts on lines of " + g->group.name +
              ": the two sides touched different bytes of one line; the aborted side's at "
              "offsets " +
              offsets_text(h.false_offsets, 4) + " of the object";
  if (!h.other_offsets.empty())
    f.message += ", the other side's at " + offsets_text(h.other_offsets, 4);
  // Another group counts as sharing the lines when the other side touched it
  // in at least a quarter of the false conflicts.
  const GroupReport *sharer = !h.sharers.empty() && h.sharers[0].second * 4 >= h.conflicts_false
                                  ? by_id(r, h.sharers[0].first)
                                  : nullptr;
  if (sharer)
    f.message += " of " + names_of(g->group, sharer->group).second + " (" +
                 std::to_string(h.sharers[0].second) + " times), which shares those lines";
  if (sharer) {
    auto [own, others] = names_of(g->group, sharer->group);
    f.fix =
        "keep " + own + " off the lines of " + others + ": " + segregate_flag(own_pool(g->group));
  } else if (h.neighbour_object_conflicts * 2 >= h.conflicts_false &&
             g->group.requested_size <= 64) {
    f.fix = "the other side touched a neighbouring object of the group: give each its own "
            "line: " +
            segregate_flag(own_pool(g->group) + ",pad=64,align=64");
  } else if (g->straddle_fraction >= t.straddle_medium) {
    // Objects starting mid-line: fields laid out a line apart share one.
    f.fix = "align the objects to lines, so that fields laid out on different lines stay "
            "there: " +
            segregate_flag(own_pool(g->group) + ",align=64") +
            "; where conflicts remain, put the fields that different transactions "
            "write on lines of their own";
  } else {
    f.fix = "put the fields that different transactions write on lines of their own: split or "
            "pad the record at offsets " +
            offsets_text(h.false_offsets, 4) +
            ", or scatter entries written together over separate lines, as Euno-B+Tree's "
            "segmented leaves do";
  }
  out.push_back(std::move(f));
}

// Capacity aborts: a transaction's lines overflowed an L1 set. With a small
// footprint that is uneven set use (Karnagel et al.): lines of many objects
// at the same place in their pages pile onto one set.
void htm_capacity(const Report &r, const HtmGroupAborts &h, const FindingThresholds &t,
                  std::vector<Finding> &out) {
  const HtmAbortReport &hr = *r.htm;
  uint64_t capacity = hr.by_cause[1];
  const GroupReport *g = by_id(r, h.group);
  if (!g || !hr.aborts || capacity < t.htm_min_capacity || !h.capacity_aborts)
    return;
  double share = static_cast<double>(capacity) / static_cast<double>(hr.aborts);
  uint64_t all_lines = 0;
  for (const auto &other : hr.groups)
    all_lines += other.capacity_lines;
  double group_share =
      all_lines ? static_cast<double>(h.capacity_lines) / static_cast<double>(all_lines) : 0;
  if (share < t.htm_capacity_share_medium || group_share < t.htm_capacity_group_share)
    return;
  uint64_t l1_lines = uint64_t{hr.l1_sets} * hr.l1_ways;
  bool uneven = l1_lines && hr.capacity_mean_lines < t.htm_uneven_footprint * l1_lines;
  double same_offset = h.capacity_lines ? static_cast<double>(h.capacity_same_page_offset) /
                                              static_cast<double>(h.capacity_lines)
                                        : 0;
  Finding f;
  f.kind = "htm_capacity";
  f.severity = share >= t.htm_capacity_share_high ? "high" : "medium";
  f.groups = {h.group};
  f.metric["capacity_aborts"] = static_cast<double>(capacity);
  f.metric["capacity_share"] = share;
  f.metric["group_lines_share"] = group_share;
  f.metric["mean_transaction_lines"] = hr.capacity_mean_lines;
  f.metric["mean_transaction_sets"] = hr.capacity_mean_sets;
  f.metric["l1_lines"] = static_cast<double>(l1_lines);
  f.metric["same_page_offset_share"] = same_offset;
  f.message = pct(share) + " of the aborts (" + std::to_string(capacity) +
              ") are capacity aborts, and " + pct(group_share) +
              " of the lines in the overflowing L1 sets are " + g->group.name + "'s (offsets " +
              offsets_text(h.capacity_offsets, 4) + " of its objects)";
  if (uneven)
    f.message += "; the transactions held only " + num(hr.capacity_mean_lines) + " lines over " +
                 num(hr.capacity_mean_sets) + " sets of the " + std::to_string(l1_lines) +
                 "-line L1: a few sets overflowed while the others had room (uneven set use)";
  else
    f.message += "; the transactions held " + num(hr.capacity_mean_lines) + " lines of the " +
                 std::to_string(l1_lines) + "-line L1: the footprint itself is too big";
  if (same_offset >= 0.5)
    f.message += "; " + pct(same_offset) +
                 " of those lines sit at one offset within their 4 KiB pages: the objects start "
                 "alike, so the same field of each maps to the same set";
  if (uneven && same_offset >= 0.5)
    f.fix = "stagger the objects so that they do not start at the same place in a page: start "
            "each a few lines further in (cache colouring), or size them so that their stride "
            "is not a multiple of 4 KiB (allocator size classes of 4 KiB and more are page "
            "multiples; padding within one of them changes nothing)";
  else if (uneven)
    f.fix = "spread the lines a transaction touches over more sets: fewer lines per object on "
            "the search path (a binary search, hot fields first), or objects placed at varied "
            "offsets";
  else
    f.fix = "touch fewer lines per transaction: smaller keys, payloads or nodes, or split the "
            "transaction (Eunomia's upper and lower regions)";
  out.push_back(std::move(f));
}

// Layout costs in proportion to how often the program reaches the objects,
// which the trace does not say; the share of the heap they hold stands in
// for it, and a group small enough to stay in the L1 misses little however
// it is laid out. False sharing is left as it is: a few contended locks cost
// as much as many. So are aborted transactions, which are counted.
void weigh_by_footprint(const Report &r, const FindingThresholds &t, std::vector<Finding> &out) {
  uint64_t l1_bytes = 0, line_size = 64;
  for (const auto &level : r.levels)
    if (level.level == 1) {
      l1_bytes = level.size_bytes;
      line_size = level.line_size ? level.line_size : 64;
    }
  for (Finding &f : out) {
    if (f.kind == "false_sharing" || f.kind.rfind("htm_", 0) == 0 || f.groups.empty())
      continue;
    const GroupReport *g = by_id(r, f.groups[0]);
    if (!g || !r.live_bytes)
      continue;
    const double share = static_cast<double>(g->group.bytes) / static_cast<double>(r.live_bytes);
    const uint64_t footprint = g->lines_total * line_size;
    f.metric["heap_share"] = share;
    const bool fits_l1 =
        l1_bytes && static_cast<double>(footprint) <= t.minor_l1_fraction * l1_bytes;
    if (share >= t.minor_heap_share && !fits_l1)
      continue;
    f.severity = f.severity == "high" ? "medium" : "low";
    char why[160];
    if (fits_l1)
      std::snprintf(why, sizeof why,
                    " (a minor group: its %llu lines, %.3g KiB, stay in the L1's %llu KiB when "
                    "hot; one severity lower)",
                    static_cast<unsigned long long>(g->lines_total), footprint / 1024.0,
                    static_cast<unsigned long long>(l1_bytes / 1024));
    else
      std::snprintf(why, sizeof why,
                    " (a minor group: %.2g%% of the live heap's bytes; one severity lower)",
                    share * 100);
    f.message += why;
  }
}

// How bad a finding's case is among findings of its kind and severity, by
// the metric its message quotes: the larger, the worse.
double badness(const Finding &f) {
  auto m = [&f](const std::string &key) {
    auto it = f.metric.find(key);
    return it == f.metric.end() ? 0.0 : it->second;
  };
  if (f.kind == "line_straddle")
    return m("straddle_fraction");
  if (f.kind == "set_underutilization") {
    double least = 1;
    for (const auto &[key, value] : f.metric)
      if (key.rfind("set_effective_fraction_L", 0) == 0)
        least = std::min(least, value);
    return 1 - least;
  }
  if (f.kind == "size_class_sharing")
    return m("interleaved_share");
  if (f.kind == "prefetch_pollution")
    return m("adjacent_share");
  if (f.kind == "cross_thread_line_sharing")
    return m("cross_thread_line_share");
  if (f.kind == "false_sharing")
    return m("lock_line_share");
  if (f.kind == "page_spread")
    return m("pages_4k") / std::max(1.0, m("pages_min"));
  if (f.kind == "htm_false_conflict")
    return m("false_share");
  if (f.kind == "htm_capacity")
    return m("capacity_share");
  return 0;
}

// A call site allocating many sizes (a buffer pool, a string builder) has one
// group per size class, and each would carry the same finding: one finding
// per (kind, site) reads better. Single-group findings of the same kind and
// site merge into one that lists every group and speaks for the worst of
// them: the most severe, and of those the worst case (badness), whose group
// comes first.
std::vector<Finding> merge_by_site(const Report &r, std::vector<Finding> in) {
  auto site_of = [&](const Finding &f) -> const Group * {
    if (f.groups.size() != 1)
      return nullptr;
    const GroupReport *g = by_id(r, f.groups[0]);
    return g && !g->group.site.function.empty() ? &g->group : nullptr;
  };
  std::vector<Finding> out;
  std::vector<bool> used(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (used[i])
      continue;
    Finding f = in[i];
    const Group *site = site_of(f);
    size_t merged = 0;
    for (size_t j = i + 1; site && j < in.size(); ++j) {
      const Group *other = site_of(in[j]);
      // Size classes of one call: two calls on one line are findings apart.
      if (used[j] || in[j].kind != f.kind || !other || !same_site(site->site, other->site) ||
          site->site.column != other->site.column)
        continue;
      used[j] = true;
      ++merged;
      if (in[j].severity == f.severity && badness(in[j]) > badness(f)) {
        std::vector<uint32_t> groups = std::move(f.groups);
        groups.insert(groups.begin(), in[j].groups[0]);
        f = in[j];
        f.groups = std::move(groups);
      } else {
        f.groups.push_back(in[j].groups[0]);
      }
    }
    if (merged) {
      f.metric["groups_merged"] = static_cast<double>(merged + 1);
      f.message += " (and " + std::to_string(merged) + " more size class" +
                   (merged > 1 ? "es" : "") + " of the same call site alike)";
    }
    out.push_back(std::move(f));
  }
  return out;
}

// The fix's --segregate flag replaced by `with` (another flag, or prose when
// no rule will do): the text goes on around it.
void replace_fix_flag(Finding &f, const std::string &with) {
  std::string flag = segregate_flag(segregate_flag_rule(f.fix));
  if (size_t at = f.fix.find(flag); at != std::string::npos)
    f.fix.replace(at, flag.size(), with);
}

// The rule now `rule`, in the finding and its fix.
void set_rule(Finding &f, const rules::Rule &rule) {
  f.rule = rule_text(rule);
  replace_fix_flag(f, segregate_flag(f.rule));
}

// `pool` + `suffix` as the rule's pool, the name cut to leave the suffix room.
void set_pool(rules::Rule &rule, const std::string &pool, const std::string &suffix) {
  std::string name = pool.substr(0, std::min(pool.size(), rules::kMaxPoolName - 1 - suffix.size()));
  name += suffix;
  std::memcpy(rule.pool, name.c_str(), name.size() + 1);
}

// seg_malloc's objects: no rule reroutes them (a rule by the caller's name
// would take the caller's other allocations instead). The pool's options do
// what the rule's actions would.
void fix_in_pool_options(const GroupReport &g, const rules::Rule &rule, Finding &f) {
  std::string options;
  auto add = [&](const std::string &o) { options += (options.empty() ? "" : ", ") + o; };
  if (rule.align)
    add(".alignment = " + std::to_string(rule.align));
  if (rule.pad)
    add(".pad_to = " + std::to_string(rule.pad));
  if (rule.huge_pages)
    add(".huge_pages = 1");
  f.rule.clear();
  replace_fix_flag(f, "in code: " +
                          (options.empty() ? "these objects come from the program's pool " +
                                                 g.group.name + "; give them one of their own"
                                           : "create the program's pool " + g.group.name +
                                                 " with seg_pool_options " + options) +
                          " (its objects come from seg_malloc, which rules do not reroute)");
}

// A rule names a site by its function, and the interposer routes by function
// and requested size: the groups of another line of the same function (a
// struct, and the string allocated beside it) would go along, and the fix
// would fix nothing. Such a rule is narrowed to requested sizes that hold
// its own groups' and no other group's, first for all of them, then for
// the subject alone; where none do, the fix offers no rule. Requested sizes,
// not classes: a chunk reused for a smaller request has the class of the
// larger one (a 24-byte map node in a 40-byte chunk), and a size key tells
// the two apart where the class does not. Which groups are its own:
// routed_along (rule_match.h).

// The widest size range that holds `want` and meets no span of `others`,
// up to `cap` (the largest class it is for: a tidy bound, as sizes up to a
// class land in it); none when one of them overlaps `want`.
std::optional<SizeSpan> size_range_apart(SizeSpan want, uint64_t cap,
                                         const std::vector<const GroupReport *> &others) {
  SizeSpan range{1, std::max(cap, want.hi)};
  for (const GroupReport *g : others) {
    SizeSpan o = requested_span(g->group);
    if (o.hi >= want.lo && o.lo <= want.hi)
      return std::nullopt;
    if (o.hi < want.lo)
      range.lo = std::max(range.lo, o.hi + 1);
    else
      range.hi = std::min(range.hi, o.lo - 1);
  }
  return range;
}

void narrow_rule(const Report &r, const GroupReport &subject, rules::Rule rule, Finding &f) {
  std::vector<uint32_t> merged; // the size classes a merged finding lists
  if (f.metric.count("groups_merged"))
    merged = f.groups;
  std::vector<const GroupReport *> mine, others;
  for (uint32_t id : groups_routed(rule, r)) {
    const GroupReport *g = by_id(r, id);
    (routed_along(subject.group, g->group, merged) ? mine : others).push_back(g);
  }
  if (others.empty() || mine.empty())
    return;
  std::optional<SizeSpan> range;
  if (!rule.has_size) {
    SizeSpan site = requested_span(mine[0]->group);
    uint64_t cap = 0;
    for (const GroupReport *g : mine) {
      SizeSpan s = requested_span(g->group);
      site = {std::min(site.lo, s.lo), std::max(site.hi, s.hi)};
      cap = std::max(cap, g->group.size_class);
    }
    range = size_range_apart(site, cap, others);
    // The whole site cannot be told apart (its line also allocates, say, a
    // vector's growing buffer): the subject's own sizes may still be.
    if (!range)
      range = size_range_apart(requested_span(subject.group), subject.group.size_class, others);
  }
  if (range) {
    rule.has_size = true;
    rule.size_min = range->lo;
    rule.size_max = range->hi;
    // The function's other sizes may get a pool too: the names differ.
    if (rule.pool[0])
      set_pool(rule, rule.pool, "." + std::to_string(range->lo) + "-" + std::to_string(range->hi));
    set_rule(f, rule);
    return;
  }
  // What goes along even with a rule for the subject's own sizes: the
  // groups whose requested sizes meet its own (the function's others a
  // size key would leave out). A few names say which; a real program's
  // hundred would bury the fix.
  std::vector<const GroupReport *> along = others;
  if (!rule.has_size) {
    SizeSpan own = requested_span(subject.group);
    std::erase_if(along, [&](const GroupReport *g) {
      SizeSpan o = requested_span(g->group);
      return o.hi < own.lo || o.lo > own.hi;
    });
    if (along.empty())
      along = others;
  }
  constexpr size_t kNamed = 3;
  std::string names;
  for (size_t i = 0; i < along.size() && i < kNamed; ++i)
    names += (names.empty() ? "" : ", ") + along[i]->group.name + " [group " +
             std::to_string(along[i]->group.id) + "]";
  if (along.size() > kNamed)
    names += " and " + std::to_string(along.size() - kNamed) + " other group" +
             (along.size() - kNamed > 1 ? "s" : "");
  f.rule.clear();
  replace_fix_flag(f, "in code (docs/segregation-api.md): no rule routes these objects without " +
                          names + " (a rule matches a function and sizes, not a line)");
}

// A fix's rule as the report offers it: for the finding's first group (the
// others of a pair are what it keeps apart from) and what fix_is_for adds,
// and only where a rule can do that.
void settle_rule(const Report &r, Finding &f) {
  rules::Rule rule;
  rules::ParseError e{};
  const GroupReport *subject = f.groups.empty() ? nullptr : by_id(r, f.groups[0]);
  if (f.rule.empty() || !subject || !rules::parse_rule(f.rule.data(), f.rule.size(), 1, &rule, &e))
    return;
  if (subject->group.program_pool)
    fix_in_pool_options(*subject, rule, f);
  else
    narrow_rule(r, *subject, rule, f);
}

// A fix must not make the next finding: the pool its rule moves the objects
// into has classes of its own, which may put aligned objects a power of two
// of lines apart (a fraction of the sets) or packed ones across lines. The
// rule takes the align and pad that keep both away (pool_layout.h), and the
// fix says why; where no padding can, it says that instead.
void keep_layout(const Report &r, Finding &f, const FindingThresholds &t) {
  rules::Rule rule;
  rules::ParseError e{};
  const GroupReport *subject = f.groups.empty() ? nullptr : by_id(r, f.groups[0]);
  if (f.rule.empty() || !subject || !rules::parse_rule(f.rule.data(), f.rule.size(), 1, &rule, &e))
    return;
  bool few_sets = false;
  std::string why = keep_pool_layout(rule, *subject, t, &few_sets);
  if (why.empty())
    return;
  if (few_sets && f.kind == "set_underutilization") {
    // The rule would leave the finding as it is: no rule, the reason instead.
    f.rule.clear();
    f.fix = "no rule helps (" + why +
            "): stagger their hot fields in the program instead (cache colouring: start each "
            "object's hot part a different multiple of 64 bytes into it), or make them smaller";
    return;
  }
  set_rule(f, rule);
  f.fix += " (" + why + ")";
}

// Pool names come from a site's function without its template arguments:
// two instantiations (Tree<long, long>::insert, Tree<int, std::string>::insert)
// would share "Tree.insert", one pool for two types. Where rules for
// different sites name one pool, each such pool takes its group's id.
void separate_pools(std::vector<Finding> &out) {
  struct Use {
    Finding *finding;
    rules::Rule rule;
  };
  std::map<std::string, std::vector<Use>> by_pool;
  for (Finding &f : out) {
    rules::Rule rule;
    rules::ParseError e{};
    if (f.rule.empty() || f.groups.empty() ||
        !rules::parse_rule(f.rule.data(), f.rule.size(), 1, &rule, &e) || !rule.pool[0])
      continue;
    by_pool[rule.pool].push_back({&f, rule});
  }
  for (auto &[pool, uses] : by_pool) {
    std::string keys = match_keys_of(uses[0].rule);
    if (std::all_of(uses.begin(), uses.end(),
                    [&](const Use &u) { return match_keys_of(u.rule) == keys; }))
      continue;
    for (Use &u : uses) {
      set_pool(u.rule, pool, ".g" + std::to_string(u.finding->groups[0]));
      set_rule(*u.finding, u.rule);
    }
  }
}

} // namespace

std::vector<Finding> find_problems(const Report &r, const FindingThresholds &t) {
  // Groups a report names alike (one pool's size classes, one line's)
  // carry their table id in the findings' words, so that no two findings
  // read the same.
  // A copy only where some are (a report holds every group's objects).
  std::map<std::string, int> uses;
  for (const auto &g : r.groups)
    ++uses[g.group.name];
  std::optional<Report> renamed;
  if (std::any_of(uses.begin(), uses.end(), [](const auto &u) { return u.second > 1; })) {
    renamed = r;
    for (auto &g : renamed->groups)
      if (uses[g.group.name] > 1)
        g.group.name += " [group " + std::to_string(g.group.id) + "]";
  }
  const Report &named = renamed ? *renamed : r;
  std::vector<Finding> out;
  for (const auto &g : named.groups) {
    if (g.objects < t.min_objects)
      continue;
    set_underutilization(named, g, t, out);
    line_straddle(g, t, out);
    pair_findings(named, g, t, out);
    if (!thread_sharing(g, t, out)) // another thread's objects on its lines say more
      lock_line_sharing(g, t, out);
    page_spread(g, t, out);
  }
  if (r.htm)
    for (const HtmGroupAborts &h : r.htm->groups) {
      htm_false_conflict(named, h, t, out);
      htm_capacity(named, h, t, out);
    }
  weigh_by_footprint(named, t, out);
  // Most severe first, so a merged finding keeps its worst case's words.
  std::stable_sort(out.begin(), out.end(), [](const Finding &a, const Finding &b) {
    return severity_rank(a.severity) > severity_rank(b.severity);
  });
  out = merge_by_site(r, std::move(out));
  for (Finding &f : out) {
    f.rule = rule_of_fix(f.fix);
    settle_rule(r, f);
    keep_layout(r, f, t);
  }
  separate_pools(out);
  return out;
}

std::string rule_of_fix(const std::string &fix) {
  std::string rule = segregate_flag_rule(fix);
  rules::Rule parsed;
  rules::ParseError e{};
  if (rule.empty() || !rules::parse_rule(rule.data(), rule.size(), 1, &parsed, &e))
    return {};
  return rule_text(parsed);
}

} // namespace memlayout::inspector
