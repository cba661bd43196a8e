// `memlayout report --format html`: the page names the int-lf case and its
// fix, every figure it shows exists as an SVG, text is escaped, and without
// gnuplot (or with a broken one) the report says so instead of failing
// silently.
#include "support.h"

#include <catch2/catch.hpp>
#include <llvm/Support/Compression.h>
#include <llvm/Support/Error.h>

#include <cstdlib>

#include <sys/stat.h>

using namespace mlt;

namespace {

// The src attributes of the page's <img> tags.
std::vector<std::string> image_sources(const std::string &html) {
  std::vector<std::string> out;
  const std::string tag = "<img src=\"";
  for (size_t at = html.find(tag); at != std::string::npos; at = html.find(tag, at + 1)) {
    const size_t start = at + tag.size();
    out.push_back(html.substr(start, html.find('"', start) - start));
  }
  return out;
}

bool is_svg(const std::string &text) {
  return text.rfind("<?xml", 0) == 0 || text.rfind("<svg", 0) == 0;
}

// A trace of the int-lf case under a file name that needs escaping in HTML.
std::string record_node_descriptor(const std::string &dir) {
  std::string trace = dir + "/a<b>&c.trace";
  RunResult rec =
      record({"-o", trace, "--allocator", "jemalloc"}, {program("node_descriptor"), "20000"});
  REQUIRE(rec.exit_code() == 0);
  return trace;
}

} // namespace

TEST_CASE("report_html.page_and_plots", "[report][html]") {
  std::string dir = work_dir("report_html");
  std::string trace = record_node_descriptor(dir);
  std::string out = dir + "/html/nested"; // created by report
  RunResult r = run({memlayout_bin(), "report", trace, "--format", "html", "-o", out});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code() == 0);
  REQUIRE(file_exists(out + "/index.html"));
  std::string html = read_file(out + "/index.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("mlr_new_node") != std::string::npos);
  CHECK(html.find("set_underutilization") != std::string::npos);
  CHECK(html.find("function=mlr_new_node,pool=") != std::string::npos);
  // The trace's name is in the page, escaped.
  CHECK(html.find("a&lt;b&gt;&amp;c.trace") != std::string::npos);
  CHECK(html.find("a<b>&c") == std::string::npos);
  // Nothing fetched from elsewhere.
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);

  std::vector<std::string> images = image_sources(html);
  const bool have_gnuplot =
      run({"/bin/sh", "-c", "command -v gnuplot >/dev/null"}).exit_code() == 0;
  if (have_gnuplot) {
    CHECK(images.size() >= 4); // co-location, and per group occupancy, offsets, chunks
    for (const char *kind : {"colocation", "occupancy", "offsets", "chunks"}) {
      bool found = false;
      for (const auto &src : images)
        found |= src.find(kind) != std::string::npos;
      CHECK(found);
    }
  } else {
    WARN("gnuplot is not installed: only the page without plots is checked");
    CHECK(images.empty());
    CHECK(html.find("plots need gnuplot (apt-get install gnuplot-nox)") != std::string::npos);
  }
  for (const auto &src : images) {
    CAPTURE(src);
    CHECK(src.find('/') == std::string::npos); // beside the page
    REQUIRE(file_exists(out + "/" + src));
    std::string svg = read_file(out + "/" + src);
    CHECK(!svg.empty());
    CHECK(is_svg(svg));
  }
}

TEST_CASE("report_html.without_gnuplot", "[report][html]") {
  std::string dir = work_dir("report_html_nognuplot");
  std::string trace = record_node_descriptor(dir);
  RunOptions no_path;
  no_path.setenv.push_back({"PATH", dir}); // holds no gnuplot
  RunResult r =
      run({memlayout_bin(), "report", trace, "--format", "html", "-o", dir + "/out"}, no_path);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code() == 0);
  std::string html = read_file(dir + "/out/index.html");
  CHECK(html.find("plots need gnuplot (apt-get install gnuplot-nox)") != std::string::npos);
  CHECK(image_sources(html).empty());
  CHECK(html.find("set_underutilization") != std::string::npos);
}

// The page's advise command analyses what the page shows: its moment.
TEST_CASE("report_html.advise_hint_keeps_the_analysis", "[report][html]") {
  std::string dir = work_dir("report_html_hint");
  std::string trace = record_node_descriptor(dir);
  // --hot too: the findings a hot prefix makes need it again (advise wrote
  // "0 rules for 0 findings" from the page's command without it).
  RunResult r = run({memlayout_bin(), "report", trace, "--at", "end", "--hot", "mlr_new_node=16",
                     "--format", "html", "-o", dir + "/out"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code() == 0);
  std::string html = read_file(dir + "/out/index.html");
  if (html.find("All of them as a rules file") != std::string::npos)
    CHECK(html.find(".trace&#39; --at end --hot mlr_new_node=16 -o rules.txt</code>") !=
          std::string::npos); // quoted
  else
    CHECK(html.find("No findings") != std::string::npos);
}

TEST_CASE("report_html.failing_gnuplot", "[report][html]") {
  std::string dir = work_dir("report_html_badgnuplot");
  std::string trace = record_node_descriptor(dir);
  std::string bin = dir + "/bin";
  REQUIRE(mkdir(bin.c_str(), 0755) == 0);
  REQUIRE(run({"/bin/sh", "-c",
               "printf '#!/bin/sh\\necho broken gnuplot >&2\\nexit 1\\n' > '" + bin +
                   "/gnuplot' && chmod +x '" + bin + "/gnuplot'"})
              .exit_code() == 0);
  RunOptions fake;
  fake.setenv.push_back({"PATH", bin});
  RunResult r =
      run({memlayout_bin(), "report", trace, "--format", "html", "-o", dir + "/out"}, fake);
  CHECK(r.exit_code() == 2);
  CHECK(r.err.find(".gp") != std::string::npos); // names the script
  CHECK(r.err.find("broken gnuplot") != std::string::npos);
  CHECK(file_exists(dir + "/out/index.html"));
}

TEST_CASE("report_html.usage", "[report][html]") {
  std::string dir = work_dir("report_html_usage");
  std::string trace = dir + "/t.trace";
  REQUIRE(record({"-o", trace}, {program("node_descriptor"), "100"}).exit_code() == 0);
  RunResult no_dir = run({memlayout_bin(), "report", trace, "--format", "html"});
  CHECK(no_dir.exit_code() == 2);
  CHECK(no_dir.err.find("-o") != std::string::npos);
  // -o naming a file, not a directory: an error naming it.
  RunResult file = run({memlayout_bin(), "report", trace, "--format", "html", "-o", trace});
  CHECK(file.exit_code() == 2);
  CHECK(file.err.find(trace) != std::string::npos);
  // Text and JSON are unchanged by the html option's existence.
  CHECK(run({memlayout_bin(), "report", trace, "--format", "json"}).exit_code() == 0);
}

namespace {

// The first chromium of Debian's on PATH, or "".
std::string find_chromium() {
  for (const char *p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (file_exists(p))
      return p;
  return {};
}

uint32_t be32(const std::string &s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb; // 3 bytes a pixel, rows top to bottom
};

// A PNG as Chromium writes screenshots (8-bit RGB or RGBA, not interlaced):
// chunks, one zlib stream of filtered scanlines.
bool decode_png(const std::string &png, Image &img, std::string &error) {
  if (png.size() < 33 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    error = "not a PNG";
    return false;
  }
  std::string idat;
  unsigned channels = 0;
  for (size_t at = 8; at + 12 <= png.size();) {
    uint32_t len = be32(png, at);
    std::string type = png.substr(at + 4, 4);
    if (at + 12 + len > png.size()) {
      error = "a chunk overruns the file";
      return false;
    }
    if (type == "IHDR") {
      img.width = be32(png, at + 8);
      img.height = be32(png, at + 12);
      unsigned depth = static_cast<unsigned char>(png[at + 16]);
      unsigned colour = static_cast<unsigned char>(png[at + 17]);
      unsigned interlace = static_cast<unsigned char>(png[at + 20]);
      channels = colour == 6 ? 4 : colour == 2 ? 3 : 0;
      if (depth != 8 || !channels || interlace) {
        error = "unexpected PNG format";
        return false;
      }
    } else if (type == "IDAT") {
      idat += png.substr(at + 8, len);
    }
    at += 12 + len;
  }
  const size_t stride = size_t{img.width} * channels;
  llvm::SmallVector<char, 0> raw;
  if (llvm::Error e = llvm::zlib::uncompress(idat, raw, (stride + 1) * img.height)) {
    error = llvm::toString(std::move(e));
    return false;
  }
  if (raw.size() != (stride + 1) * img.height) {
    error = "short image data";
    return false;
  }
  std::vector<uint8_t> prev(stride), cur(stride);
  img.rgb.resize(size_t{img.width} * img.height * 3);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t *line = reinterpret_cast<const uint8_t *>(raw.data()) + y * (stride + 1);
    uint8_t filter = line[0];
    for (size_t x = 0; x < stride; ++x) {
      int a = x >= channels ? cur[x - channels] : 0, b = prev[x],
          c = x >= channels ? prev[x - channels] : 0;
      int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      int pred = filter == 1   ? a
                 : filter == 2 ? b
                 : filter == 3 ? (a + b) / 2
                 : filter == 4 ? (pa <= pb && pa <= pc ? a
                                  : pb <= pc           ? b
                                                       : c)
                               : 0;
      cur[x] = static_cast<uint8_t>(line[1 + x] + pred);
    }
    for (uint32_t x = 0; x < img.width; ++x)
      for (unsigned k = 0; k < 3; ++k)
        img.rgb[(size_t{y} * img.width + x) * 3 + k] = cur[x * channels + k];
    std::swap(prev, cur);
  }
  return true;
}

} // namespace

TEST_CASE("report_html.renders_in_chromium", "[report][html]") {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    WARN("chromium is not installed (scripts/setup.sh installs it): the page was not rendered");
    return;
  }
  // The bundled demo's workload, smaller: int-lf's nodes and descriptors.
  std::string dir = work_dir("report_html_chromium");
  std::string trace = dir + "/int-lf.trace";
  RunResult rec = record({"-o", trace, "--allocator", "jemalloc"},
                         {MLT_BENCH, "--tree", "int-lf", "--threads", "1", "--duration", "0",
                          "--key-range", "60000", "--prefill", "30000"});
  REQUIRE(rec.exit_code() == 0);
  RunResult r = run({memlayout_bin(), "report", trace, "--format", "html", "-o", dir + "/html"});
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  const std::string shot = dir + "/page.png";
  RunOptions o;
  o.timeout_s = 90;
  RunResult c =
      run({chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--user-data-dir=" + dir + "/profile", "--hide-scrollbars",
           "--window-size=1200,7000", "--screenshot=" + shot, "file://" + dir + "/html/index.html"},
          o);
  INFO("chromium: " << c.describe() << "\n" << c.err);
  REQUIRE(file_exists(shot));
  Image img;
  std::string error;
  INFO(error);
  REQUIRE(decode_png(read_file(shot), img, error));
  CHECK(img.width == 1200);
  CHECK(img.height == 7000);
  // Ink: pixels that are not the white page.
  size_t ink = 0, heat = 0, severity = 0;
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    int rr = img.rgb[i], g = img.rgb[i + 1], b = img.rgb[i + 2];
    ink += rr + g + b < 600;
    // The co-location cells' darkest red (#8e1c1c): only the plot has it.
    heat += std::abs(rr - 0x8e) < 12 && std::abs(g - 0x1c) < 12 && std::abs(b - 0x1c) < 12;
    // The high-severity border of a finding (#c0392b), drawn by the style sheet.
    severity += std::abs(rr - 0xc0) < 8 && std::abs(g - 0x39) < 8 && std::abs(b - 0x2b) < 8;
  }
  const size_t pixels = img.rgb.size() / 3;
  CHECK(ink * 100 > pixels); // text, tables and plots: over 1% of the page
  CHECK(heat > 200);         // the SVG heat map was drawn, interleaved cells dark
  CHECK(severity > 200);     // styled findings
}
