// Renderers of a layout report. Each writes one format; none computes.
#pragma once

#include "report.h"

#include <ostream>
#include <string>
#include <vector>

namespace memlayout::cli {

void render_json(const inspector::Report &r, std::ostream &out);

struct TextOptions {
  size_t top = 15;    // groups listed
  bool color = false; // ANSI colours (a tty)
};
void render_text(const inspector::Report &r, std::ostream &out, const TextOptions &o);

struct HtmlOptions {
  std::string dir;     // exists and is writable; gets index.html and the figures
  std::string gnuplot; // its path; "" when there is none: a note instead of plots
  size_t top = 50;     // groups in the table
};
// Writes DIR/index.html and, with gnuplot, one SVG per figure beside it
// (Report::plots; none without it). False with `error` set when a file
// cannot be written or gnuplot fails on a script (the page is still written
// with the figures that worked).
bool render_html(const inspector::Report &r, const HtmlOptions &o, std::string &error);

// The exit status of a command that wrote report `r`: 0; 1 for a trace cut
// short (the report covers what was written); 2 for a damaged one, said on
// stderr as well (trace-format.md: a reader stops at damage with status 2).
int report_exit_status(const inspector::Report &r, const char *command);

// Writes a report as text or JSON to `output` (stdout when empty; colour on
// a terminal) and returns the command's exit status: report_exit_status, or
// 2 when it cannot be written or `output` is one of `inputs`
// (CommandOutput).
int write_report(const inspector::Report &r, const std::string &format, const std::string &output,
                 TextOptions text, const char *command, const std::vector<std::string> &inputs);

} // namespace memlayout::cli
