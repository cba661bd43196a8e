// Renderers of a layout report. Each writes one format; none computes.
#pragma once

#include "report.h"

#include <ostream>
#include <string>

namespace memlayout::cli {

void render_json(const inspector::Report &r, std::ostream &out);

struct TextOptions {
  size_t top = 15;    // groups listed
  bool color = false; // ANSI colours (a tty)
};
void render_text(const inspector::Report &r, std::ostream &out, const TextOptions &o);

} // namespace memlayout::cli
