#include "structs_report.h"

#include "cxx_names.h"

namespace memlayout::inspector {

StructsReport analyse_structs(std::vector<RecordLayout> records, std::vector<AllocSite> sites,
                              uint32_t line_size) {
  StructsReport out;
  out.line_size = line_size;
  out.sites = std::move(sites);
  out.records.reserve(records.size());
  for (RecordLayout &r : records) {
    RecordReport rr;
    rr.layout = std::move(r);
    rr.placements = place(rr.layout, line_size);
    rr.advice = advise(rr.layout, rr.placements, line_size, out.sites);
    out.records.push_back(std::move(rr));
  }
  return out;
}

namespace {

// "ns::Tree<int>" -> "ns::Tree".
std::string_view without_arguments(std::string_view name) {
  if (name.empty() || name.back() != '>')
    return name;
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == '>')
      ++depth;
    else if (name[i] == '<' && --depth == 0)
      return name.substr(0, i);
  }
  return name;
}

// `name` is `full` or its last scopes: "Node", "Tree<int>::Node".
bool same_or_scope_suffix(std::string_view full, std::string_view name) {
  if (full == name)
    return true;
  return full.size() > name.size() + 2 && full.substr(full.size() - name.size()) == name &&
         full.substr(full.size() - name.size() - 2, 2) == "::";
}

} // namespace

bool record_selected(const std::string &record, const std::string &name) {
  if (same_or_scope_suffix(record, name) || same_or_scope_suffix(without_arguments(record), name))
    return true;
  // "Tree<long,long>::Node" for "Tree<long, long>::Node", "std::string" for
  // the basic_string<char> clang prints.
  std::string canonical = canonical_cxx_name(record), wanted = canonical_cxx_name(name);
  return same_or_scope_suffix(canonical, wanted) ||
         same_or_scope_suffix(without_arguments(canonical), wanted);
}

bool record_selected(const RecordLayout &record, const std::string &name) {
  return record_selected(record.name, name) ||
         (!record.spelled.empty() && record_selected(record.spelled, name));
}

} // namespace memlayout::inspector
