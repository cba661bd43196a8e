// memlayout.report/1 JSON back into a Report. Strict about what the contract
// requires (a report that silently lost its groups would diff as "all groups
// removed"), lenient about what it adds: unknown keys are ignored, so reports
// from newer builds that only extend the schema still read.
#include "report_json.h"

#include "json_input.h"

#include "alloc_site.h"

#include <llvm/Support/JSON.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace memlayout::inspector {
namespace {

namespace json = llvm::json;

// Reads one JSON object's fields into C++ values; the first problem is kept
// with the path to it, and later reads become no-ops returning false.
class Fields {
public:
  Fields(const json::Object *o, std::string path, std::string &error)
      : o_(o), path_(std::move(path)), error_(error) {}

  bool str(const char *key, std::string &out) {
    if (auto v = get(key, "a string")) {
      if (auto s = v->getAsString()) {
        out = s->str();
        return true;
      }
      return fail(key, "a string");
    }
    return false;
  }

  template <typename T> bool uint(const char *key, T &out) {
    if (auto v = get(key, "a non-negative integer")) {
      if (auto u = v->getAsUINT64();
          u && *u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        out = static_cast<T>(*u);
        return true;
      }
      return fail(key, "a non-negative integer");
    }
    return false;
  }

  bool sint(const char *key, int64_t &out) {
    if (auto v = get(key, "an integer")) {
      if (auto i = v->getAsInteger()) {
        out = *i;
        return true;
      }
      return fail(key, "an integer");
    }
    return false;
  }

  bool number(const char *key, double &out) {
    if (auto v = get(key, "a number")) {
      if (auto d = v->getAsNumber()) {
        out = *d;
        return true;
      }
      return fail(key, "a number");
    }
    return false;
  }

  // A share of something: a number from 0 to 1.
  bool fraction(const char *key, double &out) {
    if (!number(key, out))
      return false;
    return out >= 0 && out <= 1 ? true : fail(key, "a fraction from 0 to 1");
  }
  bool optional_fraction(const char *key, std::optional<double> &out) {
    if (!optional_number(key, out))
      return false;
    return !out || (*out >= 0 && *out <= 1) ? true : fail(key, "a fraction from 0 to 1 or null");
  }

  // null (and, from a writer that leaves it out, absence) means "not computable".
  bool optional_number(const char *key, std::optional<double> &out) {
    if (!ok())
      return false;
    const json::Value *v = o_->get(key);
    out.reset();
    if (!v || v->kind() == json::Value::Null)
      return true;
    if (auto d = v->getAsNumber()) {
      out = *d;
      return true;
    }
    return fail(key, "a number or null");
  }

  bool boolean(const char *key, bool &out) {
    if (auto v = get(key, "true or false")) {
      if (auto b = v->getAsBoolean()) {
        out = *b;
        return true;
      }
      return fail(key, "true or false");
    }
    return false;
  }

  const json::Array *array(const char *key) {
    if (auto v = get(key, "an array")) {
      if (const auto *a = v->getAsArray())
        return a;
      fail(key, "an array");
    }
    return nullptr;
  }

  const json::Object *object(const char *key) {
    if (auto v = get(key, "an object")) {
      if (const auto *o = v->getAsObject())
        return o;
      fail(key, "an object");
    }
    return nullptr;
  }

  // Optional keys: absent is fine, present must be well formed.
  bool has(const char *key) const { return o_->get(key) != nullptr; }
  bool is_null(const char *key) const {
    const json::Value *v = o_->get(key);
    return v && v->kind() == json::Value::Null;
  }

  const std::string &path() const { return path_; }
  bool ok() const { return error_.empty(); }

private:
  const json::Value *get(const char *key, const char *what) {
    if (!ok())
      return nullptr;
    const json::Value *v = o_->get(key);
    if (!v)
      fail(key, what);
    return v;
  }

  bool fail(const char *key, const char *what) {
    if (ok())
      error_ = path_ + (path_.empty() ? "" : ".") + "'" + key + "': missing or not " + what;
    return false;
  }

  const json::Object *o_;
  std::string path_;
  std::string &error_;
};

std::string item(const std::string &path, const char *key, size_t i) {
  return path + (path.empty() ? "" : ".") + key + "[" + std::to_string(i) + "]";
}

// Each element of `key` must be an object; `read` gets its fields.
template <typename F> bool objects(Fields &parent, const char *key, std::string &error, F &&read) {
  const json::Array *a = parent.array(key);
  if (!a)
    return false;
  for (size_t i = 0; i < a->size() && error.empty(); ++i) {
    std::string path = item(parent.path(), key, i);
    const json::Object *o = (*a)[i].getAsObject();
    if (!o) {
      error = path + ": not an object";
      return false;
    }
    Fields f(o, path, error);
    read(f);
  }
  return error.empty();
}

template <typename T, typename Get>
bool values(Fields &parent, const char *key, std::string &error, std::vector<T> &out, Get &&get,
            const char *what) {
  const json::Array *a = parent.array(key);
  if (!a)
    return false;
  for (size_t i = 0; i < a->size(); ++i) {
    auto v = get((*a)[i]);
    if (!v) {
      error = item(parent.path(), key, i) + ": not " + what;
      return false;
    }
    out.push_back(static_cast<T>(*v));
  }
  return true;
}

void read_group(Fields &f, std::string &error, GroupReport &g) {
  f.uint("id", g.group.id);
  f.str("name", g.group.name);
  if (f.has("type"))
    f.str("type", g.group.type);
  if (const json::Object *site = f.object("site")) {
    Fields s(site, f.path() + ".site", error);
    s.str("function", g.group.site.function);
    s.str("file", g.group.site.file);
    s.uint("line", g.group.site.line);
    if (s.has("column"))
      s.uint("column", g.group.site.column);
    if (s.has("caller"))
      s.str("caller", g.group.site.caller);
  }
  if (f.ok() && f.has("looked_through"))
    objects(f, "looked_through", error, [&](Fields &w) {
      LookedThrough l;
      std::string decided;
      w.str("function", l.function);
      w.str("decided", decided);
      if (w.has("evidence"))
        w.str("evidence", l.evidence);
      if (w.ok() && !parse_looked_through_decided(decided, &l.reason))
        error = w.path() + ".decided: '" + decided +
                "' is not builtin, option, rules_file, debug_info or trace";
      g.group.site.looked_through.push_back(std::move(l));
    });
  f.uint("size_class", g.group.size_class);
  f.uint("requested_size", g.group.requested_size);
  if (f.has("requested_min")) // reports written before they were added have neither
    f.uint("requested_min", g.group.requested_min);
  if (f.has("requested_max"))
    f.uint("requested_max", g.group.requested_max);
  f.uint("objects", g.objects);
  f.uint("bytes", g.group.bytes);
  if (f.ok())
    values(
        f, "threads", error, g.group.threads,
        [](const json::Value &v) -> llvm::Optional<uint64_t> {
          auto u = v.getAsUINT64();
          return u && *u <= std::numeric_limits<uint32_t>::max() ? u : llvm::None;
        },
        "a thread id");
  f.number("lines_per_object", g.lines_per_object);
  f.fraction("straddle_fraction", g.straddle_fraction);
  if (f.has("hot_bytes") && !f.is_null("hot_bytes"))
    f.uint("hot_bytes", g.hot_bytes);
  if (f.has("hot_offset"))
    f.uint("hot_offset", g.hot_offset);
  if (const json::Object *sef = f.object("set_effective_fraction")) {
    Fields s(sef, f.path() + ".set_effective_fraction", error);
    s.optional_fraction("L1", g.set_effective_fraction[0]);
    s.optional_fraction("L2", g.set_effective_fraction[1]);
    s.optional_fraction("L3", g.set_effective_fraction[2]);
  }
  if (f.has("set_bits"))
    if (const json::Object *sb = f.object("set_bits")) {
      Fields s(sb, f.path() + ".set_bits", error);
      const char *levels[] = {"L1", "L2", "L3"};
      for (size_t i = 0; i < g.set_bits.size(); ++i)
        if (s.has(levels[i]))
          s.str(levels[i], g.set_bits[i]);
    }
  // Strides and neighbours are evidence, not identity: optional.
  if (f.ok() && f.has("strides"))
    objects(f, "strides", error, [&](Fields &s) {
      Stride st;
      s.sint("bytes", st.bytes);
      s.number("share", st.share);
      g.strides.push_back(st);
    });
  f.uint("pages_4k", g.pages_4k);
  f.uint("pages_min", g.pages_min);
  f.uint("regions_2m", g.regions_2m);
  if (f.has("page_runs"))
    f.uint("page_runs", g.page_runs);
  if (f.has("cross_thread_lines"))
    f.uint("cross_thread_lines", g.cross_thread_lines);
  if (f.has("lines_total"))
    f.uint("lines_total", g.lines_total);
  if (f.ok() && f.has("neighbours"))
    objects(f, "neighbours", error, [&](Fields &n) {
      GroupReport::Neighbour nb;
      n.uint("group", nb.group);
      n.uint("same_line", nb.same_line);
      n.uint("adjacent_line", nb.adjacent_line);
      n.uint("same_page", nb.same_page);
      g.neighbours.push_back(nb);
    });
}

void read_finding(Fields &f, std::string &error, Finding &out) {
  f.str("kind", out.kind);
  f.str("severity", out.severity);
  if (f.ok())
    values(
        f, "groups", error, out.groups,
        [](const json::Value &v) -> llvm::Optional<uint64_t> {
          auto u = v.getAsUINT64();
          return u && *u <= std::numeric_limits<uint32_t>::max() ? u : llvm::None;
        },
        "a group id");
  if (const json::Object *m = f.object("metric")) {
    for (const auto &[k, v] : *m) {
      auto d = v.getAsNumber();
      if (!d) {
        error = f.path() + ".metric.'" + k.str() + "': not a number";
        return;
      }
      out.metric[k.str()] = *d;
    }
  }
  f.str("message", out.message);
  f.str("fix", out.fix);
  if (f.has("rule"))
    f.str("rule", out.rule);
}

} // namespace

void read_offsets(Fields &f, const char *key, std::string &error,
                  std::vector<std::pair<uint64_t, uint64_t>> &out) {
  objects(f, key, error, [&](Fields &o) {
    std::pair<uint64_t, uint64_t> p;
    o.uint("offset", p.first);
    o.uint("aborts", p.second);
    out.push_back(p);
  });
}

// The optional `htm` object (aborted transactions).
void read_htm(Fields &f, std::string &error, HtmAbortReport &h) {
  f.uint("transactions", h.transactions);
  f.uint("aborts", h.aborts);
  if (const json::Object *c = f.object("by_cause")) {
    Fields b(c, "htm.by_cause", error);
    b.uint("conflict", h.by_cause[0]);
    b.uint("capacity", h.by_cause[1]);
    b.uint("explicit", h.by_cause[2]);
    b.uint("other", h.by_cause[3]);
  }
  if (const json::Object *c = f.object("conflicts")) {
    Fields b(c, "htm.conflicts", error);
    b.uint("true", h.conflicts_true);
    b.uint("false", h.conflicts_false);
    b.uint("same_key", h.same_key);
    b.uint("fallback_lock", h.by_fallback_lock);
    b.uint("plain", h.by_plain);
  }
  if (const json::Object *c = f.object("capacity")) {
    Fields b(c, "htm.capacity", error);
    b.uint("write", h.capacity_write);
    b.uint("read", h.capacity_read);
    b.number("mean_lines", h.capacity_mean_lines);
    b.number("mean_sets", h.capacity_mean_sets);
  }
  if (const json::Object *c = f.object("l1")) {
    Fields b(c, "htm.l1", error);
    b.uint("sets", h.l1_sets);
    b.uint("ways", h.l1_ways);
  }
  f.uint("unresolved", h.unresolved);
  if (f.ok())
    objects(f, "groups", error, [&](Fields &g) {
      HtmGroupAborts ga;
      g.uint("group", ga.group);
      g.uint("conflicts_false", ga.conflicts_false);
      g.uint("conflicts_true", ga.conflicts_true);
      g.uint("neighbour_object_conflicts", ga.neighbour_object_conflicts);
      g.uint("capacity_aborts", ga.capacity_aborts);
      g.uint("capacity_lines", ga.capacity_lines);
      g.uint("capacity_same_page_offset", ga.capacity_same_page_offset);
      read_offsets(g, "false_offsets", error, ga.false_offsets);
      read_offsets(g, "other_offsets", error, ga.other_offsets);
      read_offsets(g, "capacity_offsets", error, ga.capacity_offsets);
      objects(g, "sharers", error, [&](Fields &sh) {
        std::pair<uint32_t, uint64_t> p;
        sh.uint("group", p.first);
        sh.uint("aborts", p.second);
        ga.sharers.push_back(p);
      });
      h.groups.push_back(std::move(ga));
    });
}

bool parse_report_json(const std::string &text, const std::string &name, Report &out,
                       std::string &error) {
  error.clear();
  std::optional<json::Value> parsed = parse_json_input(text, name, error);
  if (!parsed)
    return false;
  const json::Object *root = parsed->getAsObject();
  if (!root) {
    error = name + ": not a memlayout report (the JSON is not an object)";
    return false;
  }
  auto schema = root->getString("schema");
  if (!schema || *schema != kReportSchema) {
    error = name + ": not a " + kReportSchema + " report (schema " +
            (schema ? "'" + schema->str() + "'" : std::string("missing")) + ")";
    return false;
  }
  Report r;
  Fields f(root, "", error);
  f.str("trace", r.trace);
  if (auto exe = root->getString("executable")) // reports from before it was written lack it
    r.executable = exe->str();
  f.str("at", r.at);
  f.sint("at_ns", r.at_ns);
  f.boolean("partial", r.partial);
  if (auto damage = root->getString("damage")) // only where the trace was damaged
    r.damage = damage->str();
  f.str("allocator", r.allocator);
  f.uint("live_objects", r.live_objects);
  f.uint("live_bytes", r.live_bytes);
  if (const json::Object *cache = f.object("cache")) {
    Fields c(cache, "cache", error);
    if (c.has("source"))
      c.str("source", r.cache_source);
    objects(c, "levels", error, [&](Fields &l) {
      ReportCacheLevel level;
      l.uint("level", level.level);
      l.str("type", level.type);
      l.uint("sets", level.sets);
      l.uint("ways", level.ways);
      l.uint("line_size", level.line_size);
      l.uint("size_bytes", level.size_bytes);
      l.str("indexing", level.indexing);
      l.str("bits", level.bits);
      r.levels.push_back(level);
    });
  }
  if (f.ok())
    objects(f, "groups", error, [&](Fields &g) {
      GroupReport group;
      read_group(g, error, group);
      r.groups.push_back(std::move(group));
    });
  if (f.ok())
    objects(f, "findings", error, [&](Fields &fi) {
      Finding finding;
      read_finding(fi, error, finding);
      r.findings.push_back(std::move(finding));
    });
  if (f.ok() && f.has("htm"))
    if (const json::Object *h = f.object("htm")) {
      Fields hf(h, "htm", error);
      read_htm(hf, error, r.htm.emplace());
    }
  if (auto from = root->getString("rules_from"))
    r.rules_replayed = *from == "replay";
  if (f.ok() && f.has("rules"))
    objects(f, "rules", error, [&](Fields &ru) {
      RuleStat rule;
      ru.str("rule", rule.rule);
      ru.uint("allocations", rule.allocations);
      ru.uint("bytes", rule.bytes);
      r.rules.push_back(std::move(rule));
    });
  if (f.ok() && f.has("notes"))
    values(
        f, "notes", error, r.notes,
        [](const json::Value &v) -> llvm::Optional<std::string> {
          if (auto s = v.getAsString())
            return s->str();
          return llvm::None;
        },
        "a string");
  // A finding names its groups by id: an id that no group has, or two
  // groups under one id, would diff and advise as some other group.
  if (error.empty()) {
    std::set<uint32_t> ids;
    for (size_t i = 0; i < r.groups.size() && error.empty(); ++i)
      if (!ids.insert(r.groups[i].group.id).second)
        error = "groups[" + std::to_string(i) + "].id: " + std::to_string(r.groups[i].group.id) +
                " is the id of an earlier group too";
    for (size_t i = 0; i < r.findings.size() && error.empty(); ++i)
      for (uint32_t id : r.findings[i].groups)
        if (!ids.count(id)) {
          error = "findings[" + std::to_string(i) + "].groups: no group has the id " +
                  std::to_string(id);
          break;
        }
  }
  if (!error.empty()) {
    error = name + ": " + error;
    return false;
  }
  r.groups_total = r.groups.size();
  out = std::move(r);
  return true;
}

bool read_report_json(const std::string &path, Report &out, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    error = path + ": read error";
    return false;
  }
  return parse_report_json(text.str(), path, out, error);
}

} // namespace memlayout::inspector
