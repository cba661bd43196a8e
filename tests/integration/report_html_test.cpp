// `memlayout report --format html`: the page names the int-lf case and its
// fix, every figure it shows exists as an SVG, text is escaped, and without
// gnuplot (or with a broken one) the report says so instead of failing
// silently.
#include "support.h"

#include <catch2/catch.hpp>

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
