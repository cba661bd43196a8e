#include "htm_aborts.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace memlayout::inspector {
namespace {

constexpr size_t kTopOffsets = 8;

// The live object holding addr, by index into snapshot.objects; -1 if none.
int64_t object_at(const HeapSnapshot &s, uint64_t addr) {
  auto it = std::upper_bound(s.objects.begin(), s.objects.end(), addr,
                             [](uint64_t a, const LiveObject &o) { return a < o.addr; });
  if (it == s.objects.begin())
    return -1;
  --it;
  uint64_t extent = std::max<uint64_t>(it->size, 1);
  return addr < it->addr + extent ? it - s.objects.begin() : -1;
}

// The first object overlapping [line, line + 64).
int64_t object_on_line(const HeapSnapshot &s, uint64_t line) {
  int64_t i = object_at(s, line);
  if (i >= 0)
    return i;
  auto it = std::lower_bound(s.objects.begin(), s.objects.end(), line,
                             [](const LiveObject &o, uint64_t a) { return o.addr < a; });
  return it != s.objects.end() && it->addr < line + 64 ? it - s.objects.begin() : -1;
}

template <class K> std::vector<std::pair<K, uint64_t>> top(const std::map<K, uint64_t> &counts) {
  std::vector<std::pair<K, uint64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  if (v.size() > kTopOffsets)
    v.resize(kTopOffsets);
  return v;
}

struct Tally {
  uint64_t false_c = 0, true_c = 0, cap_aborts = 0, cap_lines = 0, neighbours = 0;
  std::map<uint64_t, uint64_t> false_off, other_off, cap_off, page_off;
  std::map<uint32_t, uint64_t> sharers;
};

} // namespace

std::optional<HtmAbortReport> analyse_htm_aborts(const TraceReader &r, const HeapSnapshot &snapshot,
                                                 const std::vector<Group> &groups) {
  const std::vector<HtmAbort> &aborts = r.htm_aborts();
  if (aborts.empty())
    return std::nullopt;
  // Object index -> group id.
  std::vector<uint32_t> group_of(snapshot.objects.size(), 0);
  std::vector<bool> grouped(snapshot.objects.size(), false);
  for (const Group &g : groups)
    for (uint32_t o : g.objects)
      if (o < group_of.size()) {
        group_of[o] = g.id;
        grouped[o] = true;
      }
  auto group_at = [&](uint64_t addr, const LiveObject **obj) -> int64_t {
    int64_t i = object_at(snapshot, addr);
    if (i < 0 || !grouped[static_cast<size_t>(i)])
      return -1;
    *obj = &snapshot.objects[static_cast<size_t>(i)];
    return group_of[static_cast<size_t>(i)];
  };

  HtmAbortReport out;
  std::unordered_map<uint32_t, Tally> by_group;
  std::map<uint64_t, bool> regions;
  uint64_t cap_lines_sum = 0, cap_sets_sum = 0;
  for (const HtmAbort &a : aborts) {
    if (a.cause == trace::HtmCause::kCommits) {
      out.transactions += a.line;
      continue;
    }
    ++out.aborts;
    ++out.by_cause[static_cast<size_t>(a.cause) & 3];
    if (a.region_id)
      regions[a.region_id] = true;
    if (a.l1_sets) {
      out.l1_sets = a.l1_sets;
      out.l1_ways = a.l1_ways;
    }
    if (a.cause == trace::HtmCause::kConflict) {
      bool overlap = a.flags & trace::kHtmOverlap;
      ++(overlap ? out.conflicts_true : out.conflicts_false);
      out.same_key += (a.flags & trace::kHtmSameKey) != 0;
      out.by_fallback_lock += (a.flags & trace::kHtmByLock) != 0;
      out.by_plain += (a.flags & trace::kHtmByPlain) && !(a.flags & trace::kHtmByLock);
      if (a.flags & trace::kHtmByLock)
        continue; // the fallback lock's line says nothing about the tree's layout
      uint64_t mine = a.read_mask | a.write_mask;
      uint64_t at = a.line + (mine ? static_cast<uint64_t>(__builtin_ctzll(mine)) : 0);
      const LiveObject *obj = nullptr;
      int64_t g = group_at(at, &obj);
      if (g < 0) {
        ++out.unresolved;
        continue;
      }
      Tally &t = by_group[static_cast<uint32_t>(g)];
      if (overlap) {
        ++t.true_c;
        continue;
      }
      ++t.false_c;
      ++t.false_off[at - obj->addr];
      if (a.other_mask) {
        uint64_t other_at = a.line + static_cast<uint64_t>(__builtin_ctzll(a.other_mask));
        const LiveObject *other = nullptr;
        int64_t og = group_at(other_at, &other);
        if (og >= 0) {
          ++t.other_off[other_at - other->addr];
          if (og != g)
            ++t.sharers[static_cast<uint32_t>(og)];
          else if (other != obj)
            ++t.neighbours;
        }
      }
    } else if (a.cause == trace::HtmCause::kCapacity) {
      ++((a.flags & trace::kHtmWriteCapacity) ? out.capacity_write : out.capacity_read);
      cap_lines_sum += a.tx_lines;
      cap_sets_sum += a.tx_sets;
      std::map<uint32_t, bool> struck;
      for (uint64_t line : r.htm_lines(a)) {
        int64_t i = object_on_line(snapshot, line);
        if (i < 0 || !grouped[static_cast<size_t>(i)]) {
          ++out.unresolved;
          continue;
        }
        const LiveObject &obj = snapshot.objects[static_cast<size_t>(i)];
        uint32_t g = group_of[static_cast<size_t>(i)];
        Tally &t = by_group[g];
        ++t.cap_lines;
        ++t.cap_off[line > obj.addr ? line - obj.addr : 0];
        ++t.page_off[line & 4095];
        struck[g] = true;
      }
      for (const auto &[g, yes] : struck)
        ++by_group[g].cap_aborts;
    }
  }
  uint64_t capacity = out.by_cause[1];
  if (capacity) {
    out.capacity_mean_lines = static_cast<double>(cap_lines_sum) / static_cast<double>(capacity);
    out.capacity_mean_sets = static_cast<double>(cap_sets_sum) / static_cast<double>(capacity);
  }
  for (const auto &[id, yes] : regions)
    if (const std::string *name = r.string(id))
      out.regions.push_back(*name);
  for (auto &[g, t] : by_group) {
    HtmGroupAborts ga;
    ga.group = g;
    ga.conflicts_false = t.false_c;
    ga.conflicts_true = t.true_c;
    ga.capacity_aborts = t.cap_aborts;
    ga.capacity_lines = t.cap_lines;
    ga.neighbour_object_conflicts = t.neighbours;
    ga.false_offsets = top(t.false_off);
    ga.other_offsets = top(t.other_off);
    ga.sharers = top(t.sharers);
    ga.capacity_offsets = top(t.cap_off);
    for (const auto &[off, n] : t.page_off)
      ga.capacity_same_page_offset = std::max(ga.capacity_same_page_offset, n);
    out.groups.push_back(std::move(ga));
  }
  std::sort(out.groups.begin(), out.groups.end(), [](const auto &a, const auto &b) {
    uint64_t wa = a.conflicts_false + a.conflicts_true + a.capacity_aborts;
    uint64_t wb = b.conflicts_false + b.conflicts_true + b.capacity_aborts;
    return wa != wb ? wa > wb : a.group < b.group;
  });
  return out;
}

} // namespace memlayout::inspector
