// `memlayout structs` as text: pahole's layout (`/* offset size */`
// columns, holes, cacheline boundaries, the summary) followed by where
// jemalloc and glibc put the record, its risks and the suggested changes.
#include "render_structs.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace memlayout::cli {
namespace {

namespace in = memlayout::inspector;

std::string shown_path(const std::string &path, const StructsTextOptions &o) {
  const std::string &base = o.relative_to;
  if (!base.empty() && path.size() > base.size() && path.compare(0, base.size(), base) == 0 &&
      path[base.size()] == '/')
    return path.substr(base.size() + 1);
  return path;
}

// In the layout a base shows as its role, pahole's way.
std::string layout_name(const in::FieldLayout &f) {
  switch (f.role) {
  case in::FieldRole::kBase:
    return "<base>";
  case in::FieldRole::kVirtualBase:
    return "<virtual base>";
  default:
    return in::member_name(f);
  }
}

std::string offsets(const std::vector<uint32_t> &v) {
  std::string s;
  for (uint32_t o : v)
    s += (s.empty() ? "+" : " +") + std::to_string(o);
  return s;
}

// `/* offset size */` (bit-fields: `/* offset:bit size */`).
std::string columns(const in::FieldLayout &f) {
  char cols[64];
  if (f.is_bitfield())
    std::snprintf(cols, sizeof cols, "/* %5llu:%-2u %4llu */",
                  static_cast<unsigned long long>(f.offset), f.bit_offset % 8,
                  static_cast<unsigned long long>(f.size));
  else
    std::snprintf(cols, sizeof cols, "/* %5llu %5llu */", static_cast<unsigned long long>(f.offset),
                  static_cast<unsigned long long>(f.size));
  return cols;
}

std::string padded(const std::string &s, size_t width) {
  return s + std::string(s.size() < width ? width - s.size() : 1, ' ');
}

// pahole's member line: type, name, then `/* offset size */`. A member of
// an unnamed struct or union type shows its members inside, a tab deeper,
// with the holes between them, as pahole expands it.
void member(std::ostream &out, const in::FieldLayout &f, size_t type_width, size_t name_width,
            const std::string &indent = "\t") {
  std::string type = f.type;
  std::string name = layout_name(f);
  if (!f.members.empty()) {
    out << indent << f.nested << " {\n";
    uint64_t end = f.members.front().offset;
    for (const in::FieldLayout &m : f.members) {
      if (f.nested == "struct" && !m.is_bitfield() && m.offset > end)
        out << "\n"
            << indent << "\t/* XXX " << m.offset - end << " byte"
            << (m.offset - end == 1 ? "" : "s") << " hole, try to pack */\n\n";
      member(out, m, type_width > 8 ? type_width - 8 : type_width, name_width, indent + "\t");
      end = std::max(end, (m.end_bit() + 7) / 8);
    }
    std::string close = "}" + (f.name.empty() ? std::string() : " " + f.name) + ";";
    out << indent << padded(close, type_width + name_width) << columns(f) << "\n";
    return;
  }
  // C's declarator order, as pahole writes it: `char pad[56];`.
  if (size_t bracket = type.find('[');
      bracket != std::string::npos && type.back() == ']' && type.find('(') == std::string::npos) {
    name += type.substr(bracket);
    type.erase(type.find_last_not_of(' ', bracket - 1) + 1);
  }
  if (f.is_bitfield())
    name += ":" + std::to_string(f.bit_size);
  name += ";";
  out << indent << padded(type, type_width) << padded(name, name_width) << columns(f);
  if (f.sync != in::SyncKind::kNone)
    out << " /* " << in::sync_name(f.sync) << " */";
  out << "\n";
}

void members(std::ostream &out, const in::RecordLayout &r, uint32_t line) {
  size_t type_width = 26, name_width = 21;
  for (const in::FieldLayout &f : r.fields) {
    type_width = std::max(type_width, std::min<size_t>(f.type.size() + 1, 48));
    name_width = std::max(name_width, std::min<size_t>(layout_name(f).size() + 5, 40));
  }
  size_t next_hole = 0;
  // pahole's boundary comments: before a member on a later line than the
  // last comment, one comment for the line it starts on, however many lines
  // the members before it crossed ("was n bytes ago": how far into that
  // line the member starts).
  uint64_t shown_line = 0;
  for (const in::FieldLayout &f : r.fields) {
    if (!r.is_union()) {
      while (next_hole < r.holes.size() &&
             r.holes[next_hole].offset + r.holes[next_hole].size <= f.offset) {
        out << "\n\t/* XXX " << r.holes[next_hole].size << " byte"
            << (r.holes[next_hole].size == 1 ? "" : "s") << " hole, try to pack */\n\n";
        ++next_hole;
      }
      if (f.offset / line > shown_line) {
        shown_line = f.offset / line;
        out << "\t/* --- cacheline " << shown_line << " boundary (" << shown_line * line
            << " bytes)";
        if (f.offset % line)
          out << " was " << f.offset % line << " bytes ago";
        out << " --- */\n";
      }
    }
    member(out, f, type_width, name_width);
  }
}

void summary(std::ostream &out, const in::RecordLayout &r, uint32_t line) {
  uint64_t hole_bytes = 0, members_count = 0;
  for (const in::Hole &h : r.holes)
    hole_bytes += h.size;
  // As pahole counts them: base subobjects and the vptr are members too.
  members_count = r.fields.size();
  out << "\n\t/* size: " << r.size << ", cachelines: " << (r.size + line - 1) / line
      << ", members: " << members_count << ", align: " << r.align << (r.packed ? ", packed" : "")
      << " */\n";
  out << "\t/* sum members: " << r.size - hole_bytes - r.tail_padding
      << ", holes: " << r.holes.size() << ", sum holes: " << hole_bytes << " */\n";
  if (r.bit_holes)
    out << "\t/* sum bit holes: " << r.bit_holes << " bits */\n";
  if (r.tail_padding)
    out << "\t/* padding: " << r.tail_padding << " */\n";
  if (r.size % line)
    out << "\t/* last cacheline: " << r.size % line << " bytes */\n";
}

// One allocator's column: slot, waste, starts, lines at each, straddling members.
void placement(std::ostream &out, const in::RecordLayout &r, const in::Placement &p) {
  std::vector<uint32_t> all, longer;
  for (const in::LineStart &s : p.starts) {
    all.push_back(s.offset);
    if (s.lines > p.min_lines)
      longer.push_back(s.offset);
  }
  std::string label = p.allocator + ":";
  label.resize(std::max<size_t>(label.size(), 10), ' ');
  out << "\t/* " << label << (p.allocator == "glibc" ? "chunk " : "class ") << p.slot << " ("
      << p.waste << " B wasted), starts at " << offsets(all) << ": " << p.min_lines << " line"
      << (p.min_lines == 1 ? "" : "s");
  if (!longer.empty())
    out << ", " << p.min_lines + 1 << " at " << offsets(longer) << " (" << longer.size() << " of "
        << all.size() << ")";
  out << " */\n";
  std::map<uint32_t, std::vector<uint32_t>> straddles; // field -> starts
  for (const in::LineStart &s : p.starts)
    for (uint32_t f : s.straddling)
      straddles[f].push_back(s.offset);
  for (const auto &[f, at] : straddles)
    out << "\t/*            '" << member_name(r.fields[f]) << "' crosses a line at " << offsets(at)
        << " */\n";
}

void record(std::ostream &out, const in::RecordReport &rr, uint32_t line,
            const StructsTextOptions &o) {
  const in::RecordLayout &r = rr.layout;
  out << "/* " << shown_path(r.file, o) << ":" << r.line << " */\n";
  if (r.variant) {
    out << "/* layout " << r.variant << " of " << r.name
        << ", which translation units lay out differently; this one in";
    for (const std::string &tu : r.translation_units)
      out << " [" << shown_path(tu, o) << "]";
    out << " */\n";
  }
  out << r.kind << " " << r.name << " {\n";
  members(out, r, line);
  summary(out, r, line);
  for (const in::Placement &p : rr.placements)
    placement(out, r, p);
  out << "};\n";
  for (const in::Risk &k : rr.advice.risks)
    out << "/* risk (" << k.severity << ") " << k.kind << ": " << k.message << " */\n";
  for (const in::Suggestion &s : rr.advice.suggestions)
    out << "/* suggest " << s.kind << ": " << s.message << " */\n";
  out << "\n";
}

// A type as written in a template nothing instantiates: (T); a record that
// translation units lay out differently: the layout of the site's own.
std::string shown_type(const in::AllocSite &s) {
  if (s.dependent)
    return "(" + s.type + ")";
  if (s.variant)
    return s.type + " [layout " + std::to_string(s.variant) + "]";
  return s.type;
}

void sites(std::ostream &out, const std::vector<in::AllocSite> &all, const StructsTextOptions &o) {
  out << "/* allocation sites: " << all.size() << " */\n";
  std::vector<std::string> where;
  size_t where_width = 0, call_width = 4, type_width = 4;
  for (const in::AllocSite &s : all) {
    where.push_back(shown_path(s.file, o) + ":" + std::to_string(s.line) + ":" +
                    std::to_string(s.column));
    where_width = std::max(where_width, where.back().size());
    call_width = std::max(call_width, s.call.size());
    type_width = std::max(type_width, shown_type(s).size());
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const in::AllocSite &s = all[i];
    std::string type = shown_type(s);
    out << where[i] << std::string(where_width - where[i].size() + 2, ' ') << s.call
        << std::string(call_width - s.call.size() + 2, ' ') << type
        << std::string(type_width - type.size() + 2, ' ')
        << (s.function.empty() ? "(file scope)" : s.function) << "\n";
  }
}

} // namespace

void render_structs_text(const inspector::StructsReport &r, std::ostream &out,
                         const StructsTextOptions &o) {
  for (const in::RecordReport &rr : r.records)
    record(out, rr, r.line_size, o);
  if (r.records.empty())
    out << "/* no records */\n\n";
  sites(out, r.sites, o);
}

} // namespace memlayout::cli
