#include "render.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace memlayout::cli {

int write_report(const inspector::Report &r, const std::string &format, const std::string &output,
                 TextOptions text, const char *command) {
  std::ofstream file;
  std::ostream *out = &std::cout;
  if (!output.empty()) {
    file.open(output);
    if (!file) {
      std::fprintf(stderr, "memlayout %s: cannot write '%s': %s\n", command, output.c_str(),
                   std::strerror(errno));
      return 2;
    }
    out = &file;
  }
  text.color = output.empty() && isatty(1);
  if (format == "json")
    render_json(r, *out);
  else
    render_text(r, *out, text);
  out->flush();
  if (!*out) {
    std::fprintf(stderr, "memlayout %s: write error\n", command);
    return 2;
  }
  return report_exit_status(r, command);
}

int report_exit_status(const inspector::Report &r, const char *command) {
  for (const std::string &w : r.reader_warnings)
    std::fprintf(stderr, "memlayout %s: warning: %s\n", command, w.c_str());
  for (const std::string &w : r.symbol_warnings)
    std::fprintf(stderr, "memlayout %s: warning: %s\n", command, w.c_str());
  if (!r.damage.empty()) {
    std::fprintf(
        stderr,
        "memlayout %s: the trace is damaged: %s; what it reports comes from the records before\n",
        command, r.damage.c_str());
    return 2;
  }
  if (r.partial && !r.cut_short.empty())
    std::fprintf(stderr,
                 "memlayout %s: warning: the trace is incomplete: %s; what it reports comes "
                 "from what was written\n",
                 command, r.cut_short.c_str());
  return r.partial ? 1 : 0;
}

} // namespace memlayout::cli
