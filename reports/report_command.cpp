// memlayout report: where each allocation group landed, what is wrong with
// it and what to change.
#include "analysis_options.h"
#include "commands.h"
#include "gnuplot.h"
#include "render.h"
#include "report_builder.h"

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

constexpr const char *kUsage =
    "usage: memlayout report FILE [options]\n"
    "\n"
    "Maps each allocation group (call site and size class) of a trace to cache\n"
    "lines, cache sets and pages, and reports what is wrong with the layout and\n"
    "what to change.\n"
    "\n"
    "options:\n"
    "  --format text|json|html  output format (default text); html writes\n"
    "                         OUT/index.html and its plots (gnuplot) into the\n"
    "                         directory OUT, which -o must name\n"
    "  -o, --output OUT       write to OUT instead of stdout\n"
    "  --top N                groups listed in text (default 15)\n";
constexpr const char *kHelpOption = "  -h, --help             this text\n";

int usage_error(const std::string &message) {
  std::fprintf(stderr, "memlayout report: %s\n\n%s%s%s", message.c_str(), kUsage,
               kAnalysisOptionsHelp, kHelpOption);
  return 2;
}

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
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string option_error;
    OptionParse taken = parse_analysis_option(argc, argv, i, o, option_error);
    if (taken == OptionParse::kError)
      return usage_error(option_error);
    if (taken == OptionParse::kTaken)
      continue;
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(kAnalysisOptionsHelp, stdout);
      std::fputs(kHelpOption, stdout);
      return 0;
    } else if (a == "--format") {
      const char *v = value();
      if (!v || (std::strcmp(v, "text") && std::strcmp(v, "json") && std::strcmp(v, "html")))
        return usage_error(std::string("--format takes text, json or html, not '") + (v ? v : "") +
                           "'");
      format = v;
    } else if (a == "-o" || a == "--output") {
      const char *v = value();
      if (!v || !*v)
        return usage_error(a + " needs a path");
      output = v;
    } else if (a == "--top") {
      const char *v = value();
      char *end = nullptr;
      long n = v ? std::strtol(v, &end, 10) : 0;
      if (!v || *end || n < 1)
        return usage_error(std::string("--top takes a positive number, not '") + (v ? v : "") +
                           "'");
      text.top = static_cast<size_t>(n);
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option '" + a + "'");
    } else if (trace.empty()) {
      trace = a;
    } else {
      return usage_error("one trace at a time ('" + trace + "', then '" + a + "')");
    }
  }
  if (trace.empty())
    return usage_error("no trace given");
  if (format == "html") {
    if (output.empty())
      return usage_error("--format html needs -o DIR: the page and its plots are several files");
    // Before the analysis, so that a bad directory costs no time.
    std::string dir_error;
    if (!prepare_directory(output, dir_error)) {
      std::fprintf(stderr, "memlayout report: %s\n", dir_error.c_str());
      return 2;
    }
    o.plots.enabled = true;
  }
  o.progress = isatty(2);
  inspector::Report report;
  std::string error;
  if (!inspector::build_report(trace, o, report, error)) {
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
    return report.partial ? 1 : 0;
  }
  return write_report(report, format, output, text, "report");
}

} // namespace memlayout::cli
