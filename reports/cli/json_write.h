// The one way memlayout writes JSON (reports, diffs, comparisons, structs; the
// trees' harness too): nlohmann's ordered_json, keys in the order written,
// strings that are not UTF-8 (paths are bytes) written with U+FFFD, NaN and
// infinities as null.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>

namespace memlayout::cli {

using Json = nlohmann::ordered_json;

// A number, or null where there is none ("not computable").
inline Json optional_number(const std::optional<double> &v) { return v ? Json(*v) : Json(); }

inline void write_json(const Json &j, std::ostream &out) {
  out << j.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

// The benchmarks' results: one object on one line, so that a run's output is
// a JSON Lines stream (`jq`, or the last line of a log).
inline void write_json_line(const Json &j, std::ostream &out) {
  out << j.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
}

} // namespace memlayout::cli
