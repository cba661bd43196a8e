#include "render.h"

#include "command_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace memlayout::cli {

std::vector<std::string> with_files_read(std::vector<std::string> inputs,
                                         const inspector::Report &r) {
  for (const std::string *read : {&r.type_map, &r.cache_file, &r.executable})
    if (!read->empty())
      inputs.push_back(*read);
  return inputs;
}

int write_report(const inspector::Report &r, const std::string &format, const std::string &output,
                 TextOptions text, const char *command, const std::vector<std::string> &inputs) {
  CommandOutput out(command);
  if (!out.open(output, with_files_read(inputs, r)))
    return 2;
  text.color = out.is_terminal();
  if (format == "json")
    render_json(r, out.stream());
  else
    render_text(r, out.stream(), text);
  if (!out.close())
    return 2;
  return report_exit_status(r, command);
}

int report_exit_status(const inspector::Report &r, const char *command) {
  for (const std::string &w : r.reader_warnings)
    std::fprintf(stderr, "memlayout %s: warning: %s\n", command, w.c_str());
  for (const std::string &w : r.symbol_warnings)
    std::fprintf(stderr, "memlayout %s: warning: %s\n", command, w.c_str());
  for (const std::string &w : r.option_warnings)
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
