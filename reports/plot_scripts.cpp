#include "plot_scripts.h"

#include "text_format.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace memlayout::cli {
namespace {

using inspector::Report;

// Few enough bins that each is a visible box; above it, impulses.
constexpr size_t kBoxBins = 256;

// A gnuplot single-quoted string: only the quote itself needs doubling.
// Texts are set noenhanced, so ^ _ { } @ & stay literal.
std::string quoted(const std::string &text) {
  const std::string s = valid_utf8(text); // an SVG is XML: UTF-8 only
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

std::string group_name(const Report &r, uint32_t id) {
  for (const auto &g : r.groups)
    if (g.group.id == id)
      return g.group.name;
  return "group " + std::to_string(id);
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string percent(double v) {
  char b[16];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// Writes a report's figures into one folder, titled with its groups' names.
class Writer {
public:
  Writer(const std::string &dir, const std::vector<std::string> &group_names, std::string &error)
      : shown(group_names), dir_(dir), error_(error) {}
  bool write(const std::string &name, const std::string &text) {
    std::ofstream f(dir_ + "/" + name, std::ios::trunc);
    f << text;
    f.close();
    if (!f) {
      error_ = "cannot write " + dir_ + "/" + name + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }

  const DisplayNames shown;

private:
  const std::string &dir_;
  std::string &error_;
};

std::string preamble(const std::string &svg, int width, int height) {
  std::ostringstream s;
  s << "set terminal svg size " << width << "," << height
    << " noenhanced font 'sans,11' background '#ffffff'\n"
    << "set output " << quoted(svg) << "\n"
    << "set border 3\nset tics nomirror\nset key top right\n";
  return s.str();
}

// One level's panels: the whole histogram and, when its sets are too many to
// tell apart (a 2048-set L2 is 0.3 pixel a set), a zoom on the first ones,
// where patterns like every other set empty show.
void occupancy_level(const inspector::PlotOccupancy &p, const std::string &data, double top,
                     double height, std::ostream &gp) {
  const double expected =
      p.domain ? static_cast<double>(p.lines_total) / static_cast<double>(p.domain) * p.sets_per_bin
               : 0;
  std::string title = "L" + std::to_string(p.level) + ": " + std::to_string(p.domain) +
                      " set indices, " + std::to_string(p.lines_total) + " lines";
  if (p.effective_fraction)
    title += ", effective set fraction " + percent(*p.effective_fraction);
  if (p.sets_per_bin > 1)
    title += " (each bar sums " + std::to_string(p.sets_per_bin) + " sets)";
  const bool zoom = p.lines.size() > kBoxBins;
  gp << "set origin 0," << 1.0 - top - height << "\nset size " << (zoom ? 0.64 : 1.0) << ","
     << height << "\nset title " << quoted(title) << "\nset ylabel "
     << quoted(p.sets_per_bin > 1 ? "lines per bar" : "lines per set")
     << "\nset xlabel 'set index'\nset xrange [-0.5:" << p.domain << "-0.5]\nset boxwidth "
     << p.sets_per_bin * 0.8 << "\nplot " << quoted(data) << " using 1:2 with "
     << (zoom ? "impulses" : "boxes") << " lc rgb '#3b6ea8' title 'lines', " << expected
     << " with lines lw 2 dt 2 lc rgb '#c0392b' title 'uniform expectation'\n";
  if (!zoom)
    return;
  const uint64_t shown = std::min<uint64_t>(128, p.lines.size()) * p.sets_per_bin;
  gp << "set origin 0.64," << 1.0 - top - height << "\nset size 0.36," << height
     << "\nset title 'zoom: the first " << shown << " set indices'\nset ylabel ''\n"
     << "set xrange [-0.5:" << shown << "-0.5]\nplot " << quoted(data)
     << " using 1:2 with boxes lc rgb '#3b6ea8' notitle, " << expected
     << " with lines lw 2 dt 2 lc rgb '#c0392b' notitle\n";
}

bool occupancy(const Report &r, uint32_t group, Writer &w, std::vector<PlotScript> &out) {
  std::vector<const inspector::PlotOccupancy *> levels;
  for (const auto &p : r.plots->occupancy)
    if (p.group == group && !p.lines.empty())
      levels.push_back(&p);
  if (levels.empty())
    return true;
  const std::string base = "occupancy-g" + std::to_string(group);
  const int title_px = 30, level_px = 220;
  const int height = title_px + level_px * static_cast<int>(levels.size());
  std::ostringstream gp;
  gp << preamble(base + ".svg", 900, height) << "set multiplot title "
     << quoted(w.shown(group_name(r, group)) + ": cache lines per set") << "\n"
     << "set yrange [0:*]\nset offsets 0, 0, graph 0.3, 0\nset key top right horizontal\n"
     << "set style fill solid 0.6 noborder\n";
  const double level_h = static_cast<double>(level_px) / height;
  double top = static_cast<double>(title_px) / height;
  for (const auto *p : levels) {
    const std::string data = base + "-L" + std::to_string(p->level) + ".dat";
    std::ostringstream d;
    for (size_t i = 0; i < p->lines.size(); ++i)
      d << i * p->sets_per_bin << " " << p->lines[i] << "\n";
    if (!w.write(data, d.str()))
      return false;
    occupancy_level(*p, data, top, level_h, gp);
    top += level_h;
  }
  gp << "unset multiplot\n";
  if (!w.write(base + ".gp", gp.str()))
    return false;
  out.push_back({"occupancy", group, base + ".gp", base + ".svg",
                 "Lines of the group per cache set, one row per level (right: the first sets "
                 "enlarged); the dashed line is what uniform placement would give. Every other "
                 "set empty: objects on every other line."});
  return true;
}

bool offsets(const Report &r, const inspector::PlotOffsets &p, Writer &w,
             std::vector<PlotScript> &out) {
  if (p.objects.empty())
    return true;
  const std::string base = "offsets-g" + std::to_string(p.group);
  std::ostringstream d;
  uint64_t objects = 0, straddling = 0;
  for (size_t i = 0; i < p.objects.size(); ++i) {
    const uint64_t s = i < p.straddling.size() ? p.straddling[i] : 0;
    d << i << " " << p.objects[i] << " " << s << "\n";
    objects += p.objects[i];
    straddling += s;
  }
  if (!w.write(base + ".dat", d.str()))
    return false;
  std::ostringstream gp;
  gp << preamble(base + ".svg", 720, 280) << "set title "
     << quoted(w.shown(group_name(r, p.group)) + ": objects by start offset in their line (" +
               std::to_string(straddling) + " of " + std::to_string(objects) + " straddle)")
     << "\nset xlabel 'start offset within the " << p.line_size << "-byte line (bytes)'\n"
     << "set ylabel 'objects'\nset yrange [0:*]\nset xrange [-0.5:" << p.line_size
     << "-0.5]\nset xtics 0,8\nset boxwidth 0.8\nset style fill solid 0.7 noborder\n"
     << "plot " << quoted(base + ".dat")
     << " using 1:2 with boxes lc rgb '#3b6ea8' title 'objects', '' using 1:3 with boxes lc rgb "
        "'#c0392b' title 'straddling a line boundary'\n";
  if (!w.write(base + ".gp", gp.str()))
    return false;
  out.push_back({"offsets", p.group, base + ".gp", base + ".svg",
                 "Where in its cache line each object starts; red: objects that overlap more "
                 "lines than their size needs."});
  return true;
}

bool chunks(const Report &r, const inspector::PlotChunks &p, Writer &w,
            std::vector<PlotScript> &out) {
  if (p.regions.empty())
    return true;
  const std::string base = "chunks-g" + std::to_string(p.group);
  std::ostringstream d;
  for (size_t row = 0; row < p.pages.size(); ++row)
    for (uint32_t page : p.pages[row])
      d << page << " " << row << "\n";
  if (!w.write(base + ".dat", d.str()))
    return false;
  const size_t rows = p.regions.size();
  std::ostringstream tics;
  for (size_t row = 0; row < rows; ++row)
    tics << (row ? ", " : "") << quoted(hex(p.regions[row])) << " " << row;
  std::string title = w.shown(group_name(r, p.group)) + ": " + std::to_string(p.page_size / 1024) +
                      " KiB pages it touches in each " + std::to_string(p.region_size >> 20) +
                      " MiB region";
  if (p.regions_total > rows)
    title += " (first " + std::to_string(rows) + " of " + std::to_string(p.regions_total) + ")";
  std::ostringstream gp;
  gp << preamble(base + ".svg", 720, 110 + 22 * static_cast<int>(rows)) << "set title "
     << quoted(title) << "\nset xlabel 'page within the region (" << p.page_size / 1024
     << " KiB pages)'\nset ylabel 'region base'\nset xrange [-0.5:" << p.pages_per_region
     << "-0.5]\nset yrange [" << rows << "-0.5:-0.5]\nset ytics (" << tics.str()
     << ")\nset xtics 0,64\nunset key\nset style fill solid 1.0 noborder\n"
     << "plot " << quoted(base + ".dat")
     << " using 1:2:(0.5):(0.4) with boxxyerror lc rgb '#3b6ea8'\n";
  if (!w.write(base + ".gp", gp.str()))
    return false;
  out.push_back({"chunks", p.group, base + ".gp", base + ".svg",
                 "Each row a 2 MiB region, each mark a 4 KiB page holding the group's bytes. "
                 "Dense solid runs: packed; sparse scattered marks: the group is spread over "
                 "many more pages (TLB entries) than it needs."});
  return true;
}

// Crisp cells, one rectangle each (an image would be smoothed into blobs by
// the SVG viewer), rows labelled by the groups' names, columns by their ids.
bool colocation(const Report &r, Writer &w, std::vector<PlotScript> &out) {
  const auto &p = *r.plots;
  const size_t n = p.colocation_groups.size();
  if (n < 2)
    return true;
  std::ostringstream ids, names;
  for (size_t i = 0; i < n; ++i) {
    uint32_t id = p.colocation_groups[i];
    std::string name = w.shown(group_name(r, id));
    if (name.size() > 30)
      name = name.substr(0, 29) + "~";
    ids << (i ? ", " : "") << quoted(std::to_string(id)) << " " << i;
    names << (i ? ", " : "") << quoted(std::to_string(id) + " " + name) << " " << i;
  }
  const int cell = n <= 4 ? 60 : n <= 8 ? 40 : 26;
  const int panel = static_cast<int>(n) * cell + 80;
  std::ostringstream gp;
  gp << preamble("colocation.svg", 260 + 3 * panel, panel + 110)
     << "set multiplot layout 1,3 title 'Co-location: share of the row group''s objects with an "
        "object of the column group' margins 0.2, 0.98, 0.12, 0.86 spacing 0.02\n"
     << "set xlabel 'column group (id)'\n"
     << "set xtics (" << ids.str() << ")\nset ytics (" << names.str() << ")\n"
     << "set xrange [-0.5:" << n << "-0.5]\nset yrange [" << n << "-0.5:-0.5]\n"
     << "set cbrange [0:1]\nset palette defined (0 '#ffffff', 0.001 '#fbe9e7', 1 '#8e1c1c')\n"
     << "unset colorbox\nunset key\nset size ratio -1\nset tics scale 0\n"
     << "set style fill solid 1.0 border lc rgb '#dddddd'\n";
  const struct {
    const char *file, *title;
    const std::vector<double> &cells;
  } panels[] = {{"colocation-same-line.dat", "same cache line", p.same_line},
                {"colocation-adjacent-line.dat", "adjacent line (128-byte pair)", p.adjacent_line},
                {"colocation-same-page.dat", "same 4 KiB page", p.same_page}};
  bool first = true;
  for (const auto &panel : panels) {
    std::ostringstream d;
    for (size_t row = 0; row < n; ++row)
      for (size_t col = 0; col < n; ++col)
        d << col << " " << row << " " << panel.cells[row * n + col] << "\n";
    if (!w.write(panel.file, d.str()))
      return false;
    if (!first)
      gp << "set ytics (" << ids.str() << ")\n";
    first = false;
    gp << "set title " << quoted(panel.title) << "\nplot " << quoted(panel.file)
       << " using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, '' using 1:2:($3 > 0.005 ? "
          "sprintf('%.0f%%', $3 * 100) : '') with labels font 'sans,9' tc rgb '#000000'\n";
  }
  gp << "unset multiplot\n";
  if (!w.write("colocation.gp", gp.str()))
    return false;
  out.push_back({"colocation", 0, "colocation.gp", "colocation.svg",
                 "Per pair of the largest groups, the share of the row group's objects that have "
                 "an object of the column group on the same line, on the other line of their "
                 "128-byte prefetch pair, or on the same page. A dark off-diagonal cell: the two "
                 "groups are interleaved."});
  return true;
}

} // namespace

bool write_plot_scripts(const Report &r, const std::string &dir, std::vector<PlotScript> &out,
                        std::string &error) {
  out.clear();
  if (!r.plots)
    return true;
  std::vector<std::string> names;
  for (const auto &g : r.groups)
    names.push_back(g.group.name);
  Writer w(dir, names, error);
  if (!colocation(r, w, out))
    return false;
  // Per group in the report's order (largest first): its three figures together.
  for (const auto &o : r.plots->offsets) {
    if (!occupancy(r, o.group, w, out) || !offsets(r, o, w, out))
      return false;
    for (const auto &c : r.plots->chunks)
      if (c.group == o.group && !chunks(r, c, w, out))
        return false;
  }
  return true;
}

} // namespace memlayout::cli
