// memlayout diff: what a layout fix changed, from two traces or saved
// reports (before, after).
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "render.h"
#include "render_diff.h"
#include "report_builder.h"
#include "report_diff.h"
#include "report_input.h"
#include "report_json.h"
#include "trace_format.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <unistd.h>

namespace memlayout::cli {
int diff_main(int argc, char **argv) {
  std::string format, output;
  std::vector<std::string> inputs;
  inspector::ReportOptions o;
  DiffTextOptions text;
  auto app = make_command(
      "diff", "Compares two layouts, typically before and after a fix: per allocation group\n"
              "(matched by name, else site and size class) the change of each layout metric,\n"
              "groups only on one side, findings resolved, new or kept, and what the rules of a\n"
              "side recorded under rules routed. A and B are each a trace (memlayout record) or\n"
              "a report saved with 'memlayout report --format json'.\n\n"
              "Exit status: 0 compared, 1 compared but a trace was truncated, 2 error.");
  inputs.resize(2);
  app->add_option("A", inputs[0], "the layout before")->required();
  app->add_option("B", inputs[1], "the layout after")->required();
  add_format_option(*app, format, {"text", "json"}, "output format (json: memlayout.diff/1)");
  add_output_option(*app, output);
  add_count_option(*app, "--rows", text.rows, "metric rows listed in text");
  add_analysis_options(*app, o);
  if (int rc = parse_command(*app, argc, argv); rc >= 0)
    return rc;
  if (output_is_an_input(output, {inputs[0], inputs[1], o.types_file, o.cache_file}, "diff"))
    return 2;
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

  CommandOutput out("diff");
  if (!out.open(output, with_files_read(with_files_read({inputs[0], inputs[1]}, a), b)))
    return 2;
  text.color = out.is_terminal();
  if (format == "json")
    render_diff_json(d, sources, out.stream());
  else
    render_diff_text(d, sources, out.stream(), text);
  if (!out.close())
    return 2;
  int status_a = report_exit_status(a, "diff"), status_b = report_exit_status(b, "diff");
  return std::max(status_a, status_b);
}

} // namespace memlayout::cli
