// The recorder's options table and the trace names it derives: the names are
// a contract (docs/recording.md) that `memlayout record` and users rely on.
#include "options.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <unistd.h>

using memlayout::preload::AllocatorMode;
using memlayout::preload::load_options;
using memlayout::preload::Options;
using memlayout::preload::trace_path_for;
using memlayout::preload::UnwindMethod;

namespace {

std::string path_for(const char *output, uint32_t root_pid, uint32_t pid, uint32_t exec_gen = 0) {
  Options o{};
  if (output)
    std::snprintf(o.output, sizeof o.output, "%s", output);
  o.root_pid = root_pid;
  o.exec_generation = exec_gen;
  char buf[4096];
  REQUIRE(trace_path_for(o, pid, buf, sizeof buf));
  return buf;
}

struct Env {
  explicit Env(std::initializer_list<std::pair<const char *, const char *>> vars) {
    for (auto &[k, v] : vars) {
      setenv(k, v, 1);
      names.push_back(k);
    }
  }
  ~Env() {
    for (auto *k : names)
      unsetenv(k);
  }
  std::vector<const char *> names;
};

} // namespace

TEST_CASE("options: trace names of the root, forked children and exec'd images", "[options]") {
  CHECK(path_for("/t/run.trace", 100, 100) == "/t/run.trace");
  CHECK(path_for("/t/run.trace", 100, 4242) == "/t/run.4242.trace");
  CHECK(path_for("/t/run.trace", 100, 100, 1) == "/t/run.100.1.trace");
  CHECK(path_for("/t/run.trace", 100, 4242, 2) == "/t/run.4242.2.trace");
  // No extension in the last component: the pid goes at the end.
  CHECK(path_for("/t.d/run", 100, 7) == "/t.d/run.7");
  CHECK(path_for("/t/.hidden", 100, 7) == "/t/.hidden.7");
  // Root unknown (preloaded by hand): this process is the root.
  CHECK(path_for("out.trace", 0, 55) == "out.trace");
}

TEST_CASE("options: a name that does not fit is refused", "[options]") {
  Options o{};
  std::snprintf(o.output, sizeof o.output, "/tmp/a-rather-long-name.trace");
  o.root_pid = 1;
  char small[16];
  CHECK_FALSE(trace_path_for(o, 2, small, sizeof small));
}

TEST_CASE("options: defaults and the environment", "[options]") {
  Options o;
  load_options(&o);
  CHECK(o.allocator == AllocatorMode::kNative);
  CHECK(o.unwind == UnwindMethod::kCfi);
  CHECK(o.stack_depth == 8);
  CHECK(o.tick_period == 1);
  CHECK(o.tick_period_max == 128); // adaptive between the two
  CHECK(o.page_frames);
  {
    // A period set by hand is kept fixed.
    Env e{{"MEMLAYOUT_TICK_PERIOD", "4"}};
    load_options(&o);
    CHECK(o.tick_period == 4);
    CHECK(o.tick_period_max == 4);
  }
  {
    Env e{{"MEMLAYOUT_ALLOCATOR", "jemalloc"}, {"MEMLAYOUT_UNWIND", "fp"},
          {"MEMLAYOUT_STACK_DEPTH", "3"},      {"MEMLAYOUT_PAGEMAP", "0"},
          {"MEMLAYOUT_OUTPUT", "/x/y.trace"},  {"MEMLAYOUT_FOLLOW_CHILDREN", "1"}};
    load_options(&o);
    CHECK(o.allocator == AllocatorMode::kJemalloc);
    CHECK(o.unwind == UnwindMethod::kFramePointer);
    CHECK(o.stack_depth == 3);
    CHECK_FALSE(o.page_frames);
    CHECK(o.follow_children);
    CHECK(std::string(o.output) == "/x/y.trace");
  }
  {
    // Bad values keep the defaults (and warn on stderr): never fatal.
    Env e{{"MEMLAYOUT_STACK_DEPTH", "0"},
          {"MEMLAYOUT_TICK_PERIOD", "lots"},
          {"MEMLAYOUT_UNWIND", "magic"},
          {"MEMLAYOUT_ALLOCATOR", "tcmalloc"}};
    load_options(&o);
    CHECK(o.stack_depth == 8);
    CHECK(o.tick_period == 1);
    CHECK(o.tick_period_max == 128);
    CHECK(o.unwind == UnwindMethod::kCfi);
    CHECK(o.allocator == AllocatorMode::kNative);
  }
}

TEST_CASE("options: an exec generation counts only in the process it names", "[options]") {
  Options o;
  std::string mine = std::to_string(getpid()) + ":3";
  {
    Env e{{"MEMLAYOUT_EXEC_GEN", mine.c_str()}};
    load_options(&o);
    CHECK(o.exec_generation == 3);
  }
  {
    Env e{{"MEMLAYOUT_EXEC_GEN", "1:3"}}; // inherited by a spawned process
    load_options(&o);
    CHECK(o.exec_generation == 0);
  }
}
