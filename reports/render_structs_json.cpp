// `memlayout structs --format json`: the type map (docs/structs.md).
#include "json_write.h"
#include "render_structs.h"

namespace memlayout::cli {
namespace {

namespace in = memlayout::inspector;

Json field(const in::FieldLayout &f) {
  Json j = {{"name", f.name},
            {"offset", f.offset},
            {"size", f.size},
            {"type", f.type},
            {"align", f.align}};
  if (f.role != in::FieldRole::kField)
    j["role"] = in::role_name(f.role);
  if (f.sync != in::SyncKind::kNone)
    j["sync"] = in::sync_name(f.sync);
  if (f.is_bitfield()) {
    j["bit_offset"] = f.bit_offset;
    j["bit_size"] = f.bit_size;
  }
  if (!f.members.empty()) {
    j["nested"] = f.nested;
    j["members"] = Json::array();
    for (const in::FieldLayout &m : f.members)
      j["members"].push_back(field(m));
  }
  return j;
}

Json names(const in::RecordLayout &r, const std::vector<uint32_t> &indices) {
  Json a = Json::array();
  for (uint32_t i : indices)
    a.push_back(r.fields[i].name);
  return a;
}

Json placement(const in::RecordLayout &r, const in::Placement &p) {
  Json starts = Json::array();
  for (const in::LineStart &s : p.starts)
    starts.push_back(
        {{"offset", s.offset}, {"lines", s.lines}, {"straddling", names(r, s.straddling)}});
  return {{"slot", p.slot},
          {"waste", p.waste},
          {"min_lines", p.min_lines},
          {"straddle_fraction", p.straddle_fraction},
          {"starts", std::move(starts)},
          {"straddling_fields", names(r, p.straddling_fields)}};
}

Json record(const in::RecordReport &rr) {
  const in::RecordLayout &r = rr.layout;
  Json j = {{"name", r.name}, {"kind", r.kind}, {"file", r.file},
            {"line", r.line}, {"size", r.size}, {"align", r.align}};
  if (!r.spelled.empty())
    j["spelled"] = r.spelled;
  if (r.packed)
    j["packed"] = true;
  if (r.variant) {
    j["variant"] = r.variant;
    j["translation_units"] = r.translation_units;
  }
  j["fields"] = Json::array();
  for (const in::FieldLayout &f : r.fields)
    j["fields"].push_back(field(f));
  j["holes"] = Json::array();
  for (const in::Hole &h : r.holes)
    j["holes"].push_back({{"offset", h.offset}, {"size", h.size}});
  j["bit_holes"] = r.bit_holes;
  j["tail_padding"] = r.tail_padding;
  j["size_class"] = Json::object();
  j["placement"] = Json::object();
  for (const in::Placement &p : rr.placements) {
    j["size_class"][p.allocator] = p.slot;
    j["placement"][p.allocator] = placement(r, p);
  }
  j["risks"] = Json::array();
  for (const in::Risk &k : rr.advice.risks)
    j["risks"].push_back(
        {{"kind", k.kind}, {"severity", k.severity}, {"fields", k.fields}, {"message", k.message}});
  j["suggestions"] = Json::array();
  for (const in::Suggestion &s : rr.advice.suggestions) {
    Json x = {{"kind", s.kind}, {"size", s.size}};
    if (!s.order.empty())
      x["order"] = s.order;
    x["message"] = s.message;
    j["suggestions"].push_back(std::move(x));
  }
  return j;
}

} // namespace

void render_structs_json(const inspector::StructsReport &r, std::ostream &out) {
  Json j = {{"schema", inspector::kStructsSchema}, {"line_size", r.line_size}};
  j["records"] = Json::array();
  for (const in::RecordReport &rr : r.records)
    j["records"].push_back(record(rr));
  j["sites"] = Json::array();
  for (const in::AllocSite &s : r.sites) {
    Json x = {{"file", s.file},         {"line", s.line},         {"column", s.column},
              {"end_line", s.end_line}, {"function", s.function}, {"type", s.type},
              {"call", s.call}};
    if (s.dependent)
      x["dependent"] = true;
    if (s.variant)
      x["variant"] = s.variant;
    j["sites"].push_back(std::move(x));
  }
  j["failed"] = r.failed;
  write_json(j, out);
}

} // namespace memlayout::cli
