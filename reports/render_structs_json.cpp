// `memlayout structs --format json`: the type map (docs/structs.md).
#include "render_structs.h"

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_os_ostream.h>

namespace memlayout::cli {
namespace {

using llvm::json::OStream;
namespace in = memlayout::inspector;

void field(OStream &j, const in::FieldLayout &f) {
  j.object([&] {
    j.attribute("name", f.name);
    j.attribute("offset", f.offset);
    j.attribute("size", f.size);
    j.attribute("type", f.type);
    j.attribute("align", f.align);
    if (f.role != in::FieldRole::kField)
      j.attribute("role", in::role_name(f.role));
    if (f.sync != in::SyncKind::kNone)
      j.attribute("sync", in::sync_name(f.sync));
    if (f.is_bitfield()) {
      j.attribute("bit_offset", f.bit_offset);
      j.attribute("bit_size", f.bit_size);
    }
  });
}

void names(OStream &j, const char *key, const in::RecordLayout &r,
           const std::vector<uint32_t> &indices) {
  j.attributeArray(key, [&] {
    for (uint32_t i : indices)
      j.value(r.fields[i].name);
  });
}

void placement(OStream &j, const in::RecordLayout &r, const in::Placement &p) {
  j.attributeObject(p.allocator, [&] {
    j.attribute("slot", p.slot);
    j.attribute("waste", p.waste);
    j.attribute("min_lines", p.min_lines);
    j.attribute("straddle_fraction", p.straddle_fraction);
    j.attributeArray("starts", [&] {
      for (const in::LineStart &s : p.starts)
        j.object([&] {
          j.attribute("offset", s.offset);
          j.attribute("lines", s.lines);
          names(j, "straddling", r, s.straddling);
        });
    });
    names(j, "straddling_fields", r, p.straddling_fields);
  });
}

void record(OStream &j, const in::RecordReport &rr) {
  const in::RecordLayout &r = rr.layout;
  j.object([&] {
    j.attribute("name", r.name);
    j.attribute("kind", r.kind);
    j.attribute("file", r.file);
    j.attribute("line", r.line);
    j.attribute("size", r.size);
    j.attribute("align", r.align);
    if (r.packed)
      j.attribute("packed", true);
    j.attributeArray("fields", [&] {
      for (const in::FieldLayout &f : r.fields)
        field(j, f);
    });
    j.attributeArray("holes", [&] {
      for (const in::Hole &h : r.holes)
        j.object([&] {
          j.attribute("offset", h.offset);
          j.attribute("size", h.size);
        });
    });
    j.attribute("bit_holes", r.bit_holes);
    j.attribute("tail_padding", r.tail_padding);
    j.attributeObject("size_class", [&] {
      for (const in::Placement &p : rr.placements)
        j.attribute(p.allocator, p.slot);
    });
    j.attributeObject("placement", [&] {
      for (const in::Placement &p : rr.placements)
        placement(j, r, p);
    });
    j.attributeArray("risks", [&] {
      for (const in::Risk &k : rr.advice.risks)
        j.object([&] {
          j.attribute("kind", k.kind);
          j.attribute("severity", k.severity);
          j.attributeArray("fields", [&] {
            for (const std::string &f : k.fields)
              j.value(f);
          });
          j.attribute("message", k.message);
        });
    });
    j.attributeArray("suggestions", [&] {
      for (const in::Suggestion &s : rr.advice.suggestions)
        j.object([&] {
          j.attribute("kind", s.kind);
          j.attribute("size", s.size);
          if (!s.order.empty())
            j.attributeArray("order", [&] {
              for (const std::string &f : s.order)
                j.value(f);
            });
          j.attribute("message", s.message);
        });
    });
  });
}

} // namespace

void render_structs_json(const inspector::StructsReport &r, std::ostream &out) {
  llvm::raw_os_ostream os(out);
  OStream j(os, 2);
  j.object([&] {
    j.attribute("schema", inspector::kStructsSchema);
    j.attribute("line_size", r.line_size);
    j.attributeArray("records", [&] {
      for (const in::RecordReport &rr : r.records)
        record(j, rr);
    });
    j.attributeArray("sites", [&] {
      for (const in::AllocSite &s : r.sites)
        j.object([&] {
          j.attribute("file", s.file);
          j.attribute("line", s.line);
          j.attribute("column", s.column);
          j.attribute("end_line", s.end_line);
          j.attribute("function", s.function);
          j.attribute("type", s.type);
          j.attribute("call", s.call);
          if (s.dependent)
            j.attribute("dependent", true);
        });
    });
    j.attributeArray("failed", [&] {
      for (const std::string &f : r.failed)
        j.value(f);
    });
  });
  os << "\n";
}

} // namespace memlayout::cli
