#include "report_input.h"

#include "report_json.h"
#include "trace_format.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace memlayout::cli {

InputKind sniff_input(const std::string &path, std::string &error) {
  // Before opening: opening a FIFO waits for a writer, and a report needs a
  // file it can read twice anyway.
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    return InputKind::kUnknown;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot read: " + std::strerror(errno);
    return InputKind::kUnknown;
  }
  char head[sizeof trace::kFileMagic] = {};
  in.read(head, sizeof head);
  if (in.gcount() == sizeof head && !std::memcmp(head, trace::kFileMagic, sizeof head))
    return InputKind::kTrace;
  for (std::streamsize i = 0; i < in.gcount(); ++i) {
    if (head[i] == '{')
      return InputKind::kReport;
    if (!std::strchr(" \t\r\n", head[i]))
      break;
  }
  error = path + ": neither a memlayout trace nor a memlayout.report/1 JSON report";
  return InputKind::kUnknown;
}

bool load_report_input(const std::string &path, const inspector::ReportOptions &o,
                       inspector::Report &out, std::string &kind, std::string &error) {
  switch (sniff_input(path, error)) {
  case InputKind::kTrace:
    kind = "trace";
    if (!inspector::build_report(path, o, out, error))
      return false;
    return true;
  case InputKind::kReport:
    kind = "report";
    return inspector::read_report_json(path, out, error);
  case InputKind::kUnknown:
    break;
  }
  return false;
}

} // namespace memlayout::cli
