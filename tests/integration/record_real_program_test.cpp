// Real programs from Debian recorded: sqlite3 and the python3 interpreter.
// Their output must be byte-identical to an unrecorded run, their exit status
// the same, and the trace complete.
#include "support.h"

#include <catch2/catch.hpp>

#include <unistd.h>

using namespace mlt;

namespace {

// 20k inserts in one transaction, an index, queries with deterministic output.
std::string sqlite_script() {
  std::string s = "PRAGMA journal_mode=MEMORY;\n"
                  "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, price REAL);\n"
                  "BEGIN;\n";
  for (int i = 0; i < 20000; ++i)
    s += "INSERT INTO item(name, grp, price) VALUES('item-" + std::to_string(i * 7919 % 20000) +
         "', " + std::to_string(i % 37) + ", " + std::to_string(i % 1000) + ".25);\n";
  s += "COMMIT;\n"
       "CREATE INDEX item_grp ON item(grp, price);\n"
       "SELECT count(*), sum(price), min(name), max(name) FROM item;\n"
       "SELECT grp, count(*), printf('%.2f', avg(price)) FROM item WHERE grp < 5 GROUP BY grp "
       "ORDER BY grp;\n"
       "SELECT name FROM item WHERE grp = 3 ORDER BY price DESC, name LIMIT 5;\n";
  return s;
}

void check_real_program(const std::string &name, const std::vector<std::string> &argv,
                        const std::string &mode, const RunOptions &opts_in, size_t min_allocs,
                        int expected_status = 0, const std::string &scratch_file = "") {
  std::string dir = work_dir(name + "_" + mode);
  std::string trace = dir + "/out.trace";
  RunOptions opts = opts_in;
  opts.cwd = dir;
  if (!scratch_file.empty())
    unlink((dir + "/" + scratch_file).c_str());
  RunResult direct = run(argv, opts);
  INFO("direct stderr:\n" << direct.err);
  REQUIRE(direct.exit_code() == expected_status);
  if (!scratch_file.empty())
    unlink((dir + "/" + scratch_file).c_str()); // start the recorded run from the same state
  RunResult recorded = record({"-o", trace, "--allocator", mode}, argv, opts);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  Dump d = dump(trace, false);
  INFO("memlayout dump stderr:\n" << d.run.err);
  REQUIRE(d.run.exit_code() == 0);
  REQUIRE(d.error == "");
  CHECK(d.count("alloc") + d.count("realloc") > min_allocs);
  CHECK(d.end_lines == 1);
  CHECK(d.end_int("exit_status") == expected_status);
  CHECK(d.end_int("lost_events") == 0);
  CHECK(d.header_str("allocator") == mode);
  std::vector<std::string> errors = lifetime_errors(d);
  INFO(errors.size() << " inconsistencies:\n" << join(errors));
  CHECK(errors.empty());
}

} // namespace

// sqlite3 runs a 20k-insert script unchanged
TEST_CASE("real.sqlite3", "[record][real][sqlite3]") {
  if (access("/usr/bin/sqlite3", X_OK) != 0) {
    WARN("skipped: /usr/bin/sqlite3 is not installed (apt-get install sqlite3)");
    return;
  }
  const std::string mode = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(mode);
  RunOptions opts;
  opts.stdin_data = sqlite_script();
  check_real_program("sqlite3", {"/usr/bin/sqlite3", "-batch", "items.db"}, mode, opts, 10000, 0,
                     "items.db");
}

// sqlite3 failing on bad SQL fails the same way
TEST_CASE("real.sqlite3_error", "[record][real][sqlite3]") {
  if (access("/usr/bin/sqlite3", X_OK) != 0) {
    WARN("skipped: /usr/bin/sqlite3 is not installed");
    return;
  }
  RunOptions opts;
  opts.stdin_data =
      "CREATE TABLE t(a);\nINSERT INTO t VALUES(1);\nSELECT * FROM no_such_table;\nSELECT 2;\n";
  check_real_program("sqlite3_error", {"/usr/bin/sqlite3", "-bail", ":memory:"}, "native", opts, 10,
                     1);
}

// the python3 interpreter runs unchanged
TEST_CASE("real.python3", "[record][real][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) {
    WARN("skipped: /usr/bin/python3 is not installed");
    return;
  }
  const std::string mode = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(mode);
  RunOptions opts;
  opts.setenv = {{"PYTHONHASHSEED", "0"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  opts.unsetenv = {"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME"};
  const char *code = "import json, collections, sys\n"
                     "d = collections.defaultdict(list)\n"
                     "for i in range(30000):\n"
                     "    d[i % 101].append(str(i) * (i % 7))\n"
                     "s = json.dumps({str(k): len(v) for k, v in sorted(d.items())})\n"
                     "print(len(s), sum(len(x) for v in d.values() for x in v))\n"
                     "print('to stderr', file=sys.stderr)\n"
                     "sys.exit(3)\n";
  check_real_program("python3", {"/usr/bin/python3", "-I", "-c", code}, mode, opts, 1000, 3);
}
