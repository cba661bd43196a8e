#include "layout_advice.h"

#include "size_class.h"

#include <algorithm>
#include <set>

namespace memlayout::inspector {
namespace {

std::string quoted(const FieldLayout &f) { return "'" + member_name(f) + "'"; }

std::string joined(const std::vector<std::string> &items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i)
    s += (i ? ", " : "") + items[i];
  return s;
}

uint64_t align_up(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

// First and last line index a member occupies when the object starts at `start`.
std::pair<uint64_t, uint64_t> line_range(const FieldLayout &f, uint64_t start, uint32_t line) {
  uint64_t b = start + f.offset;
  return {b / line, (b + f.size - 1) / line};
}

bool share_line(const FieldLayout &a, const FieldLayout &b, uint64_t start, uint32_t line) {
  auto [a0, a1] = line_range(a, start, line);
  auto [b0, b1] = line_range(b, start, line);
  return a0 <= b1 && b0 <= a1;
}

// Every start offset some allocator can give the record, ascending.
std::vector<uint32_t> all_starts(const std::vector<Placement> &placements) {
  std::set<uint32_t> s;
  for (const Placement &p : placements)
    for (const LineStart &st : p.starts)
      s.insert(st.offset);
  return {s.begin(), s.end()};
}

std::string offsets_text(const std::vector<uint32_t> &offsets) {
  std::string s;
  for (size_t i = 0; i < offsets.size(); ++i)
    s += (i ? ", +" : "+") + std::to_string(offsets[i]);
  return s;
}

std::string share_text(size_t some, size_t all) {
  return some == all ? "every start offset"
                     : std::to_string(some) + " of " + std::to_string(all) + " start offsets";
}

// Members that share a line with one of `culprits`, each with the starts at
// which it does, and at how many starts any does. Atomics next to atomics
// are the design of lock-free records: for atomics only plain members count
// (read without a write, yet invalidated by one); padding is read by nobody.
struct Sharing {
  std::vector<std::vector<uint32_t>> members; // by field: the starts it shares a line at
  size_t starts = 0;
};

Sharing line_sharing(const RecordLayout &r, const std::vector<size_t> &culprits, bool lock,
                     const std::vector<uint32_t> &starts, uint32_t line) {
  Sharing s;
  s.members.assign(r.fields.size(), {});
  for (uint32_t start : starts) {
    bool any = false;
    for (size_t j = 0; j < r.fields.size(); ++j) {
      const FieldLayout &g = r.fields[j];
      if (g.size == 0 || is_padding_member(g) || (!lock && g.sync != SyncKind::kNone) ||
          std::find(culprits.begin(), culprits.end(), j) != culprits.end())
        continue;
      if (std::any_of(culprits.begin(), culprits.end(),
                      [&](size_t i) { return share_line(r.fields[i], g, start, line); })) {
        s.members[j].push_back(start);
        any = true;
      }
    }
    s.starts += any;
  }
  return s;
}

// "'a' at every start offset and 'buf' at +16, +32, +48 (3 of 4 start
// offsets)": members sharing at the same starts together, so that the
// message holds for each member it names.
std::string sharing_text(const RecordLayout &r, const Sharing &sharing, size_t all) {
  std::vector<std::pair<std::vector<uint32_t>, std::vector<std::string>>> by_starts;
  for (size_t j = 0; j < sharing.members.size(); ++j) {
    const std::vector<uint32_t> &at = sharing.members[j];
    if (at.empty())
      continue;
    auto same = std::find_if(by_starts.begin(), by_starts.end(),
                             [&](const auto &g) { return g.first == at; });
    if (same == by_starts.end())
      same = by_starts.insert(by_starts.end(), {at, {}});
    same->second.push_back(quoted(r.fields[j]));
  }
  // Those sharing at every start first: the plain case.
  std::stable_partition(by_starts.begin(), by_starts.end(),
                        [&](const auto &g) { return g.first.size() == all; });
  std::string s;
  for (size_t i = 0; i < by_starts.size(); ++i) {
    const auto &[at, names] = by_starts[i];
    s += (i == 0                      ? ""
          : i + 1 == by_starts.size() ? " and "
                                      : ", ") +
         joined(names) + " at " +
         (at.size() == all ? "every start offset"
                           : offsets_text(at) + " (" + share_text(at.size(), all) + ")");
  }
  return s;
}

// Each lock, and the atomics together, sharing lines with other members.
void sync_sharing(const RecordLayout &r, const std::vector<Placement> &placements, uint32_t line,
                  std::vector<Risk> &out) {
  const std::vector<uint32_t> starts = all_starts(placements);
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> atomics;
  for (size_t i = 0; i < r.fields.size(); ++i) {
    if (r.fields[i].size == 0)
      continue;
    if (r.fields[i].sync == SyncKind::kLock)
      groups.push_back({i});
    else if (r.fields[i].sync == SyncKind::kAtomic)
      atomics.push_back(i);
  }
  if (!atomics.empty())
    groups.push_back(atomics);
  for (const std::vector<size_t> &culprits : groups) {
    const bool lock = r.fields[culprits[0]].sync == SyncKind::kLock;
    Sharing sharing = line_sharing(r, culprits, lock, starts, line);
    if (!sharing.starts)
      continue;
    Risk k;
    k.kind = lock ? "lock_shares_line" : "atomic_shares_line";
    k.severity = lock ? "medium" : "low";
    std::vector<std::string> named;
    for (size_t i : culprits) {
      k.fields.push_back(member_name(r.fields[i]));
      named.push_back(quoted(r.fields[i]));
    }
    for (size_t j = 0; j < sharing.members.size(); ++j)
      if (!sharing.members[j].empty())
        k.fields.push_back(member_name(r.fields[j]));
    const FieldLayout &first = r.fields[culprits[0]];
    const std::string with = sharing_text(r, sharing, starts.size());
    k.message = lock ? "lock " + quoted(first) + " (" + first.type + ", +" +
                           std::to_string(first.offset) + ") shares a line with " + with +
                           ": threads taking or spinning on the lock take the line from readers of "
                           "those members"
                     : std::string(culprits.size() > 1 ? "atomics " : "atomic ") + joined(named) +
                           (culprits.size() > 1 ? " share" : " shares") + " a line with " + with +
                           ": every write to them takes the line from readers of those members";
    out.push_back(std::move(k));
  }
}

// A lock or atomic on a line that also holds a neighbouring object.
void neighbour_sharing(const RecordLayout &r, const std::vector<Placement> &placements,
                       uint32_t line, std::vector<Risk> &out) {
  std::vector<std::string> names, per_allocator, locks, atomics;
  bool any_lock = false;
  for (const FieldLayout &f : r.fields)
    if (f.sync != SyncKind::kNone && f.size) {
      names.push_back(member_name(f));
      any_lock |= f.sync == SyncKind::kLock;
      (f.sync == SyncKind::kLock ? locks : atomics).push_back("'" + member_name(f) + "'");
    }
  if (names.empty())
    return;
  for (const Placement &p : placements) {
    size_t shared = 0;
    for (const LineStart &s : p.starts) {
      bool hit = false;
      for (const FieldLayout &f : r.fields) {
        if (f.sync == SyncKind::kNone || f.size == 0)
          continue;
        // The neighbours' own bytes: the previous object's end at
        // offset - slot + size (its slack, and glibc's header, hold nothing
        // of it), the next one's start at offset + slot.
        auto [first, last] = line_range(f, s.offset, line);
        hit |= first * line + p.slot < s.offset + r.size || (last + 1) * line > s.offset + p.slot;
      }
      shared += hit;
    }
    if (shared)
      per_allocator.push_back(p.allocator + " (" + (p.allocator == "glibc" ? "chunk " : "class ") +
                              std::to_string(p.slot) + ": " + share_text(shared, p.starts.size()) +
                              ")");
  }
  if (per_allocator.empty())
    return;
  Risk k;
  k.kind = "neighbour_sharing";
  k.severity = any_lock ? "high" : "medium";
  k.fields = names;
  // Each member by what it is: "lock 'm' and atomic 'version'".
  auto kind = [](const char *what, const std::vector<std::string> &v) {
    return v.empty() ? std::string() : what + std::string(v.size() > 1 ? "s " : " ") + joined(v);
  };
  std::string what = kind("lock", locks), more = kind("atomic", atomics);
  k.message = what + (what.empty() || more.empty() ? "" : " and ") + more +
              " can share a line with the neighbouring object under " + joined(per_allocator) +
              ": threads working on neighbouring objects contend for one line (false sharing)";
  out.push_back(std::move(k));
}

// Explicit padding that does not do what it is for.
void padding(const RecordLayout &r, const std::vector<Placement> &placements, uint32_t line,
             std::vector<Risk> &out) {
  const FieldLayout *pad = nullptr;
  for (const FieldLayout &f : r.fields)
    if (is_padding_member(f))
      pad = &f;
  if (!pad || r.align >= line)
    return;
  if (r.size % line) {
    Risk k{"padding_short", "medium", {member_name(*pad)}, ""};
    k.message = "padded (" + quoted(*pad) + ") to " + std::to_string(r.size) +
                " B, not a multiple of the " + std::to_string(line) +
                " B line: neighbouring objects still share its first and last lines";
    out.push_back(std::move(k));
    return;
  }
  std::vector<std::string> where;
  for (const Placement &p : placements) {
    std::vector<uint32_t> off;
    for (const LineStart &s : p.starts)
      if (s.offset)
        off.push_back(s.offset);
    if (!off.empty())
      where.push_back(p.allocator + " starts it at " + offsets_text(off) + " (" +
                      std::to_string(p.min_lines + 1) + " lines)");
  }
  if (where.empty())
    return;
  Risk k{"padding_unaligned", "medium", {member_name(*pad)}, ""};
  k.message = "padded (" + quoted(*pad) + ") to " + std::to_string(r.size) + " B but aligned to " +
              std::to_string(r.align) + ": " + joined(where) +
              "; padding separates objects only when they start on a line";
  out.push_back(std::move(k));
}

// Members that cross a line boundary they would not cross from a line start.
void straddles(const RecordLayout &r, const std::vector<Placement> &placements, uint32_t line_size,
               std::vector<Risk> &out) {
  for (size_t i = 0; i < r.fields.size(); ++i) {
    std::vector<std::string> where;
    bool often = false;
    for (const Placement &p : placements) {
      std::vector<uint32_t> off;
      for (const LineStart &s : p.starts)
        if (std::find(s.straddling.begin(), s.straddling.end(), i) != s.straddling.end())
          off.push_back(s.offset);
      if (off.empty())
        continue;
      often |= off.size() * 2 >= p.starts.size();
      where.push_back(p.allocator + " starts " + offsets_text(off) + " (" +
                      std::to_string(off.size()) + " of " + std::to_string(p.starts.size()) + ")");
    }
    if (where.empty())
      continue;
    const FieldLayout &f = r.fields[i];
    Risk k{"field_straddles", often ? "medium" : "low", {member_name(f)}, ""};
    // One line more than the member needs: two for one that fits in a line.
    uint64_t needed = std::max<uint64_t>(1, (f.size + line_size - 1) / line_size);
    k.message =
        quoted(f) + " (" + f.type + ", +" + std::to_string(f.offset) + ", " +
        std::to_string(f.size) + " B) crosses a line boundary at " + joined(where) +
        ": reading it costs " +
        (needed == 1 ? std::string("two lines")
                     : std::to_string(needed + 1) + " lines instead of " + std::to_string(needed));
    out.push_back(std::move(k));
  }
}

bool ignores_alignment(const std::string &call) {
  static const char *const kPlain[] = {"malloc",     "calloc",     "realloc",    "reallocarray",
                                       "seg_malloc", "seg_calloc", "seg_realloc"};
  return std::any_of(std::begin(kPlain), std::end(kPlain),
                     [&](const char *c) { return call == c; });
}

void malloc_alignment(const RecordLayout &r, std::span<const AllocSite> sites,
                      std::vector<Risk> &out) {
  constexpr uint64_t kMallocAlign = 16;
  if (r.align <= kMallocAlign)
    return;
  std::vector<const AllocSite *> bad;
  for (const AllocSite &s : sites)
    if (s.type == r.name && s.variant == r.variant && ignores_alignment(s.call))
      bad.push_back(&s);
  if (bad.empty())
    return;
  Risk k{"malloc_ignores_alignment", "high", {}, ""};
  k.message = "aligned to " + std::to_string(r.align) + " but allocated by " + bad[0]->call +
              " at " + bad[0]->file + ":" + std::to_string(bad[0]->line) +
              (bad.size() > 1 ? " and " + std::to_string(bad.size() - 1) + " more sites" : "") +
              ", which guarantees 16: its objects start anywhere on a 16-byte boundary; use "
              "aligned_alloc, seg_aligned_alloc or new";
  out.push_back(std::move(k));
}

std::string classes_text(uint64_t from, uint64_t to) {
  auto change = [](uint64_t a, uint64_t b) {
    return a == b ? std::to_string(a) : std::to_string(a) + " -> " + std::to_string(b);
  };
  return "jemalloc class " + change(jemalloc_size_class(from), jemalloc_size_class(to)) +
         ", glibc chunk " + change(glibc_chunk_size(from), glibc_chunk_size(to));
}

// Data members by decreasing alignment (declaration order among equals)
// after the bases and vptr, which stay where they are.
void reorder(const RecordLayout &r, std::vector<Suggestion> &out) {
  // Bit-fields, zero-width ones included, pack by declaration order: moving
  // the members around them changes what packs.
  if (r.is_union() || r.packed || r.holes.empty() || r.zero_width_bitfields)
    return;
  uint64_t end = 0;
  std::vector<const FieldLayout *> members;
  for (const FieldLayout &f : r.fields) {
    if (f.is_bitfield())
      return;
    if (f.role == FieldRole::kField)
      members.push_back(&f);
    else if (f.role != FieldRole::kVirtualBase)
      end = std::max(end, f.offset + f.size);
  }
  if (members.size() < 2)
    return;
  std::stable_sort(members.begin(), members.end(),
                   [](const FieldLayout *a, const FieldLayout *b) { return a->align > b->align; });
  Suggestion s;
  s.kind = "reorder";
  for (const FieldLayout *f : members) {
    end = align_up(end, f->align) + f->size;
    s.order.push_back(member_name(*f));
  }
  s.size = align_up(end, r.align);
  if (s.size >= r.size)
    return;
  s.message = "reorder by decreasing alignment (" + joined(s.order) +
              "): " + std::to_string(r.size) + " -> " + std::to_string(s.size) + " B, " +
              classes_text(r.size, s.size) + "; keep fields read together next to each other";
  out.push_back(std::move(s));
}

bool has_risk(const std::vector<Risk> &risks, std::string_view kind) {
  return std::any_of(risks.begin(), risks.end(), [&](const Risk &k) { return k.kind == kind; });
}

void pad_and_align(const RecordLayout &r, const std::vector<Placement> &placements, uint32_t line,
                   const std::vector<Risk> &risks, std::vector<Suggestion> &out) {
  if (r.align >= line || r.size == 0)
    return;
  const uint64_t padded = align_up(r.size, line);
  const std::string cost =
      padded > r.size ? " (+" + std::to_string(padded - r.size) + " B per object)" : "";
  const bool sharing = has_risk(risks, "neighbour_sharing") || has_risk(risks, "padding_short");
  if (sharing && padded != r.size) {
    Suggestion s{"pad", padded, {}, ""};
    s.message = "pad to " + std::to_string(padded) + " B" + cost + ": " +
                classes_text(r.size, padded) +
                "; jemalloc then starts every object on a line and no line holds two objects; "
                "glibc needs the alignment too";
    out.push_back(std::move(s));
  }
  bool straddling = false;
  for (const Placement &p : placements)
    straddling |= !p.straddling_fields.empty() || (r.size <= line && p.straddle_fraction > 0);
  if (sharing || straddling || has_risk(risks, "padding_unaligned")) {
    Suggestion s{"align", padded, {}, ""};
    s.message = "alignas(" + std::to_string(line) + ") -> " + std::to_string(padded) + " B" + cost +
                ": every object starts on a line and owns its lines under both "
                "allocators (allocate with new, aligned_alloc or seg_aligned_alloc)";
    out.push_back(std::move(s));
  }
}

} // namespace

RecordAdvice advise(const RecordLayout &r, const std::vector<Placement> &placements,
                    uint32_t line_size, std::span<const AllocSite> sites) {
  RecordAdvice a;
  sync_sharing(r, placements, line_size, a.risks);
  neighbour_sharing(r, placements, line_size, a.risks);
  padding(r, placements, line_size, a.risks);
  straddles(r, placements, line_size, a.risks);
  malloc_alignment(r, sites, a.risks);
  reorder(r, a.suggestions);
  pad_and_align(r, placements, line_size, a.risks, a.suggestions);
  return a;
}

} // namespace memlayout::inspector
