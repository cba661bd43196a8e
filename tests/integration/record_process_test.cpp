// Process life cycles under `memlayout record`: fork, exec (followed or not),
// posix_spawn, system(), dlopen (with RTLD_DEEPBIND, with dlclose), and every
// way of ending: exit, _exit, abort, a fatal signal, signal handlers that
// allocate, exit from a thread while others run. In each, the program's
// stdout, stderr and exit status are what they are without memlayout.
#include "support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <thread>
#include <unistd.h>

using namespace mlt;

namespace {

size_t allocs_from(const Dump &d, const std::string &fn) {
  return static_cast<size_t>(std::count_if(d.events.begin(), d.events.end(), [&](const Event &e) {
    return (e.ev == "alloc" || e.ev == "realloc") && same_function(e.innermost(), fn);
  }));
}

std::vector<std::string> traces_in(const std::string &dir) {
  std::vector<std::string> out;
  for (const std::string &n : list_dir(dir))
    if (n.size() > 6 && n.compare(n.size() - 6, 6, ".trace") == 0)
      out.push_back(n);
  return out;
}

long read_pid(const std::string &path) { return std::atol(read_file(path).c_str()); }

std::string basename_of(const std::string &path) { return path.substr(path.rfind('/') + 1); }

} // namespace

// parent and child each get their own trace, named predictably
TEST_CASE("fork", "[record][fork]") {
  const std::string mode = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(mode);
  std::string dir = work_dir("fork_" + mode);
  std::string log_path = dir + "/program.log", trace = dir + "/out.trace";
  RunResult direct = run({program("fork_child"), log_path});
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded =
      record({"-o", trace, "--allocator", mode}, {program("fork_child"), log_path});
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");

  ProgramLog parent_log = read_log(log_path), child_log = read_log(log_path + ".child");
  REQUIRE(parent_log.pid > 0);
  REQUIRE(child_log.pid > 0);
  REQUIRE(child_log.ppid == parent_log.pid);
  std::string child_trace = "out." + std::to_string(child_log.pid) + ".trace";
  CHECK(traces_in(dir) == std::vector<std::string>{child_trace, "out.trace"});
  // The summary names it, with the program it holds.
  CHECK(recorded.err.find("memlayout: 1 other process of the command wrote its own trace: " + dir +
                          "/" + child_trace + " (" + basename_of(program("fork_child")) + ")\n") !=
        std::string::npos);

  Dump parent = dump(trace);
  INFO("dump of the parent's trace:\n" << parent.run.err);
  REQUIRE(parent.run.exit_code() == 0);
  REQUIRE(parent.error == "");
  CHECK(parent.header_int("pid") == parent_log.pid);
  std::vector<std::string> missing = missing_from_dump(parent_log, parent);
  INFO("parent's events not in its trace:\n" << join(missing));
  CHECK(missing.empty());
  CHECK(allocs_from(parent, "mlf_parent_alloc") == 100);
  CHECK(allocs_from(parent, "mlf_parent_after_fork") == 30);
  CHECK(allocs_from(parent, "mlf_child_alloc") == 0);
  size_t forks = static_cast<size_t>(
      std::count_if(parent.events.begin(), parent.events.end(), [&](const Event &e) {
        return e.ev == "fork" && static_cast<long>(e.child) == child_log.pid;
      }));
  CHECK(forks == 1);
  CHECK(parent.end_int("exit_status") == 0);
  std::vector<std::string> errors = lifetime_errors(parent);
  INFO(join(errors));
  CHECK(errors.empty());

  Dump child = dump(dir + "/" + child_trace);
  INFO("dump of the child's trace:\n" << child.run.err);
  REQUIRE(child.run.exit_code() == 0);
  REQUIRE(child.error == "");
  CHECK(child.header_int("pid") == child_log.pid);
  CHECK(child.header_int("parent_pid") == parent_log.pid);
  std::vector<std::string> child_missing = missing_from_dump(child_log, child);
  INFO("child's events not in its trace:\n" << join(child_missing));
  CHECK(child_missing.empty());
  CHECK(allocs_from(child, "mlf_child_alloc") == 50);
  // What the parent did before the fork is the parent's trace's, not repeated.
  CHECK(allocs_from(child, "mlf_parent_alloc") == 0);
  CHECK(allocs_from(child, "mlf_parent_after_fork") == 0);
  CHECK(child.end_int("exit_status") == 3);
}

// Forked workers ended by a signal before their first write (Python's Pool
// workers): only the first child had a trace (the others never opened one),
// and every child's events came before its trace's start (negative times).
TEST_CASE("fork.children_killed_before_their_first_write", "[record][fork]") {
  std::string dir = work_dir("fork_signalled");
  std::string trace = dir + "/t.trace";
  RunResult direct = run({program("fork_signalled"), "3", "10"});
  REQUIRE(direct.exit_code() == 0);
  CHECK(direct.out == "3 of 3 workers ended by SIGTERM\n");
  RunResult recorded = record({"-o", trace}, {program("fork_signalled"), "3", "10"});
  INFO(recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  std::vector<std::string> traces = traces_in(dir);
  CHECK(traces.size() == 4);
  for (const std::string &t : traces) {
    if (t == "t.trace")
      continue;
    INFO(t);
    Dump child = dump(dir + "/" + t);
    REQUIRE(child.error == "");
    // Its sites are named: the modules it inherited are listed.
    CHECK(allocs_from(child, "work") == 10);
    CHECK(child.end_int("allocs") == 10);
    int64_t earliest = 0;
    for (const Event &e : child.events)
      earliest = std::min(earliest, e.ts_ns);
    CHECK(earliest == 0);
  }
}

// without --follow-children only the first program is recorded
TEST_CASE("exec.no_follow", "[record][exec]") {
  const std::string mode =
      GENERATE(as<std::string>{}, "exec", "forkexec", "spawn", "system", "echo");
  CAPTURE(mode);
  std::string dir = work_dir("exec_nofollow_" + mode);
  std::string trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("exec_parent"), mode, program("exec_child"), dir};
  RunResult direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", trace}, argv);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  CHECK(traces_in(dir) == std::vector<std::string>{"out.trace"});
  // A program that became another by exec is named, and where
  // --follow-children would have put the other.
  bool replaced = mode == "exec" || mode == "echo";
  std::string became = mode == "echo" ? "echo" : program("exec_child");
  CHECK((recorded.err.find("exec_parent replaced itself with " + became +
                           " (exec), which was not recorded: with --follow-children it is, in " +
                           dir + "/out." + std::to_string(read_log(dir + "/parent.log").pid) +
                           ".1.trace\n") != std::string::npos) == replaced);
  // A program started as a child is named too, once.
  std::string started = "memlayout: the command started 1 program that was not recorded: ";
  if (mode == "forkexec" || mode == "spawn")
    CHECK(recorded.err.find(started + basename_of(program("exec_child")) +
                            " (--follow-children records it)\n") != std::string::npos);
  else if (mode == "system")
    // The summary cuts a shell command at 60 characters: a checkout's path
    // may take them all (a fresh clone in /tmp/tmp.XXXXXXXXXX/repo did).
    CHECK(recorded.err.find(started + "sh -c ''" + program("exec_child").substr(0, 40)) !=
          std::string::npos);
  else
    CHECK(recorded.err.find("memlayout: the command started") == std::string::npos);

  // So does the report of the trace.
  RunResult rep = run({memlayout_bin(), "report", trace});
  CHECK(rep.exit_code() == 0);
  CHECK((rep.out.find("replaced itself with another program (exec): this trace holds only") !=
         std::string::npos) == replaced);

  Dump d = dump(trace);
  INFO("memlayout dump stderr:\n" << d.run.err);
  REQUIRE(d.run.exit_code() == 0);
  CHECK(allocs_from(d, "mle_parent_alloc") == 10);
  CHECK(allocs_from(d, "mlc_child_alloc") == 0);
  CHECK(d.end_lines >= 1);
  if (mode != "exec" && mode != "echo")
    CHECK(d.end_int("exit_status") == 0);
  // The child ran without the recorder in its environment.
  if (mode != "echo") {
    ProgramLog child = read_log(dir + "/" + mode + ".log");
    CHECK(child.count('A') == 20);
  }
}

// A shell that runs the program as its child (dash runs commands in vfork
// children, trying each directory of PATH): the summary names the program,
// once, and the shell's trace is all there is.
TEST_CASE("exec.shell_child", "[record][exec]") {
  std::string dir = work_dir("exec_shell_child");
  std::string trace = dir + "/out.trace";
  std::string bin = program("exec_child");
  std::string bin_dir = bin.substr(0, bin.rfind('/')), name = basename_of(bin);
  std::vector<std::string> argv = {"/bin/sh", "-c",
                                   "PATH='" + dir + "/no-such-dir:" + bin_dir +
                                       ":/usr/bin:/bin'; " + name + " '" + dir + "/a.log' a; " +
                                       name + " '" + dir + "/b.log' b; true"};
  RunResult direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", trace}, argv);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  CHECK(recorded.err.find(" replaced itself ") == std::string::npos);
  CHECK(recorded.err.find(
            "memlayout: the command started 2 programs that were not recorded: " + name +
            " (2 times) (--follow-children records them)\n") != std::string::npos);
  // An exec that fails (a name found nowhere on PATH) started nothing.
  RunResult missing = record({"-o", trace}, {"/usr/bin/env", "no-such-program-anywhere"});
  INFO("env no-such-program-anywhere: " << missing.err);
  CHECK(missing.exit_code() == 127);
  CHECK(missing.err.find("replaced itself") == std::string::npos);
  CHECK(missing.err.find("not recorded") == std::string::npos);
  // With --follow-children nothing is said about unrecorded programs.
  RunResult followed = record({"-o", trace, "--follow-children"}, argv);
  INFO("memlayout record --follow-children stderr:\n" << followed.err);
  CHECK(behaviour_difference(direct, followed) == "");
  CHECK(followed.err.find("not recorded") == std::string::npos);
}

// with --follow-children every program started is recorded
TEST_CASE("exec.follow", "[record][exec]") {
  const std::string mode =
      GENERATE(as<std::string>{}, "exec", "forkexec", "spawn", "system", "echo");
  CAPTURE(mode);
  std::string dir = work_dir("exec_follow_" + mode);
  std::string trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("exec_parent"), mode, program("exec_child"), dir};
  RunResult direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", trace, "--follow-children"}, argv);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");

  ProgramLog parent_log = read_log(dir + "/parent.log");
  REQUIRE(parent_log.pid > 0);
  std::vector<std::string> traces = traces_in(dir);
  CAPTURE(traces);
  Dump first = dump(trace);
  REQUIRE(first.run.exit_code() == 0);
  CHECK(first.header_int("pid") == parent_log.pid);
  CHECK(allocs_from(first, "mle_parent_alloc") == 10);
  CHECK(allocs_from(first, "mlc_child_alloc") == 0);

  // Where the exec'd program's trace must be.
  std::vector<std::string> expected;
  std::string pid = std::to_string(parent_log.pid);
  if (mode == "exec" || mode == "echo") {
    expected = {"out." + pid + ".1.trace"}; // the same pid's first exec
  } else if (mode == "forkexec" || mode == "spawn") {
    std::string child = std::to_string(read_pid(dir + "/" + mode + ".pid"));
    REQUIRE(child != "0");
    // docs/recording.md: a spawned program records into FILE.PID; a forked
    // child that execs is an image replacing a recorded process: FILE.PID.1
    expected = {mode == "spawn" ? "out." + child + ".trace" : "out." + child + ".1.trace"};
  }
  std::string child_trace;
  if (mode == "system") {
    // /bin/sh is recorded too; the child's trace is the one with its allocations
    for (const std::string &t : traces)
      if (t != "out.trace" && allocs_from(dump(dir + "/" + t), "mlc_child_alloc") > 0)
        child_trace = t;
  } else {
    for (const std::string &t : expected)
      if (std::find(traces.begin(), traces.end(), t) != traces.end())
        child_trace = t;
  }
  INFO("expected one of: " << join(expected));
  REQUIRE(child_trace != "");

  if (mode == "exec" || mode == "echo") {
    // The summary follows the pid to the program it became.
    CHECK(recorded.err.find("exec_parent replaced itself by exec; the program it became, ") !=
          std::string::npos);
    CHECK(recorded.err.find(" -> " + dir + "/" + child_trace + "\n") != std::string::npos);
  } else {
    CHECK(recorded.err.find(" replaced itself ") == std::string::npos);
  }

  Dump child = dump(dir + "/" + child_trace);
  INFO("dump of " << child_trace << ":\n" << child.run.err);
  REQUIRE(child.run.exit_code() == 0);
  REQUIRE(child.error == "");
  CHECK(child.end_int("exit_status") == 0);
  if (mode == "echo") {
    std::string exe = child.header_str("executable");
    CHECK(exe.find("echo") != std::string::npos);
    CHECK(child.count("alloc") > 0);
    CHECK(child.header_int("pid") == parent_log.pid);
  } else {
    ProgramLog child_log = read_log(dir + "/" + mode + ".log");
    CHECK(child.header_int("pid") == child_log.pid);
    std::vector<std::string> missing = missing_from_dump(child_log, child);
    INFO(join(missing));
    CHECK(missing.empty());
    CHECK(allocs_from(child, "mlc_child_alloc") == 20);
    CHECK(allocs_from(child, "mle_parent_alloc") == 0);
  }
  if (mode == "exec")
    CHECK(child.header_int("pid") == parent_log.pid);
  // Every trace left is complete.
  for (const std::string &t : traces) {
    Dump any = dump(dir + "/" + t, false);
    CAPTURE(t, any.run.err);
    CHECK(any.run.exit_code() == 0);
  }
}

// a plugin's allocations are attributed to its functions
// a program LD_PRELOAD cannot reach is run all the same, and the summary says
// why it has no trace
TEST_CASE("exec.static", "[record][exec]") {
  std::string dir = work_dir("exec_static");
  std::string trace = dir + "/out.trace";
  std::vector<std::string> alone = {program("exec_child_static"), dir + "/alone.log", "static"};
  RunResult direct = run(alone);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", trace}, alone);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  CHECK(recorded.err.find("memlayout: no trace was written to " + trace + ": " +
                          program("exec_child_static") +
                          " is statically linked: no dynamic loader reads LD_PRELOAD there") !=
        std::string::npos);
  CHECK(traces_in(dir).empty()); // not an empty file that is no trace

  // Reached by exec from a recorded program, with --follow-children.
  std::vector<std::string> argv = {program("exec_parent"), "exec", program("exec_child_static"),
                                   dir};
  direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  recorded = record({"-o", trace, "--follow-children"}, argv);
  CHECK(behaviour_difference(direct, recorded) == "");
  std::string pid = std::to_string(read_log(dir + "/parent.log").pid);
  CHECK(recorded.err.find("exec_parent replaced itself with " + program("exec_child_static") +
                          " (exec), which cannot be recorded: statically linked, 32-bit, or "
                          "set-user-ID: no dynamic loader preloads memlayout there\n") !=
        std::string::npos);
  CHECK(traces_in(dir) == std::vector<std::string>{"out.trace"});
  CHECK(read_log(dir + "/exec.log").count('A') == 20); // it ran, unrecorded

  // Started by posix_spawn, followed: as unreachable.
  recorded = record({"-o", trace, "--follow-children"},
                    {program("exec_parent"), "spawn", program("exec_child_static"), dir});
  INFO(recorded.err);
  CHECK(recorded.exit_code() == 0);
  CHECK(recorded.err.find("memlayout: the command started 1 program that cannot be recorded: "
                          "mlt_exec_child_static (statically linked") != std::string::npos);

  // Started by a shell, twice: --follow-children cannot reach it either,
  // and the summary said nothing of it (without: "--follow-children
  // records them").
  const std::string twice = program("exec_child_static") + " " + dir + "/a.log static; " +
                            program("exec_child_static") + " " + dir + "/b.log static";
  for (bool follow : {false, true}) {
    CAPTURE(follow);
    std::vector<std::string> options = {"-o", trace};
    if (follow)
      options.push_back("--follow-children");
    recorded = record(options, {"/bin/sh", "-c", twice});
    INFO(recorded.err);
    CHECK(recorded.exit_code() == 0);
    CHECK(recorded.err.find("memlayout: the command started 2 programs that cannot be recorded: "
                            "mlt_exec_child_static (2 times) (statically linked, 32-bit, or "
                            "set-user-ID: no dynamic loader preloads memlayout there)") !=
          std::string::npos);
    CHECK(recorded.err.find("--follow-children records") == std::string::npos);
  }
}

// What -o names is replaced as a shell's > would, written to when a device,
// refused when a FIFO, and never removed when it was there before: an empty
// trace left by a program the recorder cannot reach (static) removed only
// when the launcher made the file. A 32-bit program is refused before it
// runs: its loader would print its own error on the program's stderr.
TEST_CASE("record.output_paths_it_did_not_make", "[record]") {
  std::string dir = work_dir("output_paths");
  std::vector<std::string> static_prog = {program("exec_child_static"), dir + "/s.log", "static"};
  // A character device (a /dev/null of our own, as root may write there).
  std::string dev = dir + "/null";
  unlink(dev.c_str());
  bool have_dev = mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  if (have_dev) {
    RunResult r = record({"-o", dev}, {program("join_frees"), "1", "10"});
    CHECK(r.exit_code() == 0);
    struct stat st;
    REQUIRE(stat(dev.c_str(), &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
    CHECK(r.err.find("no trace was written to " + dev + ": it is a device, not a file") !=
          std::string::npos);
  }
  // A FIFO: refused, left where it was, the program not run.
  std::string fifo = dir + "/fifo";
  unlink(fifo.c_str());
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
  RunResult f = record({"-o", fifo}, static_prog);
  CHECK(f.exit_code() == 2);
  CHECK(f.err.find("it is a FIFO") != std::string::npos);
  struct stat st;
  REQUIRE(stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  // A symbolic link and an existing empty file stay; a file it made goes.
  std::string target = dir + "/target.trace", link = dir + "/link.trace";
  unlink(link.c_str());
  unlink(target.c_str());
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  CHECK(record({"-o", link}, static_prog).exit_code() == 0);
  CHECK(lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  std::string old = dir + "/old.trace";
  { std::ofstream touch(old); }
  CHECK(record({"-o", old}, static_prog).exit_code() == 0);
  CHECK(stat(old.c_str(), &st) == 0);
  std::string made = dir + "/made.trace";
  unlink(made.c_str());
  CHECK(record({"-o", made}, static_prog).exit_code() == 0);
  CHECK(stat(made.c_str(), &st) != 0);
  // An ELF file of class 32 (the header is all the launcher reads).
  std::string elf32 = dir + "/prog32";
  {
    std::ofstream out(elf32, std::ios::binary);
    char header[64] = {0x7f, 'E', 'L', 'F', 1, 1, 1};
    out.write(header, sizeof header);
  }
  chmod(elf32.c_str(), 0755);
  RunResult r32 = record({"-o", dir + "/t32.trace"}, {elf32});
  CHECK(r32.exit_code() == 2);
  CHECK(r32.err.find(elf32 + " is a 32-bit program: memlayout records 64-bit programs only") !=
        std::string::npos);
}

// a program killed outright writes no end record: the summary gives the
// events its blocks hold, and no totals it cannot know
TEST_CASE("killed", "[record][exit]") {
  std::string dir = work_dir("killed");
  std::string trace = dir + "/out.trace";
  std::vector<std::string> argv = {"/bin/sh", "-c", "kill -9 $$"};
  RunResult direct = run(argv);
  RunResult recorded = record({"-o", trace}, argv);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  CHECK(recorded.err.find("(incomplete: the program did not finish writing it) -> " + trace) !=
        std::string::npos);
  CHECK(recorded.err.find(" allocations") == std::string::npos);
}

// `kill PID` of memlayout record, not of the program: the program gets the
// signal (as from perf record or heaptrack), ends as it chooses, and the
// launcher reports its trace and ends the same way; no orphan keeps running.
TEST_CASE("signalled_launcher", "[record][exit]") {
  const int sig = GENERATE(SIGTERM, SIGHUP);
  std::string dir = work_dir("signalled_launcher." + std::to_string(sig));
  std::string ready = dir + "/ready";
  RunOptions opts;
  opts.signal_when_exists = ready;
  opts.send_signal = sig;
  opts.timeout_s = 30;
  SECTION("the program dies of it: so does the launcher") {
    std::string trace = dir + "/dies.trace";
    RunResult r =
        record({"-o", trace},
               {"/bin/sh", "-c", "touch " + ready + "; while :; do sleep 0.05; done"}, opts);
    INFO("memlayout record stderr:\n" << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.term_signal() == sig);
    CHECK(r.err.find("-> " + trace) != std::string::npos);
  }
  SECTION("the program handles it: its exit status is the launcher's") {
    std::string trace = dir + "/handles.trace";
    RunResult r = record({"-o", trace},
                         {"/bin/sh", "-c",
                          "trap 'echo caught; exit 7' " + std::to_string(sig) + "; touch " + ready +
                              "; while :; do sleep 0.05; done"},
                         opts);
    INFO("memlayout record stderr:\n" << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code() == 7);
    CHECK(r.out == "caught\n");
    CHECK(r.err.find("-> " + trace) != std::string::npos);
  }
}

TEST_CASE("dlopen", "[record][dlopen]") {
  const std::string variant =
      GENERATE(as<std::string>{}, "plain", "deepbind", "close", "deepbind+close");
  const std::string mode = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(variant, mode);
  std::string dir =
      work_dir("dlopen_" + std::string(variant == "deepbind+close" ? "deepbind_close" : variant) +
               "_" + mode);
  std::string log_path = dir + "/program.log", trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("dlopen_main"), plugin_path(), log_path};
  if (variant.find("deepbind") != std::string::npos)
    argv.push_back("deepbind");
  if (variant.find("close") != std::string::npos)
    argv.push_back("close");
  RunResult direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", trace, "--allocator", mode}, argv);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");

  Dump d = dump(trace);
  INFO("memlayout dump stderr:\n" << d.run.err);
  REQUIRE(d.run.exit_code() == 0);
  REQUIRE(d.error == "");
  size_t loaded = 0, unloaded = 0;
  uint64_t base = 0;
  for (const Module &m : d.modules)
    if (m.path == plugin_path() && m.what == "loaded") {
      ++loaded;
      base = m.base;
    }
  for (const Module &m : d.modules) // named by path, or by its base alone
    unloaded +=
        m.what == "unloaded" && (m.path == plugin_path() || (m.path.empty() && m.base == base));
  CHECK(loaded == 1);
  if (variant.find("close") != std::string::npos)
    CHECK(unloaded == 1);
  ProgramLog log = read_log(log_path);
  REQUIRE(log.count('A') == 16);
  std::vector<std::string> missing = missing_from_dump(log, d);
  INFO(join(missing));
  CHECK(missing.empty());
  // The call site is in the plugin's source file.
  for (const Event &e : d.events)
    if (e.ev == "alloc" && same_function(e.innermost(), "mlp_plugin_make")) {
      CHECK(e.frames.front().file.find("plugin.c") != std::string::npos);
      break;
    }
}

// output, status and a readable trace however the program ends
TEST_CASE("exit_paths", "[record][exit]") {
  const std::string mode =
      GENERATE(as<std::string>{}, "exit", "_exit", "abort", "segv", "term", "reraise",
               "reraise_sigaction", "signal", "thread_exit", "quick_exit", "exit_wide");
  const std::string allocator = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(mode, allocator);
  std::string dir = work_dir("exit_" + mode + "_" + allocator);
  std::string log_path = dir + "/program.log", trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("exit_paths"), mode, log_path};
  RunResult direct = run(argv);
  RunResult recorded = record({"-o", trace, "--allocator", allocator}, argv);
  INFO("direct: " << direct.describe() << ", recorded: " << recorded.describe());
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  static const std::map<std::string, std::string> expected_status = {
      {"exit", "exit 4"},
      {"_exit", "exit 5"},
      {"abort", "signal 6 (Aborted)"},
      {"segv", "signal 11 (Segmentation fault)"},
      {"term", "signal 15 (Terminated)"},
      {"reraise", "signal 15 (Terminated)"},
      {"reraise_sigaction", "signal 15 (Terminated)"},
      {"signal", "exit 0"},
      {"thread_exit", "exit 7"},
      {"quick_exit", "exit 6"},
      {"exit_wide", "exit 3"}};
  CHECK(direct.describe() == expected_status.at(mode));
  if (mode == "_exit")
    CHECK(direct.out == "_exit: written directly\n");
  if (mode == "abort") {
    // What a shell or CI sees: 128 + SIGABRT.
    RunResult sh =
        run({"/bin/sh", "-c", "\"$0\" record -o \"$1\" -- \"$2\" abort \"$3\" 2>/dev/null; echo $?",
             memlayout_bin(), dir + "/sh.trace", program("exit_paths"), dir + "/sh.log"});
    CHECK(sh.out == "134\n"); // abort() flushes no stdio buffers
  }

  Dump d = dump(trace);
  INFO("memlayout dump stderr:\n" << d.run.err);
  REQUIRE(d.error == "");
  ProgramLog log = read_log(log_path);
  CHECK(d.run.exit_code() == 0);
  CHECK(d.end_lines >= 1);
  if (recorded.exited())
    CHECK(d.end_int("exit_status") == recorded.exit_code());
  // Killed by a signal: the recorder's handler wrote everything, then the
  // signal ended the program as it would have.
  if (mode == "segv")
    CHECK(d.end_int("exit_status") == 11);
  if (mode == "term" || mode.rfind("reraise", 0) == 0)
    CHECK(d.end_int("exit_status") == 15);
  if (mode.rfind("reraise", 0) == 0)
    CHECK(recorded.out == "cleanup\n"); // its own handler ran first
  std::vector<std::string> missing = missing_from_dump(log, d);
  INFO(join(missing));
  CHECK(missing.empty());
  size_t expected_allocs = mode == "thread_exit" ? 150 : mode == "quick_exit" ? 60 : 50;
  CHECK(allocs_from(d, "mlx_exit_alloc") == expected_allocs);
  if (mode == "signal")
    CHECK(allocs_from(d, "mls_handler_alloc") == 10);
  std::vector<std::string> errors = lifetime_errors(d);
  INFO(join(errors));
  CHECK(errors.empty());
}

// Ended by SIGTERM while 16 threads allocate (more than the CPUs): the
// handler gave up on every thread that held its flush lock, and up to 45%
// of the events the end record counts were nowhere, none counted lost.
TEST_CASE("record.signal_while_threads_allocate_keeps_their_events", "[record][signal]") {
  std::string dir = work_dir("signal_while_allocating");
  // The trace holds millions of events (the recorder keeps up with 16
  // threads that do nothing but allocate): counted as they stream past,
  // not parsed whole, which took more than the test's two minutes.
  auto count_allocations = [&](const std::string &trace) {
    RunOptions opts;
    opts.timeout_s = 120;
    return run({"/bin/sh", "-c",
                "'" + memlayout_bin() + "' dump --format jsonl '" + trace +
                    "' | awk -F'\"' '$4==\"alloc\"||$4==\"realloc\"{n++} "
                    "$4==\"end\"{e=$0} END{print n+0; print e}'"},
               opts);
  };
  auto end_field = [](const std::string &end, const std::string &name) -> int64_t {
    size_t at = end.find("\"" + name + "\":");
    return at == std::string::npos ? -1 : std::stoll(end.substr(at + name.size() + 3));
  };
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    RunResult r =
        record({"-o", dir + "/t.trace"}, {program("signal_while_allocating"), "16", "100"});
    INFO(r.err);
    CHECK(r.term_signal() == SIGTERM);
    RunResult counts = count_allocations(dir + "/t.trace");
    INFO(counts.out << counts.err);
    REQUIRE(counts.exit_code() == 0);
    std::istringstream lines(counts.out);
    std::string written_line, end;
    std::getline(lines, written_line);
    std::getline(lines, end);
    REQUIRE(end.find("\"ev\":\"end\"") != std::string::npos);
    int64_t written = std::stoll(written_line), counted = end_field(end, "allocs"),
            lost = end_field(end, "lost_events");
    CHECK(counted > 0);
    CHECK(lost >= 0);
    // What the end record counts is in the trace, or said to be lost.
    CHECK(written + lost >= counted);
    CHECK(lost * 20 <= counted); // nearly all of it written
  }
}

// The environment the program and its (unfollowed) children see is the one
// they would see without memlayout: the user's own LD_PRELOAD kept, ours gone.
// MEMLAYOUT_* variables that record sets from its options were overridden
// without a word; a bad value of another was "ignoring out-of-range value
// of: NAME", without the value or what it may be.
TEST_CASE("record.environment_it_overrides_and_bad_values", "[record][env]") {
  std::string dir = work_dir("environment_overrides");
  RunOptions opts;
  opts.setenv = {{"MEMLAYOUT_PAGEMAP", "0"},
                 {"MEMLAYOUT_STACK_DEPTH", "3"},
                 {"MEMLAYOUT_TICK_PERIOD", "0"},
                 {"MEMLAYOUT_BLOCK_KIB", "abc"},
                 // a value longer than the message holds: cut, not written past it
                 {"MEMLAYOUT_ZSTD_LEVEL", std::string(4000, '9')}};
  RunResult r = record({"-o", dir + "/t.trace"}, {"/bin/true"}, opts);
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(r.err.find("MEMLAYOUT_PAGEMAP=0 in the environment is ignored: record sets it from its "
                   "options (--no-page-frames)") != std::string::npos);
  CHECK(r.err.find("MEMLAYOUT_STACK_DEPTH=3 in the environment is ignored") != std::string::npos);
  CHECK(r.err.find("MEMLAYOUT_TICK_PERIOD=0: not a whole number from 1 to 4096") !=
        std::string::npos);
  CHECK(r.err.find("MEMLAYOUT_BLOCK_KIB=abc: not a whole number from 16 to 4096") !=
        std::string::npos);
  CHECK(r.err.find("9: not a whole number from -7 to 9") != std::string::npos);
}

TEST_CASE("environment", "[record][exec][env]") {
  std::string dir = work_dir("environment");
  const std::string who = GENERATE(as<std::string>{}, "program", "child");
  CAPTURE(who);
  // The plugin is a harmless library to preload: no constructors.
  RunOptions opts;
  opts.setenv = {{"LD_PRELOAD", plugin_path()}};
  std::vector<std::string> argv = who == "program"
                                      ? std::vector<std::string>{"/usr/bin/env"}
                                      : std::vector<std::string>{"/bin/sh", "-c", "/usr/bin/env"};
  RunResult direct = run(argv, opts);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", dir + "/out.trace"}, argv, opts);
  REQUIRE(recorded.exit_code() == 0);
  auto lines_with = [](const std::string &text, const std::string &prefix) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(prefix, 0) == 0)
        out.push_back(line);
    return out;
  };
  CHECK(lines_with(recorded.out, "LD_PRELOAD=") ==
        std::vector<std::string>{"LD_PRELOAD=" + plugin_path()});
  std::vector<std::string> ours = lines_with(recorded.out, "MEMLAYOUT_");
  INFO("FAIL: memlayout's settings leak into the environment the program "
       << (who == "program" ? "prints" : "passes to children it starts unrecorded") << ":\n"
       << join(ours));
  CHECK(ours.empty());
  // Nothing else differs.
  auto without_ours = [](const std::string &text) {
    std::string kept;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("MEMLAYOUT_", 0) != 0)
        kept += line + "\n";
    return kept;
  };
  CHECK((without_ours(recorded.out) == direct.out));
}

// fork while other threads are inside malloc and the recorder: no deadlock,
// every child its own complete trace
TEST_CASE("fork.threaded", "[record][fork]") {
  const std::string mode = GENERATE(as<std::string>{}, "native", "jemalloc");
  CAPTURE(mode);
  std::string dir = work_dir("fork_threaded_" + mode);
  std::string trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("fork_child"), dir + "/unused.log", "threaded"};
  RunResult direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  RunOptions opts;
  // A deadlock shows up as a timeout. 5-10 s alone; on a 2-CPU machine busy
  // with other tests and recordings, 60 s was once not enough (ctest allows
  // the whole test 120).
  opts.timeout_s = 90;
  RunResult recorded = record({"-o", trace, "--allocator", mode}, argv, opts);
  INFO("memlayout record stderr:\n" << recorded.err);
  REQUIRE_FALSE(recorded.timed_out);
  CHECK(behaviour_difference(direct, recorded) == "");

  Dump parent = dump(trace, false);
  REQUIRE(parent.run.exit_code() == 0);
  std::vector<uint64_t> children;
  for (const Event &e : parent.events)
    if (e.ev == "fork")
      children.push_back(e.child);
  REQUIRE(children.size() == 20);
  for (size_t i = 0; i < children.size(); ++i) {
    std::string name = "out." + std::to_string(children[i]) + ".trace";
    CAPTURE(name);
    REQUIRE(file_exists(dir + "/" + name));
    Dump child = dump(dir + "/" + name);
    INFO("dump stderr:\n" << child.run.err);
    CHECK(child.run.exit_code() == 0);
    CHECK(child.end_int("exit_status") == static_cast<int64_t>(i % 5));
    CHECK(allocs_from(child, "mlf_child_alloc") == 100);
    CHECK(child.header_int("parent_pid") == parent.header_int("pid"));
  }
  CHECK(traces_in(dir).size() == 21);
}

// A program that closes every descriptor it did not open (daemons do) and
// reuses the numbers: the trace goes on, complete.
TEST_CASE("closed_descriptors", "[record][fd]") {
  std::string dir = work_dir("closed_descriptors");
  std::string trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("churn"), "40000", "close-fds"};
  RunResult direct = run(argv);
  REQUIRE(direct.exit_code() == 0);
  RunResult recorded = record({"-o", trace}, argv);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  Dump d = dump(trace);
  INFO("memlayout dump stderr:\n" << d.run.err);
  REQUIRE(d.run.exit_code() == 0);
  CHECK(allocs_from(d, "mlk_churn_alloc") == 40000);
  CHECK(d.end_int("lost_events") == 0);
  CHECK(d.end_int("write_errors") == 0);
}

// exit() from a handler of a signal that interrupted the recorder (inside
// malloc, holding the thread's log): the exit path must not wait for it.
// Each delay lands the signal somewhere else in the loop.
TEST_CASE("exit_from_a_handler_that_interrupted_the_recorder", "[record][exit]") {
  std::string dir = work_dir("handler_exit");
  RunOptions opts;
  opts.timeout_s = 20;
  int hung = 0, wrong = 0;
  for (int i = 0; i < 80; ++i) { // about 5% of them hung before
    RunResult r = record({"-o", dir + "/t.trace"},
                         {program("handler_exit"), std::to_string(3000 + i * 211)}, opts);
    hung += r.timed_out;
    wrong += !r.timed_out && r.exit_code() != 42;
  }
  CHECK(hung == 0);
  CHECK(wrong == 0);
}

// The program sees its signals' actions as it left them: the default where
// the recorder's handler (which writes the trace's end, then takes the
// default) is in. CPython read "a handler" and gave up KeyboardInterrupt;
// bash, git and Ruby put the saved handler back without its flags, and its
// raise() then came back to it forever.
TEST_CASE("record.signal_actions_as_the_program_left_them", "[record][signal]") {
  std::string dir = work_dir("signal_views");
  RunOptions opts;
  opts.timeout_s = 30;
  for (const char *sig : {"15", "2", "10"}) {
    CAPTURE(sig);
    RunResult direct = run({program("signal_views"), sig}, opts);
    REQUIRE(direct.term_signal() == std::atoi(sig));
    CHECK(direct.out == "SIGINT: default\nSIGHUP: default\n");
    RunResult rec = record({"-o", dir + "/s.trace"}, {program("signal_views"), sig}, opts);
    INFO(rec.err);
    CHECK_FALSE(rec.timed_out);
    CHECK(rec.out == direct.out);
    CHECK(rec.describe() == direct.describe());
    RunResult ran = run({memlayout_bin(), "run", "--", program("signal_views"), sig}, opts);
    CHECK_FALSE(ran.timed_out);
    CHECK(ran.out == direct.out);
    CHECK(ran.describe() == direct.describe());
    // Its trace still ends: the handler wrote the end before the signal took it.
    Dump d = dump(dir + "/s.trace");
    CHECK(d.run.exit_code() == 0);
  }
}

// A thread whose first allocation is inside pthread_getattr_np, which holds
// the thread's lock: the recorder learnt the thread's stack by asking for it
// again, and waited for that lock forever (every Ruby thread).
TEST_CASE("record.first_allocation_inside_pthread_getattr_np", "[record][threads]") {
  std::string dir = work_dir("getattr_first");
  RunOptions opts;
  opts.timeout_s = 30;
  RunResult direct = run({program("getattr_first"), "6"}, opts);
  REQUIRE(direct.exit_code() == 0);
  RunResult rec = record({"-o", dir + "/g.trace"}, {program("getattr_first"), "6"}, opts);
  INFO(rec.err);
  CHECK_FALSE(rec.timed_out);
  CHECK(rec.exit_code() == 0);
  CHECK(rec.out == "6 of 6 threads know their stack\n");
  Dump d = dump(dir + "/g.trace");
  REQUIRE(d.run.exit_code() == 0);
  CHECK(d.end_int("lost_events") == 0);
}

// A daemon outlives the command: the summary names it and where its trace
// goes (memcached -d's trace was named only when it happened to exist).
TEST_CASE("record.a_daemon_still_recording_is_named", "[record][fork]") {
  std::string dir = work_dir("daemonize");
  std::string trace = dir + "/d.trace";
  RunResult r = record({"-o", trace}, {program("daemonize"), "1500"});
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  CHECK(r.out == "serving for 1500 ms\n");
  size_t at = r.err.find("1 process of the command still runs and records (a daemon?): ");
  REQUIRE(at != std::string::npos);
  size_t arrow = r.err.find(" -> ", at);
  REQUIRE(arrow != std::string::npos);
  std::string daemon_trace = r.err.substr(arrow + 4, r.err.find(';', arrow) - arrow - 4);
  CHECK(daemon_trace.rfind(dir + "/d.", 0) == 0);
  // Complete once the daemon ends.
  for (int i = 0; i < 100 && !(access(daemon_trace.c_str(), R_OK) == 0 &&
                               dump(daemon_trace).run.exit_code() == 0);
       ++i)
    usleep(50000);
  Dump d = dump(daemon_trace);
  CHECK(d.run.exit_code() == 0);
}

// The harness itself: a run that times out takes what it started with it,
// as a hung recorded program would otherwise outlive its launcher.
TEST_CASE("harness_timeout_kills_the_process_group", "[harness]") {
  RunOptions opts;
  opts.timeout_s = 1;
  RunResult r = run({"sh", "-c", "sleep 300 & echo $!; wait"}, opts);
  REQUIRE(r.timed_out);
  long orphan = std::atol(r.out.c_str());
  REQUIRE(orphan > 0);
  // Gone, or a zombie waiting for whoever reaps orphans.
  bool alive = true;
  for (int i = 0; i < 100 && alive; ++i) {
    std::string stat = read_file("/proc/" + std::to_string(orphan) + "/stat");
    size_t paren = stat.rfind(')');
    alive = paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
    if (alive)
      usleep(20000);
  }
  CHECK_FALSE(alive);
}

// A `memlayout record` the recorded program runs (a test suite that records,
// a record of a record) sets its own child up: its trace is written, with
// or without --follow-children outside.
TEST_CASE("record.inside_a_record", "[record][exec]") {
  std::string dir = work_dir("record_inside");
  for (bool follow : {false, true}) {
    CAPTURE(follow);
    std::string inner = dir + (follow ? "/inner_follow.trace" : "/inner.trace");
    unlink(inner.c_str());
    std::vector<std::string> outer_args = {"-o", dir + "/outer.trace"};
    if (follow)
      outer_args.push_back("--follow-children");
    RunResult r = record(outer_args, {memlayout_bin(), "record", "-o", inner, "--",
                                      program("join_frees"), "2", "50"});
    INFO(r.err);
    CHECK(r.exit_code() == 0);
    CHECK(r.out == "2450\n");
    Dump d = dump(inner);
    CHECK(d.run.exit_code() == 0);
    size_t allocs = 0;
    for (const Event &e : d.events)
      allocs += e.ev == "alloc";
    CHECK(allocs >= 100);
  }
}

// A trace cut short by a full file system says so, not that the program
// did not finish writing it. Needs a small tmpfs (root): skipped without.
TEST_CASE("record.full_file_system", "[record]") {
  std::string dir = work_dir("full_fs");
  std::string mnt = dir + "/fs";
  umount(mnt.c_str());
  mkdir(mnt.c_str(), 0755);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=16k") != 0) {
    WARN("cannot mount a tmpfs here (" << std::strerror(errno) << "): not checked");
    return;
  }
  RunResult r = record({"-o", mnt + "/t.trace"}, {program("churn"), "200000"});
  umount(mnt.c_str());
  INFO(r.err);
  CHECK(r.exit_code() == 0);
  CHECK(r.err.find("the file system holding it is full") != std::string::npos);
}

// A trace cut short by a file size limit (RLIMIT_FSIZE) names it, with the
// limit, wherever it is read: record's summary, report's warning and note,
// advise's rules file, dump. The program sees what it sees without the
// recorder (its own write cut at the limit, one EFBIG, one SIGXFSZ, or its
// death by SIGXFSZ), whether the limit came from the shell or from itself.
TEST_CASE("record.file_size_limit", "[record][diskfull]") {
  struct Case {
    const char *name;
    long inherited;      // RLIMIT_FSIZE memlayout runs under (ulimit -f), -1: none
    const char *own;     // what the program sets, "0": none
    const char *sigxfsz; // handler, default
  };
  const Case c = GENERATE(values<Case>({
      {"ulimit", 100 * 1024, "0", "handler"},
      {"setrlimit", -1, "102400", "handler"},
      {"setrlimit_default_action", -1, "102400", "default"},
      // Set once the trace holds more than that: its stop record goes out
      // before the limit applies.
      {"setrlimit_late", -1, "late:102400", "handler"},
  }));
  CAPTURE(c.name);
  std::string dir = work_dir(std::string("fsize_limit_") + c.name);
  std::string trace = dir + "/t.trace";
  std::vector<std::string> argv = {program("fsize_limit"), c.own, "100000", dir + "/own.out",
                                   c.sigxfsz};
  RunOptions opts;
  opts.fsize_limit = c.inherited;
  RunResult direct = run(argv, opts);
  RunResult recorded = record({"-o", trace}, argv, opts);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  if (std::string(c.sigxfsz) == "default")
    CHECK(direct.term_signal() == SIGXFSZ);
  else
    CHECK(direct.out.find("wrote 102400 bytes, then EFBIG; SIGXFSZ: 1\n") != std::string::npos);
  const std::string cause =
      "the file size limit (RLIMIT_FSIZE, ulimit -f) of 102400 bytes stopped the recorder";
  CHECK(recorded.err.find("(incomplete: " + cause + ") -> " + trace + "\n") != std::string::npos);
  struct stat st;
  REQUIRE(stat(trace.c_str(), &st) == 0);
  if (std::string(c.own).rfind("late:", 0) == 0)
    CHECK(st.st_size > 102400); // written before the limit: all of it stays
  else
    CHECK(st.st_size <= 102400);

  RunResult report = run({memlayout_bin(), "report", trace});
  INFO("memlayout report stderr:\n" << report.err);
  CHECK(report.exit_code() == 1);
  CHECK(report.err.find("memlayout report: warning: the trace is incomplete: " + trace +
                        ": truncated at offset ") != std::string::npos);
  CHECK(report.err.find("no end record; " + cause) != std::string::npos);
  CHECK(report.out.find(cause) != std::string::npos); // the report's note
  RunResult advise = run({memlayout_bin(), "advise", trace, "--no-replay"});
  CHECK(advise.out.find("# the trace is incomplete (" + cause + ")") != std::string::npos);
  Dump d = dump(trace, false);
  CHECK(d.run.exit_code() == 1);
  CHECK(d.line_kinds["stop"] == 1);
  CHECK(d.count("alloc") > 0); // what was written before the limit reads back
  // Set by the program after its allocations: every one of them is in (the
  // threads' events not yet written were lost: 1447 of 50000).
  if (std::string(c.own).rfind("late:", 0) == 0)
    CHECK(d.count("alloc") >= 100000);
  CHECK(d.run.out.find("{\"ev\":\"stop\",\"tid\":0,\"cause\":\"file_size_limit\",\"limit\":"
                       "102400,") != std::string::npos);
}

// A limit too small for the trace's header: no trace, the program unharmed,
// and the summary says why.
TEST_CASE("record.file_size_limit_below_the_header", "[record][diskfull]") {
  std::string dir = work_dir("fsize_limit_header");
  std::string trace = dir + "/t.trace";
  std::vector<std::string> argv = {program("churn"), "1000"};
  RunOptions opts;
  opts.fsize_limit = 100;
  RunResult direct = run(argv, opts);
  RunResult recorded = record({"-o", trace}, argv, opts);
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(behaviour_difference(direct, recorded) == "");
  CHECK(recorded.err.find("memlayout: no trace was written to " + trace +
                          ": the file size limit (RLIMIT_FSIZE, ulimit -f) of 100 bytes leaves "
                          "no room for its header\n") != std::string::npos);
  CHECK_FALSE(file_exists(trace));
}

// Two recordings into one file would interleave into a trace that reads as
// one: the second is refused while the first runs, and the first's trace
// stays whole.
TEST_CASE("record.one_file_one_recording", "[record]") {
  std::string dir = work_dir("one_file");
  std::string trace = dir + "/t.trace";
  RunResult first;
  std::thread t([&] { first = record({"-o", trace}, {program("churn"), "20000", "slow"}); });
  // Once the first program has written its header, its launcher holds the
  // lock (taken before it started the program).
  struct stat st;
  for (int i = 0; i < 500 && !(stat(trace.c_str(), &st) == 0 && st.st_size > 0); ++i)
    usleep(10 * 1000);
  RunResult second = record({"-o", trace}, {program("churn"), "10"});
  t.join();
  INFO(second.err);
  CHECK(second.exit_code() == 2);
  CHECK(second.err.find("another memlayout record (pid ") != std::string::npos);
  CHECK(first.exit_code() == 0);
  Dump d = dump(trace);
  CHECK(d.run.exit_code() == 0);
  CHECK(d.end_lines == 1);
}

// A signal handler that siglongjmps out of an allocation the recorder was
// inside leaves its mark set: the thread is never recorded again (the code
// jumped out of may hold a lock of the recorder's, which nobody will
// release). That must be counted, not silent: every event of the thread
// from then on is lost, and the summary and report say how many. (It said
// "0 lost" with nearly all of the last 200 000 events missing.) Where no
// jump happened to land inside the recorder, all of them are in the trace.
// Jumping out of glibc's malloc is undefined, and the program alone dies of
// it now and then (SIGSEGV, more often on a loaded machine): a run that did
// not finish says nothing, and the next one is tried.
TEST_CASE("signals.siglongjmp_out_of_an_allocation_counts_what_it_loses", "[record][signal]") {
  std::string dir = work_dir("signals_siglongjmp");
  std::string trace = dir + "/t.trace";
  std::string prog = build_c_program(
      dir, "jump",
      "#include <setjmp.h>\n#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
      "#include <sys/time.h>\n"
      "void *volatile sink;\nstatic sigjmp_buf jb;\nstatic volatile int jumps;\n"
      "static void on_prof(int s) {\n  (void)s;\n  jumps++;\n  siglongjmp(jb, 1);\n}\n"
      "int main(void) {\n  signal(SIGPROF, on_prof);\n"
      "  struct itimerval t = {{0, 100}, {0, 100}};\n  setitimer(ITIMER_PROF, &t, 0);\n"
      "  long done = 0;\n  while (jumps < 50)\n    if (sigsetjmp(jb, 1) == 0)\n"
      "      for (;;) {\n        void *p = malloc(done % 1000 + 1);\n        sink = p;\n"
      "        free(p);\n        done++;\n      }\n"
      "  struct itimerval off = {{0, 0}, {0, 0}};\n  setitimer(ITIMER_PROF, &off, 0);\n"
      "  for (int i = 0; i < 100000; i++) {\n    void *q = malloc(7777);\n    sink = q;\n"
      "    free(q);\n  }\n  printf(\"jumps=%d\\n\", jumps);\n  return 0;\n}\n",
      {"-O2"});
  RunResult rec;
  for (int attempt = 0; attempt < 8; ++attempt)
    if (rec = record({"-o", trace}, {prog}); rec.exited())
      break;
  INFO(rec.err);
  REQUIRE(rec.exit_code() == 0);
  CHECK(rec.out == "jumps=50\n");
  RunResult d = run({memlayout_bin(), "dump", trace});
  REQUIRE(d.exit_code() == 0);
  long last = 0; // the 7777-byte allocations and frees in the trace
  for (size_t at = d.out.find(" 7777/"); at != std::string::npos; at = d.out.find(" 7777/", at + 1))
    ++last;
  long lost = 0;
  if (size_t at = rec.err.find(" lost)"); at != std::string::npos) {
    size_t from = rec.err.rfind(", ", at) + 2;
    double v = std::atof(rec.err.c_str() + from);
    char unit = rec.err[rec.err.find(' ', from) + 1];
    lost = static_cast<long>(v * (unit == 'k' ? 1e3 : unit == 'M' ? 1e6 : 1));
  }
  INFO("7777-byte events in the trace: " << last << ", lost: " << lost);
  CHECK(last + lost >= 200000);
}
