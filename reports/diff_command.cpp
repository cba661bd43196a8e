// memlayout diff: what a layout fix changed, from two traces or saved
// reports (before, after).
#include "analysis_options.h"
#include "commands.h"
#include "render_diff.h"
#include "report_builder.h"
#include "report_diff.h"
#include "report_input.h"
#include "report_json.h"
#include "trace_format.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <unistd.h>

namespace memlayout::cli {
namespace {

constexpr const char *kUsage =
    "usage: memlayout diff A B [options]\n"
    "\n"
    "Compares two layouts, typically before and after a fix: per allocation group\n"
    "(matched by name, else call site and size class) the change of each layout\n"
    "metric, groups only on one side, and findings resolved, new or kept.\n"
    "A and B are each a trace (memlayout record) or a report saved with\n"
    "'memlayout report --format json'.\n"
    "\n"
    "options:\n"
    "  --format text|json     output format (default text; json: memlayout.diff/1)\n"
    "  -o, --output OUT       write to OUT instead of stdout\n"
    "  --at peak|end|mark:NAME  the moment analysed in traces (default peak)\n"
    "  --hot NAME=BYTES       as for 'memlayout report', applied to traces; repeatable\n"
    "  --cache FILE           cache geometry for traces from FILE instead of this machine's\n"
    "  --wrapper NAME         a function to look through as an allocation wrapper\n"
    "  --not-wrapper NAME     a function never to look through, even if detected\n"
    "  --rows N               metric rows listed in text (default 25)\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 compared, 1 compared but a trace was truncated, 2 error.\n";

int usage_error(const std::string &message) {
  std::fprintf(stderr, "memlayout diff: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

} // namespace

int diff_main(int argc, char **argv) {
  std::string format = "text", output;
  std::vector<std::string> inputs;
  inspector::ReportOptions o;
  DiffTextOptions text;
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
      return 0;
    } else if (a == "--format") {
      const char *v = value();
      if (!v || (std::strcmp(v, "text") && std::strcmp(v, "json")))
        return usage_error(std::string("--format takes text or json, not '") + (v ? v : "") + "'");
      format = v;
    } else if (a == "-o" || a == "--output") {
      const char *v = value();
      if (!v || !*v)
        return usage_error(a + " needs a path");
      output = v;
    } else if (a == "--rows") {
      const char *v = value();
      char *end = nullptr;
      long n = v ? std::strtol(v, &end, 10) : 0;
      if (!v || *end || n < 1)
        return usage_error(std::string("--rows takes a positive number, not '") + (v ? v : "") +
                           "'");
      text.rows = static_cast<size_t>(n);
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return usage_error("unknown option '" + a + "'");
    } else {
      inputs.push_back(a);
    }
  }
  if (inputs.size() != 2)
    return usage_error("two inputs needed (A and B), got " + std::to_string(inputs.size()));
  o.progress = isatty(2);

  inspector::Report a, b;
  DiffSources sources{inputs[0], inputs[1], "", ""};
  std::string error;
  if (!load_report_input(inputs[0], o, a, sources.a_kind, error) ||
      !load_report_input(inputs[1], o, b, sources.b_kind, error)) {
    std::fprintf(stderr, "memlayout diff: %s\n", error.c_str());
    return 2;
  }
  inspector::ReportDiff d = inspector::diff_reports(a, b);

  std::ofstream file;
  std::ostream *out = &std::cout;
  if (!output.empty()) {
    file.open(output);
    if (!file) {
      std::fprintf(stderr, "memlayout diff: cannot write '%s': %s\n", output.c_str(),
                   std::strerror(errno));
      return 2;
    }
    out = &file;
  }
  text.color = output.empty() && isatty(1);
  if (format == "json")
    render_diff_json(d, sources, *out);
  else
    render_diff_text(d, sources, *out, text);
  out->flush();
  if (!*out) {
    std::fprintf(stderr, "memlayout diff: write error\n");
    return 2;
  }
  return a.partial || b.partial ? 1 : 0;
}

} // namespace memlayout::cli
