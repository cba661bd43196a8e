#include "grouping.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace memlayout::inspector {

namespace {

bool matches(std::string_view function, std::string_view entry) {
  if (entry.empty())
    return false;
  if (entry.back() == '*')
    return function.substr(0, entry.size() - 1) == entry.substr(0, entry.size() - 1);
  if (function.substr(0, entry.size()) != entry)
    return false;
  if (function.size() == entry.size())
    return true;
  char next = function[entry.size()];
  return next == '(' || next == '<' || next == ' ';
}

std::string basename(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The site of one symbolized frame; unresolved ones name module and offset.
Group::Site site_of(const SymbolizedAddress &a, const SourceFrame &f) {
  Group::Site s;
  s.function = f.function;
  s.line = f.line;
  if (a.resolved)
    s.file = f.file;
  else if (a.module)
    s.file = basename(a.module->path) + "+" + hex(a.module_offset);
  else
    s.file = hex(a.address);
  return s;
}

// The value most of `counts` carry (ties: the smallest), with its count.
template <class K> std::pair<K, uint64_t> most_common(const std::unordered_map<K, uint64_t> &c) {
  std::pair<K, uint64_t> best{K{}, 0};
  for (const auto &[k, n] : c)
    if (n > best.second || (n == best.second && k < best.first))
      best = {k, n};
  return best;
}

struct GroupKey {
  uint32_t site;
  uint64_t usable;
  bool operator==(const GroupKey &) const = default;
};

struct GroupKeyHash {
  size_t operator()(const GroupKey &k) const {
    return std::hash<uint64_t>()(k.usable * 0x9E3779B97F4A7C15ull ^ k.site);
  }
};

// What a group collects before it is named and numbered.
struct Tally {
  Group g;
  std::unordered_map<uint64_t, uint64_t> sizes; // requested size -> objects
  std::unordered_map<uint32_t, uint64_t> tags;  // tag string id -> objects
  std::unordered_map<std::string, uint64_t> pools;
  std::unordered_set<uint32_t> tids;
};

std::string site_name(const Group::Site &s) {
  if (!s.caller.empty())
    return s.caller + " -> ?? (" + s.file + ")";
  if (s.file.empty())
    return s.function;
  if (s.line == 0)
    return s.function + " (" + basename(s.file) + ")";
  return s.function + " (" + basename(s.file) + ":" + std::to_string(s.line) + ")";
}

} // namespace

const std::vector<std::string> &default_wrappers() {
  static const std::vector<std::string> kWrappers = {
      // libiberty, gnulib, git, many GNU programs
      "xmalloc", "xcalloc", "xrealloc", "xzalloc", "xstrdup", "xstrndup", "xmemdup", "xnmalloc",
      "xcharalloc", "ximalloc", "xireallocarray",
      // GLib
      "g_malloc", "g_malloc0", "g_realloc", "g_try_malloc", "g_try_malloc0", "g_try_realloc",
      "g_malloc_n", "g_malloc0_n", "g_realloc_n", "g_slice_alloc", "g_slice_alloc0", "g_strdup",
      "g_strndup", "g_memdup", "g_memdup2",
      // SQLite: its own wrapper layers above the system allocator
      "sqlite3Malloc", "sqlite3MallocZero", "sqlite3_malloc", "sqlite3_malloc64", "sqlite3_realloc",
      "sqlite3_realloc64", "sqlite3Realloc", "sqlite3DbMalloc*", "sqlite3DbRealloc",
      "sqlite3DbReallocOrFree", "sqlite3DbStrDup", "sqlite3DbStrNDup", "sqlite3MemMalloc",
      "sqlite3MemRealloc", "dbMallocRawFinish", "dbReallocFinish",
      // C library helpers that allocate on their caller's behalf
      "strdup", "strndup", "__strdup", "__strndup", "wcsdup",
      // Python, OpenSSL, APR-style wrappers
      "PyMem_Malloc", "PyMem_RawMalloc", "PyObject_Malloc", "_PyObject_Malloc", "CRYPTO_malloc",
      "CRYPTO_zalloc", "CRYPTO_realloc",
      // memlayout's own trees: the record allocator inlined into each tree's
      // new_node/new_descriptor/... which then names the group
      "memlayout::trees::RecordAllocator::*"};
  return kWrappers;
}

bool is_wrapper_frame(const std::string &function, const GroupingOptions &o) {
  if (is_allocator_frame(function))
    return true;
  for (const std::string &w : default_wrappers())
    if (matches(function, w))
      return true;
  for (const std::string &w : o.wrappers)
    if (matches(function, w))
      return true;
  return false;
}

Group::Site call_site(std::span<const uint64_t> stack, Symbolizer &sym, const GroupingOptions &o) {
  // Unresolved frames (stripped libraries) are looked through like wrappers,
  // except that the innermost one after the last wrapper is the best site we
  // have: it tells call paths apart, and its first named caller says where.
  Group::Site last, unresolved;
  last.function = "??";
  bool have_unresolved = false;
  for (uint64_t pc : stack) {
    const SymbolizedAddress &a = sym.symbolize(pc);
    for (const SourceFrame &f : a.frames) {
      last = site_of(a, f);
      if (!a.resolved) {
        if (!have_unresolved) {
          unresolved = last;
          have_unresolved = true;
        }
        continue;
      }
      if (is_wrapper_frame(f.function, o)) {
        have_unresolved = false; // what was below it was the wrapper's inside
        continue;
      }
      if (!have_unresolved)
        return last;
      unresolved.caller = f.function;
      return unresolved;
    }
  }
  return have_unresolved ? unresolved : last;
}

std::vector<Group> group_objects(const HeapSnapshot &s, const TraceReader &r, Symbolizer &sym,
                                 const GroupingOptions &o) {
  // Sites are shared by stacks that differ only below the call site.
  std::vector<Group::Site> sites;
  std::unordered_map<std::string, uint32_t> site_ids;
  std::unordered_map<uint64_t, uint32_t> stack_sites;
  auto site_for = [&](uint64_t stack_id) {
    auto [it, fresh] = stack_sites.emplace(stack_id, 0);
    if (!fresh)
      return it->second;
    Group::Site site = call_site(r.stack(stack_id), sym, o);
    std::string key =
        site.function + '\0' + site.file + '\0' + std::to_string(site.line) + '\0' + site.caller;
    auto [sit, new_site] = site_ids.emplace(std::move(key), static_cast<uint32_t>(sites.size()));
    if (new_site)
      sites.push_back(std::move(site));
    it->second = sit->second;
    return sit->second;
  };

  std::vector<Tally> tallies;
  std::unordered_map<GroupKey, uint32_t, GroupKeyHash> index;
  for (size_t i = 0; i < s.objects.size(); ++i) {
    const LiveObject &obj = s.objects[i];
    GroupKey key{site_for(obj.stack_id), obj.usable};
    auto [it, fresh] = index.emplace(key, static_cast<uint32_t>(tallies.size()));
    if (fresh) {
      tallies.emplace_back();
      tallies.back().g.site = sites[key.site];
      tallies.back().g.size_class = obj.usable;
    }
    Tally &t = tallies[it->second];
    t.g.objects.push_back(static_cast<uint32_t>(i));
    t.g.bytes += obj.size;
    ++t.sizes[obj.size];
    if (obj.tag_id != 0)
      ++t.tags[obj.tag_id];
    if (o.pool_of)
      if (std::string pool = o.pool_of(obj); !pool.empty())
        ++t.pools[pool];
    t.tids.insert(obj.tid);
  }

  std::vector<Group> groups;
  groups.reserve(tallies.size());
  for (Tally &t : tallies) {
    Group &g = t.g;
    uint64_t n = g.objects.size();
    g.requested_size = most_common(t.sizes).first;
    g.threads.assign(t.tids.begin(), t.tids.end());
    std::sort(g.threads.begin(), g.threads.end());
    // A tag or pool names the group once it covers most of its objects.
    auto [tag, tagged] = most_common(t.tags);
    auto [pool, pooled] = most_common(t.pools);
    const std::string *tag_name = tagged * 2 > n ? r.string(tag) : nullptr;
    if (o.type_of)
      g.type = o.type_of(g.site);
    if (tag_name)
      g.name = *tag_name;
    else if (pooled * 2 > n)
      g.name = pool;
    else if (!g.type.empty())
      g.name = g.type;
    else
      g.name = site_name(g.site);
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(), [](const Group &a, const Group &b) {
    if (a.bytes != b.bytes)
      return a.bytes > b.bytes;
    return std::tie(a.name, a.site.function, a.site.file, a.site.line, a.size_class) <
           std::tie(b.name, b.site.function, b.site.file, b.site.line, b.size_class);
  });
  for (size_t i = 0; i < groups.size(); ++i)
    groups[i].id = static_cast<uint32_t>(i + 1);
  return groups;
}

} // namespace memlayout::inspector
