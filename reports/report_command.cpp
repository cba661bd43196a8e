// memlayout report: where each allocation group landed, what is wrong with
// it and what to change.
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "gnuplot.h"
#include "render.h"
#include "report_builder.h"
#include "report_input.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <unistd.h>

namespace memlayout::cli {
namespace {

// The HTML report's directory: created when missing, and it must take files.
bool prepare_directory(const std::string &dir, std::string &error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    error = "cannot create directory '" + dir + "': " + ec.message();
    return false;
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    error = "'" + dir + "' is not a directory (--format html writes a directory)";
    return false;
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    error = "cannot write into directory '" + dir + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

} // namespace

int report_main(int argc, char **argv) {
  std::string trace, format = "text", output;
  inspector::ReportOptions o;
  TextOptions text;
  auto app = make_command(
      "report", "Maps each allocation group (allocation site and size class) of a trace to cache\n"
                "lines, cache sets and pages, and reports what is wrong with the layout and\n"
                "what to change (docs/report.md).");
  app->add_option("FILE", trace, "the trace (memlayout record)")->required();
  add_format_option(*app, format, {"text", "json", "html"},
                    "output format; html writes OUT/index.html and its plots (gnuplot) into the "
                    "directory OUT, which -o must name");
  add_output_option(*app, output);
  add_count_option(*app, "--top", text.top, "groups listed in text");
  add_analysis_options(*app, o);
  if (int rc = parse_command(*app, argc, argv); rc >= 0)
    return rc;
  if (format == "html") {
    if (output.empty())
      return usage_error(*app,
                         "--format html needs -o DIR: the page and its plots are several files");
    // Before the analysis, so that a bad directory costs no time.
    std::string dir_error;
    if (!prepare_directory(output, dir_error)) {
      std::fprintf(stderr, "memlayout report: %s\n", dir_error.c_str());
      return 2;
    }
    o.plots.enabled = true;
  }
  if (format != "html" && output_is_an_input(output, {trace, o.types_file, o.cache_file}, "report"))
    return 2;
  o.progress = isatty(2);
  inspector::Report report;
  std::string error;
  if (!inspector::build_report(trace, o, report, error)) {
    std::string ignored;
    if (sniff_input(trace, ignored) == InputKind::kReport)
      error = trace + " is a report (JSON), not a trace: report reads what `memlayout record` "
                      "wrote; `diff` and `advise` take reports too";
    std::fprintf(stderr, "memlayout report: %s\n", error.c_str());
    return 2;
  }
  if (format == "html") {
    HtmlOptions html;
    html.dir = output;
    html.gnuplot = find_gnuplot();
    if (!render_html(report, html, error)) {
      std::fprintf(stderr, "memlayout report: %s\n", error.c_str());
      return 2;
    }
    return report_exit_status(report, "report");
  }
  return write_report(report, format, output, text, "report", {trace});
}

} // namespace memlayout::cli
