// Reading a report back from its JSON form (schema memlayout.report/1), the
// inverse of `memlayout report --format json`, so that saved reports can be
// compared (`memlayout diff`) without the traces they came from.
#pragma once

#include "report.h"

#include <string>

namespace memlayout::inspector {

// Fields the JSON does not carry (object indices, lines_counted, regions_min,
// lines_total) are left at their defaults; groups_total is the number of
// groups listed. Returns false with `error` set ("NAME: groups[2]: 'objects'
// missing or not a number") on anything that is not a memlayout.report/1
// object; `name` is what errors call the text (its file).
bool parse_report_json(const std::string &text, const std::string &name, Report &out,
                       std::string &error);

// The same on a file's contents; a file that cannot be read is an error too.
bool read_report_json(const std::string &path, Report &out, std::string &error);

} // namespace memlayout::inspector
