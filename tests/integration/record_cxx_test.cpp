// Recording a C++ program: every form of operator new and delete (plain,
// array, nothrow, aligned, sized), containers, threads, exceptions and
// failing allocations.
#include "support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

using namespace mlt;

// every operator new/delete form is recorded with its api, size and call site
TEST_CASE("cxx.operators", "[record][cxx]") {
  const std::string mode = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(mode);
  std::string dir = work_dir("cxx_alloc_" + mode);
  std::string log_path = dir + "/program.log", trace = dir + "/out.trace";
  RunResult direct = run({program("cxx_alloc"), log_path});
  REQUIRE(direct.exit_code() == 0);
  REQUIRE(direct.out.rfind("sum=", 0) == 0);
  RunResult recorded = record({"-o", trace, "--allocator", mode}, {program("cxx_alloc"), log_path});
  INFO("memlayout record stderr:\n" << recorded.err);
  // bad_alloc caught, nothrow nullptr, exceptions: all behave as without us.
  CHECK(behaviour_difference(direct, recorded) == "");

  Dump d = dump(trace);
  INFO("memlayout dump stderr:\n" << d.run.err);
  REQUIRE(d.run.exit_code() == 0);
  REQUIRE(d.error == "");
  ProgramLog log = read_log(log_path);
  REQUIRE_FALSE(log.dropped);
  REQUIRE(log.count('A') > 300);

  // Each operator's own api name, sizes including array cookies, alignment.
  std::vector<std::string> missing = missing_from_dump(log, d);
  INFO(missing.size() << " of " << log.entries.size() << " logged events not found:\n"
                      << join(missing, 30));
  CHECK(missing.empty());

  // Every api the program used appears; aligned ones carry their alignment.
  std::set<std::string> apis;
  for (const Event &e : d.events)
    apis.insert(e.api);
  for (const char *api :
       {"new", "new[]", "new(nothrow)", "new[](nothrow)", "new(align)", "new[](align)",
        "new(align,nothrow)", "new[](align,nothrow)", "delete[]", "delete(sized)",
        "delete[](sized)", "delete(sized,align)", "delete[](align)", "delete[](sized,align)"}) {
    CAPTURE(api);
    CHECK(apis.count(api) == 1);
  }
  for (const Event &e : d.events)
    if (e.ev == "alloc" && e.api.find("align") != std::string::npos) {
      CAPTURE(e.line, e.api);
      CHECK(e.align >= 32);
      CHECK(e.ptr % e.align == 0);
    }

  // The std::thread workers' allocations carry their own tids.
  std::set<uint64_t> thread_tids;
  for (const LogEntry &e : log.entries)
    if (e.kind == 'T' && e.role == "std::thread")
      thread_tids.insert(e.tid);
  REQUIRE(thread_tids.size() == 3);
  for (uint64_t tid : thread_tids) {
    size_t nodes =
        static_cast<size_t>(std::count_if(d.events.begin(), d.events.end(), [&](const Event &e) {
          return e.ev == "alloc" && e.tid == tid && same_function(e.innermost(), "mlx_make_node");
        }));
    CAPTURE(tid);
    CHECK(nodes == 400);
  }

  std::vector<std::string> errors = lifetime_errors(d);
  INFO(join(errors));
  CHECK(errors.empty());
  CHECK(d.end_int("exit_status") == 0);
  CHECK(d.end_int("lost_events") == 0);
}
