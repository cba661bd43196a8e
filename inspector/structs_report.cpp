#include "structs_report.h"

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

// "ns::Tree<int>::Node" -> "Node": after the last scope outside template arguments.
std::string_view unqualified(std::string_view name) {
  int depth = 0;
  size_t tail = 0;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == '<')
      ++depth;
    else if (name[i] == '>')
      --depth;
    else if (depth == 0 && name[i] == ':' && name[i + 1] == ':')
      tail = i + 2;
  }
  return name.substr(tail);
}

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

} // namespace

bool record_selected(const std::string &record, const std::string &name) {
  std::string_view r = record;
  for (std::string_view candidate :
       {r, unqualified(r), without_arguments(r), without_arguments(unqualified(r))})
    if (candidate == name)
      return true;
  return false;
}

} // namespace memlayout::inspector
