#include "record_layout.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <tuple>
#include <utility>

namespace memlayout::inspector {

const char *role_name(FieldRole r) {
  switch (r) {
  case FieldRole::kField:
    return "field";
  case FieldRole::kBase:
    return "base";
  case FieldRole::kVirtualBase:
    return "virtual_base";
  case FieldRole::kVptr:
    return "vptr";
  }
  return "field";
}

const char *sync_name(SyncKind s) {
  switch (s) {
  case SyncKind::kNone:
    return "";
  case SyncKind::kAtomic:
    return "atomic";
  case SyncKind::kLock:
    return "lock";
  }
  return "";
}

std::optional<FieldRole> parse_role(std::string_view s) {
  for (FieldRole r :
       {FieldRole::kField, FieldRole::kBase, FieldRole::kVirtualBase, FieldRole::kVptr})
    if (s == role_name(r))
      return r;
  return std::nullopt;
}

std::optional<SyncKind> parse_sync(std::string_view s) {
  for (SyncKind k : {SyncKind::kNone, SyncKind::kAtomic, SyncKind::kLock})
    if (s == sync_name(k))
      return k;
  return std::nullopt;
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

} // namespace

namespace {

const FieldLayout *member_named(const std::vector<FieldLayout> &fields, std::string_view wanted) {
  for (const FieldLayout &f : fields)
    if (!f.name.empty() && f.name == wanted)
      return &f;
  for (const FieldLayout &f : fields) {
    if (f.members.empty())
      continue;
    if (f.name.empty()) {
      if (const FieldLayout *m = member_named(f.members, wanted))
        return m;
    } else if (wanted.size() > f.name.size() + 1 && wanted.substr(0, f.name.size()) == f.name &&
               wanted[f.name.size()] == '.') {
      if (const FieldLayout *m = member_named(f.members, wanted.substr(f.name.size() + 1)))
        return m;
    }
  }
  return nullptr;
}

} // namespace

const FieldLayout *RecordLayout::field(std::string_view wanted) const {
  return member_named(fields, wanted);
}

namespace {

// Where the members lie, not how their types are spelt: a header read as C
// and as C++ gives `_Bool` and `bool`, `_Atomic(int)` and
// `std::atomic<int>`, `struct node *` and `node *`, laid out alike.
bool same_members(const std::vector<FieldLayout> &a, const std::vector<FieldLayout> &b) {
  auto same = [](const FieldLayout &x, const FieldLayout &y) {
    return std::tie(x.name, x.offset, x.size, x.align, x.bit_offset, x.bit_size, x.role, x.sync,
                    x.nested) == std::tie(y.name, y.offset, y.size, y.align, y.bit_offset,
                                          y.bit_size, y.role, y.sync, y.nested) &&
           same_members(x.members, y.members);
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same);
}

} // namespace

bool same_layout(const RecordLayout &a, const RecordLayout &b) {
  return std::tie(a.kind, a.size, a.align, a.packed) ==
             std::tie(b.kind, b.size, b.align, b.packed) &&
         same_members(a.fields, b.fields);
}

void compute_holes(RecordLayout &r) {
  r.holes.clear();
  r.bit_holes = 0;
  std::vector<std::pair<uint64_t, uint64_t>> used; // [begin, end) in bits
  // A member of no size (a flexible array member) still marks where the
  // data reaches: the bytes before it are a hole, as pahole has them, not
  // tail padding.
  uint64_t empty_member_end = 0;
  for (const FieldLayout &f : r.fields) {
    if (f.end_bit() > f.begin_bit())
      used.emplace_back(f.begin_bit(), f.end_bit());
    else if (!f.is_bitfield())
      empty_member_end = std::max(empty_member_end, f.begin_bit());
  }
  std::sort(used.begin(), used.end());

  // A gap of unused bits becomes a hole of the whole bytes inside it; the
  // bits before and after those bytes share a byte with a member.
  auto gap = [&r](uint64_t from, uint64_t to) {
    uint64_t first_byte = (from + 7) / 8, end_byte = to / 8;
    if (end_byte > first_byte) {
      r.holes.push_back({first_byte, end_byte - first_byte});
      r.bit_holes += (first_byte * 8 - from) + (to - end_byte * 8);
    } else {
      r.bit_holes += to - from;
    }
  };
  uint64_t covered = 0; // end of the merged members so far, in bits
  for (const auto &[begin, end] : used) {
    if (begin > covered)
      gap(covered, begin);
    covered = std::max(covered, end);
  }
  if (empty_member_end > covered) {
    gap(covered, empty_member_end);
    covered = empty_member_end;
  }
  const uint64_t data_end = (covered + 7) / 8;
  r.bit_holes += data_end * 8 - covered;
  r.tail_padding = r.size > data_end ? r.size - data_end : 0;
}

std::optional<uint64_t> prefix_through(const RecordLayout &r, std::string_view field) {
  const FieldLayout *f = r.field(field);
  if (!f)
    return std::nullopt;
  return (f->end_bit() + 7) / 8;
}

const FieldLayout *trailing_array(const RecordLayout &r) {
  if (r.fields.empty() || r.kind == "union")
    return nullptr;
  const FieldLayout &last = r.fields.back();
  if (last.role != FieldRole::kField || last.is_bitfield())
    return nullptr;
  std::string_view t = last.type;
  for (std::string_view suffix : {"[]", "[0]", "[1]"})
    if (t.size() > suffix.size() && t.substr(t.size() - suffix.size()) == suffix)
      return &last;
  return nullptr;
}

bool is_padding_member(const FieldLayout &f) {
  if (f.role != FieldRole::kField || f.sync != SyncKind::kNone)
    return false;
  // pad, _pad2, __padding, cacheline_pad_; or any array whose name says pad.
  std::string n = lower(f.name);
  n.erase(0, n.find_first_not_of('_'));
  while (!n.empty() && (std::isdigit(static_cast<unsigned char>(n.back())) || n.back() == '_'))
    n.pop_back();
  auto ends_with = [&](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with("pad") || ends_with("padding") ||
         (!f.type.empty() && f.type.back() == ']' && n.find("pad") != std::string::npos);
}

std::string member_name(const FieldLayout &f) { return f.name.empty() ? "<anonymous>" : f.name; }

namespace {

// Whether `word` starts a word of the name: at its start, after a character
// that is no letter (pthread_mutex_t) or at a capital (GMutex), so that
// block_t and second_t are not lock_t and cond_t. `lowered` is `name` in
// lower case.
bool has_word(std::string_view name, std::string_view lowered, std::string_view word) {
  for (size_t at = lowered.find(word); at != std::string_view::npos;
       at = lowered.find(word, at + 1))
    if (at == 0 || !std::isalpha(static_cast<unsigned char>(name[at - 1])) ||
        std::isupper(static_cast<unsigned char>(name[at])))
      return true;
  return false;
}

} // namespace

SyncKind sync_kind_of_type(std::string_view spelled, std::string_view canonical) {
  auto classify = [](std::string_view t) {
    while (!t.empty() && (t.back() == ' ' || t.back() == ']')) {
      size_t open = t.rfind('[');
      if (t.back() == ']' && open != std::string_view::npos)
        t = t.substr(0, open);
      else
        t.remove_suffix(1);
    }
    if (!t.empty() && (t.back() == '*' || t.back() == '&'))
      return SyncKind::kNone;
    for (bool stripped = true; stripped;) {
      stripped = false;
      for (std::string_view q : {"volatile ", "const ", "struct ", "class ", "union "})
        if (t.substr(0, q.size()) == q) {
          t.remove_prefix(q.size());
          stripped = true;
        }
    }
    // The type itself, not a template argument or a word inside its name
    // (shared_ptr's __shared_ptr<T, _S_atomic> base, a non_atomic_stats).
    const std::string l = lower(t);
    if (l.rfind("_atomic", 0) == 0 || l.rfind("std::atomic", 0) == 0 ||
        l.rfind("std::__atomic", 0) == 0 || l.rfind("atomic_", 0) == 0 ||
        l.rfind("atomic<", 0) == 0)
      return SyncKind::kAtomic;
    // The type's own name, outside namespaces and template arguments.
    std::string_view own = t.substr(0, t.find('<'));
    if (size_t colon = own.rfind("::"); colon != std::string_view::npos)
      own.remove_prefix(colon + 2);
    const std::string name = lower(own);
    for (std::string_view raii : {"unique_lock", "lock_guard", "scoped_lock", "shared_lock"})
      if (name == raii)
        return SyncKind::kNone;
    // A word "lock" at the end: SpinLock, ticket_lock, not Block or clock.
    auto ends_with = [](std::string_view s, std::string_view end) {
      return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
    };
    const bool ends_lock = name == "lock" || ends_with(own, "Lock") || ends_with(name, "_lock");
    for (std::string_view word : {"mutex", "spin", "rwlock", "lock_t", "condition_variable",
                                  "cond_t", "condvar", "semaphore", "futex", "barrier"})
      if (has_word(own, name, word))
        return SyncKind::kLock;
    // Whole names: POSIX's semaphore, GLib's condition variable, C++20's latch.
    for (std::string_view whole : {"sem_t", "gcond", "latch", "gonce"})
      if (name == whole)
        return SyncKind::kLock;
    return ends_lock ? SyncKind::kLock : SyncKind::kNone;
  };
  SyncKind s = classify(spelled);
  return s != SyncKind::kNone ? s : classify(canonical);
}

bool is_std_shared_factory(std::string_view call) {
  return call == "make_shared" || call == "allocate_shared" || call == "make_shared_for_overwrite";
}

uint64_t shared_object_offset(const RecordLayout &r) { return std::max<uint64_t>(16, r.align); }

uint64_t shared_block_bytes(const RecordLayout &r) {
  uint64_t align = std::max<uint64_t>(r.align, 8);
  return (shared_object_offset(r) + r.size + align - 1) / align * align;
}

bool is_std_factory(std::string_view call) {
  return is_std_shared_factory(call) || call == "make_unique" ||
         call == "make_unique_for_overwrite";
}

} // namespace memlayout::inspector
