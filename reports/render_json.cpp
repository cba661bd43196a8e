// The report as JSON, schema memlayout.report/1 (../shared/design.md).
#include "alloc_site.h"
#include "json_write.h"
#include "render.h"

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

namespace memlayout::cli {
namespace {

using llvm::json::OStream;

void group(OStream &j, const inspector::Report &r, const inspector::GroupReport &g) {
  j.object([&] {
    j.attribute("id", g.group.id);
    j.attribute("name", g.group.name);
    if (!g.group.type.empty())
      j.attribute("type", g.group.type);
    j.attributeObject("site", [&] {
      j.attribute("function", g.group.site.function);
      j.attribute("file", g.group.site.file);
      j.attribute("line", g.group.site.line);
      if (!g.group.site.caller.empty())
        j.attribute("caller", g.group.site.caller);
    });
    j.attributeArray("looked_through", [&] {
      for (const auto &w : g.group.site.looked_through)
        j.object([&] {
          j.attribute("function", w.function);
          j.attribute("decided", inspector::looked_through_decided(w.reason));
          if (!w.evidence.empty())
            j.attribute("evidence", w.evidence);
        });
    });
    j.attribute("size_class", g.group.size_class);
    j.attribute("requested_size", g.group.requested_size);
    j.attribute("objects", g.objects);
    j.attribute("bytes", g.group.bytes);
    j.attributeArray("threads", [&] {
      for (uint32_t t : g.group.threads)
        j.value(t);
    });
    j.attribute("lines_per_object", g.lines_per_object);
    j.attribute("straddle_fraction", g.straddle_fraction);
    if (g.hot_bytes)
      j.attribute("hot_bytes", g.hot_bytes);
    j.attributeObject("set_effective_fraction", [&] {
      for (size_t i = 0; i < g.set_effective_fraction.size(); ++i) {
        std::string key = "L" + std::to_string(i + 1);
        optional_number(j, key.c_str(),
                        i < r.levels.size() ? g.set_effective_fraction[i] : std::nullopt);
      }
    });
    j.attributeArray("strides", [&] {
      for (const auto &s : g.strides)
        j.object([&] {
          j.attribute("bytes", s.bytes);
          j.attribute("share", s.share);
        });
    });
    j.attribute("pages_4k", g.pages_4k);
    j.attribute("pages_min", g.pages_min);
    j.attribute("regions_2m", g.regions_2m);
    j.attribute("page_runs", g.page_runs);
    j.attribute("cross_thread_lines", g.cross_thread_lines);
    j.attributeArray("neighbours", [&] {
      for (const auto &n : g.neighbours)
        j.object([&] {
          j.attribute("group", n.group);
          j.attribute("same_line", n.same_line);
          j.attribute("adjacent_line", n.adjacent_line);
          j.attribute("same_page", n.same_page);
        });
    });
  });
}

void offsets(OStream &j, const char *key, const std::vector<std::pair<uint64_t, uint64_t>> &v) {
  j.attributeArray(key, [&] {
    for (const auto &[off, n] : v)
      j.object([&] {
        j.attribute("offset", off);
        j.attribute("aborts", n);
      });
  });
}

// The trace's aborted transactions against the groups (docs/report.md).
void htm(OStream &j, const inspector::HtmAbortReport &h) {
  j.attributeObject("htm", [&] {
    j.attribute("transactions", h.transactions);
    j.attribute("aborts", h.aborts);
    j.attributeObject("by_cause", [&] {
      j.attribute("conflict", h.by_cause[0]);
      j.attribute("capacity", h.by_cause[1]);
      j.attribute("explicit", h.by_cause[2]);
      j.attribute("other", h.by_cause[3]);
    });
    j.attributeObject("conflicts", [&] {
      j.attribute("true", h.conflicts_true);
      j.attribute("false", h.conflicts_false);
      j.attribute("same_key", h.same_key);
      j.attribute("fallback_lock", h.by_fallback_lock);
      j.attribute("plain", h.by_plain);
    });
    j.attributeObject("capacity", [&] {
      j.attribute("write", h.capacity_write);
      j.attribute("read", h.capacity_read);
      j.attribute("mean_lines", h.capacity_mean_lines);
      j.attribute("mean_sets", h.capacity_mean_sets);
    });
    j.attributeObject("l1", [&] {
      j.attribute("sets", h.l1_sets);
      j.attribute("ways", h.l1_ways);
    });
    j.attribute("unresolved", h.unresolved);
    j.attributeArray("regions", [&] {
      for (const auto &name : h.regions)
        j.value(name);
    });
    j.attributeArray("groups", [&] {
      for (const auto &g : h.groups)
        j.object([&] {
          j.attribute("group", g.group);
          j.attribute("conflicts_false", g.conflicts_false);
          j.attribute("conflicts_true", g.conflicts_true);
          j.attribute("neighbour_object_conflicts", g.neighbour_object_conflicts);
          j.attribute("capacity_aborts", g.capacity_aborts);
          j.attribute("capacity_lines", g.capacity_lines);
          j.attribute("capacity_same_page_offset", g.capacity_same_page_offset);
          offsets(j, "false_offsets", g.false_offsets);
          offsets(j, "other_offsets", g.other_offsets);
          offsets(j, "capacity_offsets", g.capacity_offsets);
          j.attributeArray("sharers", [&] {
            for (const auto &[id, n] : g.sharers)
              j.object([&] {
                j.attribute("group", id);
                j.attribute("aborts", n);
              });
          });
        });
    });
  });
}

} // namespace

void render_json(const inspector::Report &r, std::ostream &out) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OStream j(os, 2);
  j.object([&] {
    j.attribute("schema", inspector::kReportSchema);
    j.attribute("trace", r.trace);
    j.attribute("at", r.at);
    j.attribute("at_ns", r.at_ns);
    j.attribute("partial", r.partial);
    j.attribute("allocator", r.allocator);
    j.attribute("live_objects", r.live_objects);
    j.attribute("live_bytes", r.live_bytes);
    j.attributeObject("cache", [&] {
      j.attributeArray("levels", [&] {
        for (const auto &l : r.levels)
          j.object([&] {
            j.attribute("level", l.level);
            j.attribute("type", l.type);
            j.attribute("sets", l.sets);
            j.attribute("ways", l.ways);
            j.attribute("line_size", l.line_size);
            j.attribute("size_bytes", l.size_bytes);
            j.attribute("indexing", l.indexing);
            j.attribute("bits", l.bits);
          });
      });
    });
    j.attributeArray("groups", [&] {
      for (const auto &g : r.groups)
        group(j, r, g);
    });
    j.attributeArray("findings", [&] {
      for (const auto &f : r.findings)
        j.object([&] {
          j.attribute("kind", f.kind);
          j.attribute("severity", f.severity);
          j.attributeArray("groups", [&] {
            for (uint32_t id : f.groups)
              j.value(id);
          });
          j.attributeObject("metric", [&] {
            for (const auto &[k, v] : f.metric)
              j.attribute(k, v);
          });
          j.attribute("message", f.message);
          j.attribute("fix", f.fix);
          if (!f.rule.empty())
            j.attribute("rule", f.rule);
        });
    });
    if (r.htm)
      htm(j, *r.htm);
    if (!r.rules.empty())
      j.attributeArray("rules", [&] {
        for (const auto &rule : r.rules)
          j.object([&] {
            j.attribute("rule", rule.rule);
            j.attribute("allocations", rule.allocations);
            j.attribute("bytes", rule.bytes);
          });
      });
    j.attributeArray("notes", [&] {
      for (const auto &n : r.notes)
        j.value(n);
    });
  });
  os.flush();
  out << text << '\n';
}

} // namespace memlayout::cli
