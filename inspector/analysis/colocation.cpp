#include "colocation.h"

#include <algorithm>
#include <limits>

namespace memlayout::inspector {

namespace {

constexpr uint32_t kNoGroup = std::numeric_limits<uint32_t>::max();

// Which lines of a 128-byte pair an object touches. Line and page cells only
// use kLo ("touches the cell").
constexpr uint8_t kLo = 1, kHi = 2;

enum class Grain : uint8_t { kLine, kPair, kPage };

// The allocating threads of a set of objects, as far as the questions asked
// of them need: none, exactly one (which), or several.
struct ThreadSet {
  uint32_t tid = 0;
  uint8_t n = 0; // 0, 1 or 2 (= two or more)
  void add(uint32_t t) {
    if (n == 0) {
      tid = t;
      n = 1;
    } else if (n == 1 && t != tid) {
      n = 2;
    }
  }
};

// Is there an object in x and one in y allocated by different threads? Two
// different threads are necessarily two different objects, so this holds for
// x and y drawn from the same group too.
bool threads_differ(const ThreadSet &x, const ThreadSet &y) {
  if (x.n == 0 || y.n == 0)
    return false;
  return x.n > 1 || y.n > 1 || x.tid != y.tid;
}

// (a, b) -> counters, open addressing on flat vectors: the sweep looks a pair
// up once per cell and group pair, far more often than it inserts one.
class PairTable {
public:
  PairTable() { rehash(64); }

  PairColocation &at(uint32_t a, uint32_t b) {
    const uint64_t key = (static_cast<uint64_t>(a) << 32) | b;
    size_t slot = probe(key);
    if (keys_[slot] == kEmpty) {
      if ((rows_.size() + 1) * 2 > keys_.size()) {
        rehash(keys_.size() * 2);
        slot = probe(key);
      }
      keys_[slot] = key;
      index_[slot] = static_cast<uint32_t>(rows_.size());
      PairColocation row;
      row.a = a;
      row.b = b;
      rows_.push_back(row);
    }
    return rows_[index_[slot]];
  }

  std::vector<PairColocation> take_sorted() {
    std::sort(rows_.begin(), rows_.end(), [](const PairColocation &x, const PairColocation &y) {
      return x.a != y.a ? x.a < y.a : x.b < y.b;
    });
    return std::move(rows_);
  }

private:
  static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();

  size_t probe(uint64_t key) const {
    const size_t mask = keys_.size() - 1;
    // Fibonacci hashing keeps the top bits, the ones both halves of the key reach.
    size_t slot = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (keys_[slot] != kEmpty && keys_[slot] != key)
      slot = (slot + 1) & mask;
    return slot;
  }

  void rehash(size_t slots) {
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(slots));
    keys_.assign(slots, kEmpty);
    index_.assign(slots, 0);
    for (size_t r = 0; r < rows_.size(); ++r) {
      const uint64_t key = (static_cast<uint64_t>(rows_[r].a) << 32) | rows_[r].b;
      const size_t slot = probe(key);
      keys_[slot] = key;
      index_[slot] = static_cast<uint32_t>(r);
    }
  }

  unsigned shift_ = 58;
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> index_;
  std::vector<PairColocation> rows_;
};

// One pass over the objects in address order at one granularity. A "cell" is
// one line, 128-byte pair or page. Only an object's first and last cell can
// hold other objects (its interior is its own), so each object contributes at
// most two entries, and with non-overlapping objects the entries arrive in
// cell order: cells are runs of equal keys, aggregated per group, and
// objects within one cell are counted a group at a time, not pairwise.
class CellSweep {
public:
  CellSweep(Grain grain, const ColocationOptions &opts, size_t groups, PairTable &table,
            Colocation &out)
      : grain_(grain), opts_(opts), table_(table), out_(out), stamp_(groups, kNever),
        cnt_lo_(groups), cnt_hi_(groups), single_lo_(groups), single_hi_(groups), tids_(groups),
        small_tids_(groups), seen_mark_(groups, kNever) {}

  void run(const HeapSnapshot &snapshot, const std::vector<uint32_t> &group_of) {
    const uint64_t line = opts_.line_size;
    const uint64_t unit = grain_ == Grain::kPage ? opts_.page_size : line;
    uint64_t prev_end = 0; // one past the furthest byte seen so far
    bool any = false;
    for (uint32_t i = 0; i < snapshot.objects.size(); ++i) {
      const uint32_t g = group_of[i];
      if (g == kNoGroup)
        continue;
      const LiveObject &o = snapshot.objects[i];
      const uint64_t size = std::max<uint64_t>(o.size, 1);
      const uint64_t last_byte = o.addr + std::min(size - 1, UINT64_MAX - o.addr);
      if (grain_ == Grain::kLine) {
        if (any && o.addr < prev_end)
          ++out_.overlapping_objects;
        prev_end = std::max(prev_end, last_byte + 1);
        any = true;
      }
      const uint64_t u0 = o.addr / unit, u1 = last_byte / unit;
      if (grain_ == Grain::kLine && u1 - u0 > 1)
        out_.group_lines[g] += u1 - u0 - 1; // interior lines: never shared, no entry
      if (grain_ != Grain::kPair) {
        if (u0 == u1) {
          add({u0, g, o.tid, kLo, Role::kSingle, o.size <= opts_.small_object_bytes});
        } else {
          add({u0, g, o.tid, kLo, Role::kFirst, o.size <= opts_.small_object_bytes});
          add({u1, g, o.tid, kLo, Role::kLast, o.size <= opts_.small_object_bytes});
        }
        continue;
      }
      const uint64_t p0 = u0 >> 1, p1 = u1 >> 1;
      const uint8_t lo0 = (u0 & 1) ? 0 : kLo;
      const uint8_t hi1 = (u1 & 1) ? kHi : 0;
      if (p0 == p1) {
        add({p0, g, o.tid, static_cast<uint8_t>(lo0 | hi1), Role::kSingle, false});
      } else {
        add({p0, g, o.tid, static_cast<uint8_t>(lo0 | kHi), Role::kFirst, false});
        add({p1, g, o.tid, static_cast<uint8_t>(kLo | hi1), Role::kLast, false});
      }
    }
    flush();
  }

private:
  enum class Role : uint8_t { kSingle, kFirst, kLast };

  struct Entry {
    uint64_t key;
    uint32_t group, tid;
    uint8_t mask;
    Role role;
    bool small;
  };

  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  void add(const Entry &e) {
    if (open_ && e.key != key_)
      flush();
    if (!open_) {
      open_ = true;
      key_ = e.key;
      ++cell_;
      cell_tids_ = {};
      cell_small_ = {};
      closing_ = opening_ = false;
    }
    const uint32_t g = e.group;
    if (stamp_[g] != cell_) {
      stamp_[g] = cell_;
      cnt_lo_[g] = cnt_hi_[g] = single_lo_[g] = single_hi_[g] = 0;
      tids_[g] = {};
      small_tids_[g] = {};
      touched_.push_back(g);
    }
    cnt_lo_[g] += (e.mask & kLo) != 0;
    cnt_hi_[g] += (e.mask & kHi) != 0;
    if (e.role == Role::kSingle) {
      // An object covering both lines of its pair has no adjacent line of
      // its own there; it is only someone else's neighbour.
      single_lo_[g] += e.mask == kLo;
      single_hi_[g] += e.mask == kHi;
    } else if (e.role == Role::kLast) {
      closing_ = true;
      closing_entry_ = e;
    } else {
      opening_ = true;
      opening_entry_ = e;
    }
    tids_[g].add(e.tid);
    cell_tids_.add(e.tid);
    if (e.small) {
      small_tids_[g].add(e.tid);
      cell_small_.add(e.tid);
    }
  }

  uint64_t &object_metric(PairColocation &p) const {
    return grain_ == Grain::kLine   ? p.same_line
           : grain_ == Grain::kPair ? p.adjacent_line
                                    : p.same_page;
  }

  // Does an object of group a with this mask see an object of group b here?
  bool sees(uint32_t a, uint8_t mask, uint32_t b) const {
    if (grain_ != Grain::kPair)
      return b == a ? cnt_lo_[a] >= 2 : cnt_lo_[b] > 0;
    if (mask == kLo)
      return cnt_hi_[b] > 0;
    if (mask == kHi)
      return cnt_lo_[b] > 0;
    return false;
  }

  void count_single_objects() {
    for (uint32_t a : touched_) {
      for (uint8_t mask : {kLo, kHi}) {
        const uint32_t n = mask == kLo ? single_lo_[a] : single_hi_[a];
        if (n == 0 || (mask == kHi && grain_ != Grain::kPair))
          continue;
        for (uint32_t b : touched_)
          if (sees(a, mask, b))
            object_metric(table_.at(a, b)) += n;
      }
    }
  }

  // Multi-cell objects are counted per object, as the union of what they see
  // in their first and last cell, so that one spanning two lines next to the
  // same group is counted once.
  void count_multi_cell_objects() {
    if (closing_) {
      const Entry &e = closing_entry_;
      ++mark_;
      for (uint32_t b : pending_seen_) {
        seen_mark_[b] = mark_;
        ++object_metric(table_.at(e.group, b));
      }
      for (uint32_t b : touched_)
        if (seen_mark_[b] != mark_ && sees(e.group, e.mask, b))
          ++object_metric(table_.at(e.group, b));
      pending_seen_.clear();
    }
    if (opening_) {
      const Entry &e = opening_entry_;
      pending_seen_.clear();
      for (uint32_t b : touched_)
        if (sees(e.group, e.mask, b))
          pending_seen_.push_back(b);
    }
  }

  void count_cross_thread() {
    if (grain_ == Grain::kLine)
      for (uint32_t a : touched_)
        ++out_.group_lines[a];
    if (cell_tids_.n < 2)
      return;
    if (grain_ == Grain::kLine) {
      ++out_.cross_thread_lines;
      out_.false_sharing_lines += threads_differ(cell_small_, cell_tids_);
      for (uint32_t a : touched_) {
        out_.group_cross_thread_lines[a] += threads_differ(tids_[a], cell_tids_);
        out_.group_false_sharing_lines[a] +=
            threads_differ(small_tids_[a], cell_tids_) || threads_differ(tids_[a], cell_small_);
      }
    } else {
      ++out_.cross_thread_pairs;
    }
    for (size_t i = 0; i < touched_.size(); ++i) {
      for (size_t j = i; j < touched_.size(); ++j) {
        const uint32_t a = touched_[i], b = touched_[j];
        if (!threads_differ(tids_[a], tids_[b]))
          continue;
        const bool false_sharing =
            grain_ == Grain::kLine &&
            (threads_differ(small_tids_[a], tids_[b]) || threads_differ(small_tids_[b], tids_[a]));
        for (int orient = 0; orient < (a == b ? 1 : 2); ++orient) {
          PairColocation &p = orient ? table_.at(b, a) : table_.at(a, b);
          if (grain_ == Grain::kLine) {
            ++p.cross_thread_lines;
            p.false_sharing_lines += false_sharing;
          } else {
            ++p.cross_thread_pairs;
          }
        }
      }
    }
  }

  void flush() {
    if (!open_)
      return;
    count_single_objects();
    count_multi_cell_objects();
    if (grain_ != Grain::kPage)
      count_cross_thread();
    touched_.clear();
    open_ = false;
  }

  const Grain grain_;
  const ColocationOptions &opts_;
  PairTable &table_;
  Colocation &out_;

  // Per-group state of the open cell, valid where stamp_ == cell_.
  std::vector<uint64_t> stamp_;
  std::vector<uint32_t> cnt_lo_, cnt_hi_, single_lo_, single_hi_;
  std::vector<ThreadSet> tids_, small_tids_;
  std::vector<uint32_t> touched_;

  bool open_ = false;
  uint64_t key_ = 0, cell_ = 0;
  ThreadSet cell_tids_, cell_small_;
  bool closing_ = false, opening_ = false;
  Entry closing_entry_{}, opening_entry_{};

  // What the multi-cell object now between its two cells saw in its first.
  std::vector<uint32_t> pending_seen_;
  std::vector<uint64_t> seen_mark_;
  uint64_t mark_ = 0;
};

} // namespace

Colocation analyse_colocation(const HeapSnapshot &snapshot, const std::vector<Group> &groups,
                              const ColocationOptions &opts_in) {
  ColocationOptions opts = opts_in;
  if (opts.line_size == 0)
    opts.line_size = 64;
  if (opts.page_size == 0)
    opts.page_size = 4096;

  Colocation out;
  out.line_size = opts.line_size;
  out.page_size = opts.page_size;
  std::vector<uint32_t> group_of(snapshot.objects.size(), kNoGroup);
  for (uint32_t g = 0; g < groups.size(); ++g) {
    out.group_ids.push_back(groups[g].id);
    uint64_t n = 0;
    for (uint32_t idx : groups[g].objects) {
      if (idx < group_of.size()) {
        group_of[idx] = g;
        ++n;
      }
    }
    out.group_objects.push_back(n);
  }
  out.group_lines.assign(groups.size(), 0);
  out.group_cross_thread_lines.assign(groups.size(), 0);
  out.group_false_sharing_lines.assign(groups.size(), 0);

  PairTable table;
  for (Grain grain : {Grain::kLine, Grain::kPair, Grain::kPage})
    CellSweep(grain, opts, groups.size(), table, out).run(snapshot, group_of);
  out.pairs = table.take_sorted();
  return out;
}

uint64_t metric_value(const PairColocation &p, ColocationMetric m) {
  switch (m) {
  case ColocationMetric::kSameLine:
    return p.same_line;
  case ColocationMetric::kAdjacentLine:
    return p.adjacent_line;
  case ColocationMetric::kSamePage:
    return p.same_page;
  case ColocationMetric::kCrossThreadLines:
    return p.cross_thread_lines;
  case ColocationMetric::kCrossThreadPairs:
    return p.cross_thread_pairs;
  case ColocationMetric::kFalseSharingLines:
    return p.false_sharing_lines;
  }
  return 0;
}

bool counts_objects(ColocationMetric m) {
  return m == ColocationMetric::kSameLine || m == ColocationMetric::kAdjacentLine ||
         m == ColocationMetric::kSamePage;
}

namespace {

double share_of_a(const Colocation &c, const PairColocation &p, ColocationMetric m) {
  const uint64_t n = p.a < c.group_objects.size() ? c.group_objects[p.a] : 0;
  return n ? static_cast<double>(metric_value(p, m)) / static_cast<double>(n) : 0.0;
}

} // namespace

std::vector<double> colocation_matrix(const Colocation &c, ColocationMetric m) {
  const size_t n = c.group_ids.size();
  std::vector<double> out(n * n, 0.0);
  for (const PairColocation &p : c.pairs)
    out[p.a * n + p.b] =
        counts_objects(m) ? share_of_a(c, p, m) : static_cast<double>(metric_value(p, m));
  return out;
}

std::vector<PairColocation> top_pairs(const Colocation &c, ColocationMetric m, size_t n,
                                      bool include_self) {
  std::vector<PairColocation> out;
  for (const PairColocation &p : c.pairs)
    if (metric_value(p, m) > 0 && (include_self || p.a != p.b))
      out.push_back(p);
  auto better = [&](const PairColocation &x, const PairColocation &y) {
    const uint64_t vx = metric_value(x, m), vy = metric_value(y, m);
    if (vx != vy)
      return vx > vy;
    const double sx = share_of_a(c, x, m), sy = share_of_a(c, y, m);
    if (sx != sy)
      return sx > sy;
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  };
  const size_t kept = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + kept, out.end(), better);
  out.resize(kept);
  return out;
}

} // namespace memlayout::inspector
