// Running gnuplot on the scripts the HTML report writes. gnuplot is an
// optional run-time dependency: without it the report still renders, with a
// note instead of plots.
#pragma once

#include <string>

namespace memlayout::cli {

// The gnuplot executable on PATH; "" when there is none.
std::string find_gnuplot();

// Runs `gnuplot SCRIPT` in `dir` (so that the script names its data and output
// files relatively). False with `error` naming the script and quoting
// gnuplot's complaint when it fails.
bool run_gnuplot(const std::string &gnuplot, const std::string &dir, const std::string &script,
                 std::string &error);

} // namespace memlayout::cli
