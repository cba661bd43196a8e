// The options that choose what a trace's analysis looks at, shared by the
// commands that analyse traces (report, diff).
#pragma once

#include "report_builder.h"

#include <string>

namespace memlayout::cli {

enum class OptionParse { kNotOurs, kTaken, kError };

// Takes argv[i] (and its value, advancing i) when it is --at, --hot, --cache,
// --wrapper or --types. kError leaves the message in `error`.
OptionParse parse_analysis_option(int argc, char **argv, int &i, inspector::ReportOptions &o,
                                  std::string &error);

// For the commands' --help.
inline constexpr const char *kAnalysisOptionsHelp =
    "  --at peak|end|mark:NAME  the moment analysed (default peak: most live bytes)\n"
    "  --hot NAME=BYTES       only the first BYTES of NAME's objects are hot (NAME:\n"
    "                         a group's type, pool, tag or function); repeatable\n"
    "  --hot TYPE=FIELD       hot through FIELD of the record TYPE (type map)\n"
    "  --types MAP|none       name groups by the type their call site allocates,\n"
    "                         from `memlayout structs --format json` (default:\n"
    "                         EXECUTABLE.memlayout-types.json when it exists)\n"
    "  --cache FILE           cache geometry from FILE instead of this machine's\n"
    "  --wrapper NAME         a function to look through as an allocation wrapper\n"
    "  --not-wrapper NAME     a function never to look through, even if detected\n";

} // namespace memlayout::cli
