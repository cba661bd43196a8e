// A report from what the user has: a trace (analysed now) or a report saved
// with `memlayout report --format json`, told apart by content.
#pragma once

#include "report.h"
#include "report_builder.h"

#include <string>

namespace memlayout::cli {

enum class InputKind { kTrace, kReport, kUnknown };

// By content, not by name: a trace may be called anything. kUnknown with
// error set.
InputKind sniff_input(const std::string &path, std::string &error);

// kind is set to "trace" or "report". False with error on failure.
bool load_report_input(const std::string &path, const inspector::ReportOptions &o,
                       inspector::Report &out, std::string &kind, std::string &error);

} // namespace memlayout::cli
