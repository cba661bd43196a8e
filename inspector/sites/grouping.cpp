#include "grouping.h"

#include "rules.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace memlayout::inspector {

namespace {

std::string basename(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The value most of `counts` carry (ties: the smallest), with its count.
template <class K> std::pair<K, uint64_t> most_common(const std::unordered_map<K, uint64_t> &c) {
  std::pair<K, uint64_t> best{K{}, 0};
  for (const auto &[k, n] : c)
    if (n > best.second || (n == best.second && k < best.first))
      best = {k, n};
  return best;
}

// A site's objects of one size class from one pool: one call site that
// allocates from several pools (a helper taking the pool as an argument)
// makes a group per pool, each named by it, not one named by the site with
// the pools' objects mixed. `pool`: the replayed pool's name's id; `tag`:
// for the program's seg_malloc objects, the tag the interposer gave them
// (their pool's name); 0 for others.
struct GroupKey {
  uint32_t site;
  uint32_t pool;
  uint32_t tag;
  uint64_t usable;
  bool operator==(const GroupKey &) const = default;
};

struct GroupKeyHash {
  size_t operator()(const GroupKey &k) const {
    return std::hash<uint64_t>()(k.usable * 0x9E3779B97F4A7C15ull ^ k.site ^
                                 uint64_t{k.pool ^ k.tag} << 32);
  }
};

// What a group collects before it is named and numbered.
struct Tally {
  Group g;
  std::unordered_map<uint64_t, uint64_t> sizes;   // requested size -> objects
  std::unordered_map<uint64_t, uint64_t> usables; // usable size -> objects
  std::unordered_map<uint32_t, uint64_t> tags;    // tag string id -> objects
  std::unordered_map<std::string, uint64_t> pools;
  std::unordered_set<uint32_t> tids;
  // caller id (0: none shown) -> objects: for GroupingOptions::type_from_caller.
  std::unordered_map<uint32_t, uint64_t> callers;
  uint64_t seg_api = 0;  // objects from seg_malloc and kin
  uint64_t reallocs = 0; // objects a realloc moved or grew last
  uint64_t aligned = 0;  // objects from posix_memalign, aligned_alloc, aligned new...
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

// The type a group's site's function was called for, by the calls its
// stacks show (`counts`: caller id -> objects): the one most of its objects
// came through, and in `via` which site of the map that is, for people.
// Without a caller shown, what type_from_caller says with none.
GroupingOptions::SiteType type_from_callers(const Group &g,
                                            const std::unordered_map<uint32_t, uint64_t> &counts,
                                            const std::vector<Group::Site> &callers,
                                            const GroupingOptions &o, std::string &via) {
  auto shown = [](const auto &c) { return c.first != 0; };
  if (std::none_of(counts.begin(), counts.end(), shown)) {
    via = "the type map's only site that calls it";
    return o.type_from_caller(g.site, nullptr);
  }
  struct Votes {
    GroupingOptions::SiteType type;
    uint64_t objects = 0;
    uint32_t caller = 0; // the one that gave it most
    uint64_t most = 0;
  };
  std::map<std::string, Votes> by_type;
  for (const auto &[id, n] : counts) {
    if (id == 0)
      continue;
    GroupingOptions::SiteType t = o.type_from_caller(g.site, &callers[id]);
    if (t.name.empty())
      continue;
    Votes &v = by_type[t.name];
    v.type = t;
    v.objects += n;
    // Ties by id, the order callers were first seen: deterministic.
    if (n > v.most || (n == v.most && id < v.caller)) {
      v.most = n;
      v.caller = id;
    }
  }
  for (const auto &[name, v] : by_type)
    if (v.objects * 2 > g.objects.size()) {
      via = "the type map's site at its call in " + site_name(callers[v.caller]);
      return v.type;
    }
  return {};
}

} // namespace

std::vector<WeightedStack> weighted_stacks(const HeapSnapshot &s, const TraceReader &r) {
  std::unordered_map<uint64_t, uint64_t> weight;
  for (const LiveObject &obj : s.objects)
    ++weight[obj.stack_id];
  return weighted_stacks(weight, r);
}

std::vector<WeightedStack> weighted_stacks(const std::unordered_map<uint64_t, uint64_t> &weight,
                                           const TraceReader &r) {
  std::vector<WeightedStack> out;
  out.reserve(weight.size());
  for (const auto &[id, w] : weight)
    out.push_back({r.stack(id), w});
  std::sort(out.begin(), out.end(), [](const WeightedStack &a, const WeightedStack &b) {
    return std::lexicographical_compare(a.frames.begin(), a.frames.end(), b.frames.begin(),
                                        b.frames.end());
  });
  return out;
}

std::vector<Group> group_objects(const HeapSnapshot &s, const TraceReader &r, Symbolizer &sym,
                                 const GroupingOptions &o) {
  // Sites are shared by stacks that differ only below the call site. The
  // wrappers looked through are a group's own: those of the stacks its
  // objects came from (a site's other size classes may have come through
  // other wrappers).
  std::vector<Group::Site> sites;
  std::unordered_map<std::string, uint32_t> site_ids;
  // The frames that called sites' functions, when type_from_caller asks:
  // id 0 is none shown.
  std::vector<Group::Site> callers(1);
  std::unordered_map<std::string, uint32_t> caller_ids;
  struct StackSite {
    uint32_t site = 0;
    uint32_t caller = 0;
    uint32_t last_tally = UINT32_MAX; // its wrappers already added there
    std::vector<LookedThrough> looked_through;
  };
  std::unordered_map<uint64_t, StackSite> stack_sites;
  auto site_for = [&](uint64_t stack_id) -> StackSite & {
    auto [it, fresh] = stack_sites.try_emplace(stack_id);
    if (!fresh)
      return it->second;
    static const WrapperPolicy kBuiltinOnly;
    Group::Site caller;
    Group::Site site = alloc_site(r.stack(stack_id), sym, o.wrappers ? *o.wrappers : kBuiltinOnly,
                                  o.code, o.type_from_caller ? &caller : nullptr);
    if (!caller.function.empty()) {
      std::string key = caller.function + '\0' + caller.file + '\0' + std::to_string(caller.line);
      auto [cit, new_caller] =
          caller_ids.emplace(std::move(key), static_cast<uint32_t>(callers.size()));
      if (new_caller)
        callers.push_back(std::move(caller));
      it->second.caller = cit->second;
    }
    it->second.looked_through = std::move(site.looked_through);
    site.looked_through.clear();
    std::string key = site.function + '\0' + site.file + '\0' + std::to_string(site.line) + ':' +
                      std::to_string(site.column) + '\0' + site.caller;
    auto [sit, new_site] = site_ids.emplace(std::move(key), static_cast<uint32_t>(sites.size()));
    if (new_site)
      sites.push_back(std::move(site));
    it->second.site = sit->second;
    return it->second;
  };

  // glibc serves one request from chunks of several sizes: a reused free
  // chunk up to 31 bytes larger than the request's own when the rest would
  // be too small to split off, and an aligned request from whatever chunk
  // the alignment's padding left. Grouped by usable size, one site's objects
  // fell into groups of a few dozen each, under every finding's minimum. Its
  // objects group by the class of their request; the group's class is the
  // usable size most of them have. Pools' classes are exact.
  const bool glibc = r.header().usable_model == trace::UsableModel::kGlibc;
  auto request_class = [glibc](const LiveObject &obj, bool pooled) {
    return glibc && !pooled ? trace::predicted_usable(trace::UsableModel::kGlibc, obj.size)
                            : obj.usable;
  };
  // The pools rules routed objects into when the trace was recorded: their
  // objects carry the pool's name as a tag and the pool's usable size, and
  // group by pool as the program's own seg_malloc objects do (two pools of
  // one site in one class are two groups; a pool's class is exact).
  std::unordered_set<std::string> rule_pools;
  if (const auto &rec = r.rules())
    for (const auto &rule : rec->rules) {
      rules::Rule parsed;
      rules::ParseError err;
      if (rules::parse_rule(rule.text.data(), rule.text.size(), 0, &parsed, &err) && parsed.pool[0])
        rule_pools.insert(parsed.pool);
    }
  std::unordered_map<uint32_t, bool> pool_tag_ids;
  auto pool_tag_of = [&](const LiveObject &obj) -> uint32_t {
    if (obj.tag_id == 0)
      return 0;
    if (obj.api == trace::Api::kSegPool)
      return obj.tag_id;
    if (rule_pools.empty())
      return 0;
    auto [it, fresh] = pool_tag_ids.try_emplace(obj.tag_id, false);
    if (fresh)
      if (const std::string *name = r.string(obj.tag_id))
        it->second = rule_pools.count(*name) != 0;
    return it->second ? obj.tag_id : 0;
  };
  std::vector<Tally> tallies;
  std::unordered_map<GroupKey, uint32_t, GroupKeyHash> index;
  std::unordered_map<std::string, uint32_t> pool_ids;
  for (size_t i = 0; i < s.objects.size(); ++i) {
    const LiveObject &obj = s.objects[i];
    StackSite &stack = site_for(obj.stack_id);
    std::string pool = o.pool_of ? o.pool_of(obj) : std::string();
    uint32_t pool_id =
        pool.empty()
            ? 0
            : pool_ids.emplace(pool, static_cast<uint32_t>(pool_ids.size() + 1)).first->second;
    uint32_t pool_tag = pool_tag_of(obj);
    GroupKey key{
        stack.site, pool_id, pool_tag,
        request_class(obj, pool_id != 0 || pool_tag != 0 || obj.api == trace::Api::kSegPool)};
    auto [it, fresh] = index.emplace(key, static_cast<uint32_t>(tallies.size()));
    if (fresh) {
      tallies.emplace_back();
      tallies.back().g.site = sites[key.site];
    }
    Tally &t = tallies[it->second];
    if (stack.last_tally != it->second) {
      stack.last_tally = it->second;
      auto &have = t.g.site.looked_through; // one site through several wrappers: all of them
      for (const LookedThrough &w : stack.looked_through)
        if (std::find(have.begin(), have.end(), w) == have.end())
          have.push_back(w);
    }
    t.g.objects.push_back(static_cast<uint32_t>(i));
    t.g.bytes += obj.size;
    ++t.sizes[obj.size];
    ++t.usables[obj.usable];
    if (obj.tag_id != 0)
      ++t.tags[obj.tag_id];
    if (!pool.empty())
      ++t.pools[pool];
    t.tids.insert(obj.tid);
    if (o.type_from_caller)
      ++t.callers[stack.caller];
    t.seg_api += obj.api == trace::Api::kSegPool;
    t.reallocs += obj.api == trace::Api::kRealloc || obj.api == trace::Api::kReallocArray;
    t.aligned += trace::api_is_aligned(obj.api);
  }

  std::vector<Group> groups;
  groups.reserve(tallies.size());
  std::vector<std::unordered_map<uint32_t, uint64_t>> group_callers;
  for (Tally &t : tallies) {
    group_callers.push_back(std::move(t.callers));
    Group &g = t.g;
    uint64_t n = g.objects.size();
    g.requested_size = most_common(t.sizes).first;
    g.size_class = most_common(t.usables).first;
    g.requested_min = g.requested_max = g.requested_size;
    for (const auto &[size, count] : t.sizes) {
      g.requested_min = std::min(g.requested_min, size);
      g.requested_max = std::max(g.requested_max, size);
    }
    g.program_pool = t.seg_api * 2 > n;
    g.grown_by_realloc = t.reallocs * 2 > n;
    g.aligned_api = t.aligned * 2 > n;
    g.threads.assign(t.tids.begin(), t.tids.end());
    std::sort(g.threads.begin(), g.threads.end());
    // A tag or pool names the group once it covers most of its objects.
    auto [tag, tagged] = most_common(t.tags);
    auto [pool, pooled] = most_common(t.pools);
    const std::string *tag_name = tagged * 2 > n ? r.string(tag) : nullptr;
    if (tag_name)
      g.name = *tag_name;
    else if (pooled * 2 > n)
      g.name = pool;
    groups.push_back(std::move(g));
  }
  if (o.type_of || o.type_from_caller) {
    std::vector<GroupingOptions::SiteType> types(groups.size());
    std::vector<std::string> via(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) {
      if (o.type_of)
        types[i] = o.type_of(groups[i].site);
      if (types[i].name.empty() && o.type_from_caller)
        types[i] = type_from_callers(groups[i], group_callers[i], callers, o, via[i]);
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      const GroupingOptions::SiteType &t = types[i];
      uint64_t size = groups[i].requested_size;
      uint64_t smallest = t.trailing_array ? t.trailing_offset : t.size;
      if (t.name.empty() || (t.size && size < smallest) || (t.offset && size != t.offset + t.size))
        continue;
      // The site's objects of exactly the record's size: another size there
      // is something else allocated on the line (a string duplicated), not
      // the record, unless the record is made to be allocated longer.
      bool exact_elsewhere = false;
      if (t.size && size % t.size != 0 && !t.trailing_array)
        for (size_t j = 0; j < groups.size() && !exact_elsewhere; ++j)
          exact_elsewhere = j != i && types[j].name == t.name &&
                            groups[j].requested_size == t.size &&
                            same_site(groups[j].site, groups[i].site);
      if (!exact_elsewhere) {
        groups[i].type = t.name;
        groups[i].type_offset = t.offset;
        groups[i].type_variant = t.variant;
        groups[i].type_caller = std::move(via[i]);
      }
    }
  }
  // Two allocations on one line (`items.push_back(x); index.emplace(k, v);`)
  // are two sites, named apart by their columns; a line's one site keeps the
  // plain name.
  std::map<std::string, std::set<uint32_t>> columns_of_line;
  for (const Group::Site &site : sites)
    columns_of_line[site_name(site)].insert(site.column);
  for (Group &g : groups) {
    if (!g.name.empty())
      continue;
    if (!g.type.empty()) {
      g.name = g.type;
      continue;
    }
    g.name = site_name(g.site);
    if (g.site.column && g.site.line && g.site.caller.empty() && columns_of_line[g.name].size() > 1)
      g.name.insert(g.name.size() - 1, ":" + std::to_string(g.site.column));
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
