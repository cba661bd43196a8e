// Renderers of `memlayout structs`: pahole-style text with the allocators'
// columns added, and the JSON type map (schema memlayout.structs/1).
#pragma once

#include "structs_report.h"

#include <ostream>
#include <string>

namespace memlayout::cli {

void render_structs_json(const inspector::StructsReport &r, std::ostream &out);

struct StructsTextOptions {
  std::string relative_to; // paths under this directory are shown relative to it
};
void render_structs_text(const inspector::StructsReport &r, std::ostream &out,
                         const StructsTextOptions &o);

} // namespace memlayout::cli
