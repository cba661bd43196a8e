// Renderers of a report diff: a table for the terminal and memlayout.diff/1
// JSON (docs/diff.md). Like render.h's, they only format.
#pragma once

#include "report_diff.h"

#include <ostream>
#include <string>

namespace memlayout::cli {

// What each side was read from, for the header ("trace" or "report").
struct DiffSources {
  std::string a, b;           // paths as given
  std::string a_kind, b_kind; // "trace" or "report"
};

struct DiffTextOptions {
  size_t rows = 25;   // metric rows listed, biggest change first
  bool color = false; // ANSI colours (a tty): green better, red worse
};

void render_diff_text(const inspector::ReportDiff &d, const DiffSources &s, std::ostream &out,
                      const DiffTextOptions &o);
void render_diff_json(const inspector::ReportDiff &d, const DiffSources &s, std::ostream &out);

} // namespace memlayout::cli
