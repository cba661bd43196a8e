// Reading `memlayout report --format json` in the integration tests: the run,
// a group by its site's function, its L1 set fraction.
#pragma once

#include "support.h"

#include <catch2/catch.hpp>
#include <llvm/Support/JSON.h>

#include <string>
#include <vector>

namespace mlt {

// Runs argv (a memlayout command printing JSON) and parses its stdout; the
// command must succeed.
inline llvm::json::Value json_of(const std::vector<std::string> &argv) {
  RunResult r = run(argv);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code() == 0);
  auto parsed = llvm::json::parse(r.out);
  REQUIRE(static_cast<bool>(parsed));
  return std::move(*parsed);
}

// The first group whose site is function `fn` (as the report writes it), or
// nullptr.
inline const llvm::json::Object *group_by_site(const llvm::json::Object &report,
                                               const std::string &fn) {
  for (const auto &g : *report.getArray("groups")) {
    const auto *o = g.getAsObject();
    if (o->getObject("site")->getString("function").getValueOr("") == fn)
      return o;
  }
  return nullptr;
}

// The first group named `name` (a pool, a tag, a type or a site), or nullptr.
inline const llvm::json::Object *group_by_name(const llvm::json::Object &report,
                                               const std::string &name) {
  for (const auto &g : *report.getArray("groups"))
    if (g.getAsObject()->getString("name").getValueOr("") == name)
      return g.getAsObject();
  return nullptr;
}

inline double l1_fraction(const llvm::json::Object &group) {
  return group.getObject("set_effective_fraction")->getNumber("L1").getValueOr(-1);
}

} // namespace mlt
