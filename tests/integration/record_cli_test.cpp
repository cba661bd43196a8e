// `memlayout record` given bad input, and when the trace cannot be written:
// clear errors before the program starts, the shell's conventions for
// commands that cannot run, and a program that carries on unharmed when the
// disk fills up under its trace.
#include "support.h"
#include "trace_format.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlt;

namespace {

const char *kTouch = "/usr/bin/touch";

} // namespace

// an unwritable trace path is an error before the program starts
TEST_CASE("cli.unwritable_output", "[record][cli]") {
  std::string dir = work_dir("cli_unwritable");
  std::string marker = dir + "/program-ran";
  // A directory that does not exist; a path that is a directory.
  const std::string out =
      GENERATE(as<std::string>{}, "/nonexistent-memlayout-dir/out.trace", "DIR");
  std::string path = out == "DIR" ? dir : out;
  CAPTURE(path);
  RunResult r = record({"-o", path}, {kTouch, marker});
  CHECK(r.exit_code() == 2);
  CHECK_FALSE(file_exists(marker));
  CHECK(r.out == "");
  CHECK(r.err.find("memlayout") != std::string::npos);
  CHECK(r.err.find(path) != std::string::npos);
}

// usage errors exit 2 without running anything
TEST_CASE("cli.usage_errors", "[record][cli]") {
  std::string dir = work_dir("cli_usage");
  std::string marker = dir + "/program-ran";
  const std::vector<std::string> args =
      GENERATE(as<std::vector<std::string>>{},
               std::vector<std::string>{"--no-such-option", "--", kTouch, "M"},
               std::vector<std::string>{"--allocator", "tcmalloc", "--", kTouch, "M"},
               std::vector<std::string>{"--allocator"},
               std::vector<std::string>{"--stack-depth", "0", "--", kTouch, "M"},
               std::vector<std::string>{"--stack-depth", "65", "--", kTouch, "M"},
               std::vector<std::string>{"--unwind", "guess", "--", kTouch, "M"},
               std::vector<std::string>{"-o"},
               std::vector<std::string>{"-o", "", "--", kTouch, "M"}, std::vector<std::string>{},
               std::vector<std::string>{"--"}, std::vector<std::string>{"-o", "x.trace"});
  std::vector<std::string> argv = {memlayout_bin(), "record"};
  for (const std::string &a : args)
    argv.push_back(a == "M" ? marker : a);
  CAPTURE(argv);
  RunOptions opts;
  opts.cwd = dir;
  RunResult r = run(argv, opts);
  CHECK(r.exit_code() == 2);
  CHECK(r.err.find("memlayout record: ") == 0);
  CHECK(r.err.find("Run 'memlayout record --help' for the options.") != std::string::npos);
  CHECK_FALSE(file_exists(marker));
  CHECK(list_dir(dir).empty()); // no trace file either
}

// --help prints the usage on stdout
TEST_CASE("cli.help", "[record][cli]") {
  RunResult r = run({memlayout_bin(), "record", "--help"});
  CHECK(r.exit_code() == 0);
  CHECK(r.out.find("Usage: memlayout record [OPTIONS] [--] COMMAND [ARGS...]") !=
        std::string::npos);
  CHECK(r.out.find("--follow-children") != std::string::npos);
  // run takes record's options only to say whose they are.
  RunResult run_help = run({memlayout_bin(), "run", "--help"});
  CHECK(run_help.exit_code() == 0);
  CHECK(run_help.out.find("--unwind") == std::string::npos);
  // Except the one that applies: the rules reach the programs it starts.
  CHECK(run_help.out.find("--follow-children") != std::string::npos);
  RunResult misused = run({memlayout_bin(), "run", "-o", "x.trace", "--", "true"});
  CHECK(misused.exit_code() == 2);
  CHECK(misused.err.find("'--output' is an option of memlayout record") != std::string::npos);
}

// a command that cannot run exits like the shell (127, 126)
TEST_CASE("cli.cannot_run", "[record][cli]") {
  std::string dir = work_dir("cli_cannot_run");
  std::string not_exec = dir + "/not-executable.sh";
  {
    FILE *f = std::fopen(not_exec.c_str(), "w");
    REQUIRE(f);
    std::fputs("#!/bin/sh\necho hi\n", f);
    std::fclose(f);
    chmod(not_exec.c_str(), 0644);
  }
  struct Case {
    std::string command;
    int status;
    std::vector<std::string> message; // any of
  };
  const Case c = GENERATE_COPY(values<Case>({
      {"no-such-command-memlayout-test", 127, {"command not found"}},
      {dir + "/missing/prog", 127, {"No such file or directory"}}, // a path, as bash says
      {not_exec, 126, {"Permission denied"}},
      {dir, 126, {"Is a directory"}},
  }));
  CAPTURE(c.command);
  std::string trace = dir + "/out.trace";
  RunResult r = record({"-o", trace}, {c.command, "arg"});
  // The shell's behaviour: `sh -c 'CMD arg'` gives the same status.
  RunResult sh = run({"/bin/sh", "-c", "'" + c.command + "' arg"});
  CHECK(sh.exit_code() == c.status);
  CHECK(r.exit_code() == c.status);
  CHECK(r.out == "");
  CHECK(r.err.find(c.command) != std::string::npos);
  bool message = std::any_of(c.message.begin(), c.message.end(), [&](const std::string &m) {
    return r.err.find(m) != std::string::npos;
  });
  INFO(r.err);
  CHECK(message);
  CHECK_FALSE(file_exists(trace)); // nothing recorded, nothing left behind
}

namespace {

// The disk-full checks: the program's output and status as without us, the
// trace readable up to where it stops and reported truncated.
void check_write_failure(const RunResult &direct, const RunResult &recorded,
                         const std::string &trace) {
  INFO("memlayout record stderr:\n" << recorded.err);
  CHECK(direct.exit_code() == 0);
  CHECK(recorded.out == direct.out);
  CHECK(recorded.describe() == direct.describe());
  // The recorder may say on stderr that it stopped; nothing else is added.
  std::string err = program_stderr(recorded.err);
  size_t foreign = 0;
  for (size_t pos = 0; pos < err.size();) {
    size_t nl = err.find('\n', pos);
    std::string line = err.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    foreign += line.find("memlayout") == std::string::npos;
    pos = nl == std::string::npos ? err.size() : nl + 1;
  }
  CHECK(foreign == 0);
  Dump d = dump(trace, false);
  INFO("memlayout dump stderr:\n" << d.run.err);
  CHECK(d.run.exit_code() == 1); // truncated: printed what it could
  CHECK(d.header_int("pid").has_value());
  CHECK(d.run.err.find("truncated") != std::string::npos);
}

} // namespace

// a write error mid-run (file size limit) leaves the program unharmed
TEST_CASE("cli.write_error", "[record][cli][diskfull]") {
  // RLIMIT_FSIZE: write() fails with EFBIG past 64 KiB, as it would with
  // ENOSPC on a full disk. The program writes no files. With SIGXFSZ at its
  // default action the kernel's signal for our write would kill the program:
  // the recorder must keep it away.
  const bool ignore_sigxfsz = GENERATE(true, false);
  CAPTURE(ignore_sigxfsz);
  std::string dir = work_dir(ignore_sigxfsz ? "cli_fsize_ign" : "cli_fsize_dfl");
  std::string trace = dir + "/out.trace";
  std::vector<std::string> argv = {program("churn"), "300000"};
  RunResult direct = run(argv);
  RunOptions opts;
  opts.fsize_limit = 64 * 1024;
  opts.ignore_sigxfsz = ignore_sigxfsz;
  RunResult recorded = record({"-o", trace}, argv, opts);
  check_write_failure(direct, recorded, trace);
  struct stat st;
  REQUIRE(stat(trace.c_str(), &st) == 0);
  CHECK(st.st_size <= 64 * 1024);
}

namespace {

// The uncompressed sizes of a trace's event blocks, read from its record
// headers.
std::vector<uint32_t> event_block_sizes(const std::string &path) {
  namespace trace = memlayout::trace;
  std::string b = read_file(path);
  std::vector<uint32_t> sizes;
  trace::FileHeader fh;
  if (b.size() < sizeof fh)
    return sizes;
  std::memcpy(&fh, b.data(), sizeof fh);
  for (size_t at = fh.header_bytes; at + sizeof(trace::RecordHeader) <= b.size();) {
    trace::RecordHeader h;
    std::memcpy(&h, b.data() + at, sizeof h);
    if (h.magic != trace::kRecordMagic)
      break;
    if (h.type == static_cast<uint8_t>(trace::RecordType::kEvents))
      sizes.push_back(h.raw_bytes);
    at += sizeof h + h.payload_bytes;
  }
  return sizes;
}

} // namespace

// a thread that fills its blocks quickly gets larger ones, up to
// MEMLAYOUT_BLOCK_KIB; one that allocates now and then keeps the first size
TEST_CASE("record.block_sizes_follow_the_rate_of_events", "[record][cli]") {
  std::string dir = work_dir("block_sizes");
  constexpr uint32_t kSlack = 4096; // the longest event may start just before the end
  auto largest = [](const std::vector<uint32_t> &v) {
    return v.empty() ? 0u : *std::max_element(v.begin(), v.end());
  };
  SECTION("a busy thread's blocks grow to 256 KiB") {
    RunResult r = record({"-o", dir + "/busy.trace"}, {program("churn"), "300000"});
    REQUIRE(r.exit_code() == 0);
    std::vector<uint32_t> sizes = event_block_sizes(dir + "/busy.trace");
    REQUIRE(sizes.size() >= 3);
    CHECK(sizes.front() <= 64 * 1024 + kSlack);
    CHECK(largest(sizes) > 128 * 1024);
    CHECK(largest(sizes) <= 256 * 1024 + kSlack);
  }
  SECTION("MEMLAYOUT_BLOCK_KIB bounds them") {
    RunOptions opts;
    opts.setenv.push_back({"MEMLAYOUT_BLOCK_KIB", "16"});
    RunResult r = record({"-o", dir + "/small.trace"}, {program("churn"), "100000"}, opts);
    REQUIRE(r.exit_code() == 0);
    std::vector<uint32_t> sizes = event_block_sizes(dir + "/small.trace");
    REQUIRE(sizes.size() >= 10);
    CHECK(largest(sizes) <= 16 * 1024 + kSlack);
  }
  SECTION("a thread allocating every few microseconds keeps 64 KiB blocks") {
    RunResult r = record({"-o", dir + "/slow.trace"}, {program("churn"), "14000", "slow"});
    REQUIRE(r.exit_code() == 0);
    std::vector<uint32_t> sizes = event_block_sizes(dir + "/slow.trace");
    REQUIRE(sizes.size() >= 2);
    CHECK(largest(sizes) <= 64 * 1024 + kSlack);
  }
}

// a full file system mid-run (64 KiB tmpfs) leaves the program unharmed
TEST_CASE("cli.disk_full", "[record][cli][diskfull]") {
  // a mount left behind by an interrupted run would keep work_dir from emptying
  umount2((std::string(MLT_WORK_DIR) + "/cli_tmpfs/small").c_str(), MNT_DETACH);
  std::string dir = work_dir("cli_tmpfs");
  std::string mnt = dir + "/small";
  REQUIRE(mkdir(mnt.c_str(), 0755) == 0);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0) {
    WARN("skipped: cannot mount a small tmpfs here (needs root): " << std::strerror(errno));
    return;
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  std::string trace = mnt + "/out.trace";
  std::vector<std::string> argv = {program("churn"), "300000"};
  RunResult direct = run(argv);
  RunResult recorded = record({"-o", trace}, argv);
  check_write_failure(direct, recorded, trace);
}

// an install whose path LD_PRELOAD cannot carry (a space, a colon) is
// refused with the reason, not run unrecorded with status 0
TEST_CASE("cli.preload_path_with_a_space", "[record][cli]") {
  std::string dir = work_dir("cli_preload_space");
  std::string spaced = dir + "/my tools";
  REQUIRE(mkdir(spaced.c_str(), 0755) == 0);
  std::string link = spaced + "/libmemlayout_preload.so";
  std::string bin = memlayout_bin();
  std::string preload = bin.substr(0, bin.rfind('/')) + "/../lib/libmemlayout_preload.so";
  REQUIRE(file_exists(preload));
  REQUIRE(symlink(preload.c_str(), link.c_str()) == 0);
  for (const std::string command : {"record", "run"}) {
    RunOptions opts;
    opts.setenv.push_back({"MEMLAYOUT_PRELOAD_LIBRARY", link});
    std::vector<std::string> argv = {memlayout_bin(),  command, "-o", dir + "/t.trace", "--",
                                     program("churn"), "10"};
    if (command == "run")
      argv.erase(argv.begin() + 2, argv.begin() + 4);
    RunResult r = run(argv, opts);
    INFO(command << ": " << r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find("memlayout: the preload library's path '" + link +
                     "' has a space or a colon, which LD_PRELOAD cannot carry") !=
          std::string::npos);
    CHECK(r.out.empty()); // the program did not run
  }
}

// MEMLAYOUT_PRELOAD_LIBRARY naming nothing loadable: refused with the path
// and the reason, not run unrecorded with the loader's error on its stderr
TEST_CASE("cli.preload_library_that_cannot_load", "[record][cli]") {
  std::string dir = work_dir("cli_preload_bad");
  std::string text = dir + "/not_a_library.so";
  { std::ofstream(text) << "not ELF\n"; }
  for (const std::string &lib : {dir + "/missing.so", text}) {
    RunOptions opts;
    opts.setenv.push_back({"MEMLAYOUT_PRELOAD_LIBRARY", lib});
    RunResult r = run(
        {memlayout_bin(), "record", "-o", dir + "/t.trace", "--", program("churn"), "10"}, opts);
    INFO(r.err);
    CHECK(r.exit_code() == 2);
    CHECK(r.err.find("memlayout: MEMLAYOUT_PRELOAD_LIBRARY=" + lib + ": ") != std::string::npos);
    CHECK(r.out.empty()); // the program did not run
  }
}

// the trace lands where -o says, or at a predictable default
TEST_CASE("cli.trace_name", "[record][cli]") {
  std::string dir = work_dir("cli_default_name");
  RunOptions opts;
  opts.cwd = dir;
  RunResult r = record({}, {program("churn"), "1000"}, opts);
  REQUIRE(r.exit_code() == 0);
  std::vector<std::string> names = list_dir(dir);
  REQUIRE(names.size() == 1);
  CHECK(names[0].rfind("memlayout.mlt_churn.", 0) == 0);
  CHECK(names[0].size() > 6);
  CHECK(names[0].compare(names[0].size() - 6, 6, ".trace") == 0);
  CHECK(r.err.find(names[0]) != std::string::npos);
  // relative -o is relative to the caller's directory
  RunResult rel = record({"-o", "sub.trace"}, {program("churn"), "1000"}, opts);
  REQUIRE(rel.exit_code() == 0);
  CHECK(file_exists(dir + "/sub.trace"));
}

// every unwind method and stack depth names the allocating function
TEST_CASE("cli.unwind_methods", "[record][cli][unwind]") {
  const std::string method = GENERATE(as<std::string>{}, "cfi", "fp", "dwarf");
  const int depth = GENERATE(1, 8);
  CAPTURE(method, depth);
  std::string dir = work_dir("cli_unwind_" + method + "_" + std::to_string(depth));
  std::string trace = dir + "/out.trace", log_path = dir + "/program.log";
  RunResult r = record({"-o", trace, "--unwind", method, "--stack-depth", std::to_string(depth)},
                       {program("exec_child"), log_path, "unwind"});
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  Dump d = dump(trace);
  INFO(d.run.err);
  REQUIRE(d.run.exit_code() == 0);
  CHECK(d.header_int("stack_depth") == depth);
  ProgramLog log = read_log(log_path);
  std::vector<std::string> missing = missing_from_dump(log, d);
  INFO(join(missing));
  CHECK(missing.empty());
  for (const Event &e : d.events) {
    if (e.ev != "alloc" || !same_function(e.innermost(), "mlc_child_alloc"))
      continue;
    size_t real_frames = static_cast<size_t>(
        std::count_if(e.frames.begin(), e.frames.end(), [](const Frame &f) { return !f.inlined; }));
    CHECK(real_frames <= static_cast<size_t>(depth));
    // The caller's caller: exact unwinders find main without frame pointers.
    if (depth > 1 && method != "fp") {
      REQUIRE(e.frames.size() >= 2);
      CHECK(e.frames[1].function == "main");
    }
    break;
  }
}

// --no-page-frames: snapshots of the memory map without physical frames
TEST_CASE("cli.no_page_frames", "[record][cli]") {
  std::string dir = work_dir("cli_no_page_frames");
  RunResult r = record({"-o", dir + "/out.trace", "--no-page-frames"}, {program("churn"), "5000"});
  REQUIRE(r.exit_code() == 0);
  Dump d = dump(dir + "/out.trace", false);
  REQUIRE(d.run.exit_code() == 0);
  REQUIRE_FALSE(d.map_pfns.empty());
  for (bool pfns : d.map_pfns)
    CHECK_FALSE(pfns);
  if (geteuid() == 0) { // only root can read page frames
    RunResult with = record({"-o", dir + "/with.trace"}, {program("churn"), "5000"});
    REQUIRE(with.exit_code() == 0);
    Dump w = dump(dir + "/with.trace", false);
    REQUIRE_FALSE(w.map_pfns.empty());
    CHECK(w.map_pfns.back());
  }
}

// Every command declares its options in one table: help, errors and exit
// codes alike.
TEST_CASE("cli.every_command_alike", "[cli]") {
  const std::string cmd = GENERATE(as<std::string>{}, "record", "run", "compare", "dump", "report",
                                   "diff", "advise", "replay", "structs");
  CAPTURE(cmd);
  RunResult help = run({memlayout_bin(), cmd, "--help"});
  CHECK(help.exit_code() == 0);
  CHECK(help.out.find("Usage: memlayout " + cmd) != std::string::npos);
  CHECK(help.err.empty());
  RunResult bogus = run({memlayout_bin(), cmd, "--bogus-option", "x"});
  CHECK(bogus.exit_code() == 2);
  CHECK(bogus.err.find("memlayout " + cmd + ": unknown option '--bogus-option'") == 0);
  CHECK(bogus.err.find("Run 'memlayout " + cmd + " --help' for the options.") != std::string::npos);
  CHECK(bogus.out.empty());
}

// The trees' programs declare theirs on the same option table: the same help,
// wording and exit codes as memlayout's commands.
TEST_CASE("cli.bench_programs_alike", "[cli]") {
  const std::string name = GENERATE(as<std::string>{}, "memlayout-bench", "ycsb-lite");
  const std::string bin = name == "ycsb-lite" ? MLT_YCSB : MLT_BENCH;
  CAPTURE(name);
  RunResult help = run({bin, "--help"});
  CHECK(help.exit_code() == 0);
  CHECK(help.out.find("Usage: " + name + " --tree NAME") != std::string::npos);
  CHECK(help.out.find("HTM trees (htm-bptree, euno-bptree)") != std::string::npos);
  CHECK(help.err.empty());
  RunResult bogus = run({bin, "--tree", "ticket", "--bogus-option", "x"});
  CHECK(bogus.exit_code() == 2);
  CHECK(bogus.err.find(name + ": unknown option '--bogus-option'") == 0);
  CHECK(bogus.err.find("Run '" + name + " --help' for the options.") != std::string::npos);
  CHECK(bogus.out.empty());
  RunResult value = run({bin, "--tree", "ticket", "--threads", "0"});
  CHECK(value.exit_code() == 2);
  CHECK(value.err.find(name + ": --threads: takes a thread count from 1 to 1024, not '0'") == 0);
  RunResult flag = run({bin, "--tree", "ticket", "--check=no"});
  CHECK(flag.exit_code() == 2);
  CHECK(flag.err.find(name + ": --check takes no value") == 0);
}

// The measuring programs refuse what they cannot measure before they run
// anything: a negative count wrapped to 2^64 had crashed or hung
// seg-pool-bench, and record-overhead ran nothing and exited 0 for an
// unknown workload or an unwritable JSON file.
TEST_CASE("cli.measuring_programs_refuse_bad_arguments", "[cli]") {
  for (const auto &argv : std::vector<std::vector<std::string>>{
           {MLT_SEG_POOL_BENCH, "--runs", "-1", "--no-threads"},
           {MLT_SEG_POOL_BENCH, "--pairs", "-1", "--runs", "1"},
           {MLT_SEG_POOL_BENCH, "--batch", "abc"},
           {MLT_RECORD_OVERHEAD, "--runs", "0"},
           {MLT_RECORD_OVERHEAD, "--runs", "-3"},
           {MLT_RECORD_OVERHEAD, "--only", "nope"},
           {MLT_RECORD_OVERHEAD, "--json", "/nonexistent/dir/x.json", "--only", "churn"},
           {MLT_RECORD_OVERHEAD, "--bogus"}}) {
    RunOptions quick;
    quick.timeout_s = 20;
    RunResult r = run(argv, quick);
    std::string args;
    for (size_t i = 1; i < argv.size(); ++i)
      args += argv[i] + " ";
    INFO(args << ": " << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code() == 2);
    CHECK_FALSE(r.err.empty());
    CHECK(r.out.find("workload") == std::string::npos); // no table: nothing was run
  }
  RunResult help = run({MLT_RECORD_OVERHEAD, "--help"});
  CHECK(help.exit_code() == 0);
  CHECK(help.out.find("--only NAME") != std::string::npos);
}

namespace {

struct SampleRuns {
  size_t events = 0, samples = 0, longest = 0; // samples: runs of one timestamp
};

// A thread's events carry the last TSC sample staged before them: each run
// of equal timestamps is the events between two samples. Of the thread's
// first `limit` events.
SampleRuns sample_runs(const Dump &d, uint64_t tid, size_t limit = SIZE_MAX) {
  SampleRuns s;
  int64_t last = -1;
  size_t run = 0;
  for (const Event &e : d.events) {
    if (e.tid != tid || (e.ev != "alloc" && e.ev != "free"))
      continue;
    if (s.events == limit)
      break;
    ++s.events;
    if (e.ts_ns != last) {
      ++s.samples;
      run = 0;
      last = e.ts_ns;
    }
    s.longest = std::max(s.longest, ++run);
  }
  return s;
}

} // namespace

// The TSC is sampled for time resolution: about every microsecond in a
// tight loop (most events share one), every 16 events or more often in a
// program that allocates now and then, and exactly as often as
// MEMLAYOUT_TICK_PERIOD says when it is set.
TEST_CASE("cli.time_sampling", "[record][cli]") {
  std::string dir = work_dir("cli_time_sampling");
  // The period grew (a tight loop, well under 1 us per 32 events on any
  // machine) and stayed within its bounds. It shrinks again where samples
  // come more than 4 us apart (a page fault, a preemption: runs of 1 to 14
  // events are seen on a VM), so most events, not all, share a sample. A loop
  // preempted often enough (the suite's other tests on 2 CPUs) looks slow:
  // up to three tries for one that ran as a tight loop does.
  SampleRuns fr;
  for (int attempt = 0; attempt < 3; ++attempt) {
    RunResult fast = record({"-o", dir + "/fast.trace"}, {program("churn"), "100000"});
    REQUIRE(fast.exit_code() == 0);
    Dump f = dump(dir + "/fast.trace", false);
    REQUIRE(f.error == "");
    CHECK(f.header_int("timestamp_period") == 128);
    fr = sample_runs(f, static_cast<uint64_t>(f.header_int("pid").value_or(0)));
    REQUIRE(fr.events >= 200000); // and stdio's buffer
    if (fr.longest > 16)
      break;
  }
  CAPTURE(fr.events, fr.samples, fr.longest);
  CHECK(fr.longest > 16);
  CHECK(fr.longest <= 128);
  CHECK(fr.samples <= fr.events / 4);

  RunResult slow = record({"-o", dir + "/slow.trace"}, {program("churn"), "2000", "slow"});
  REQUIRE(slow.exit_code() == 0);
  Dump s = dump(dir + "/slow.trace", false);
  REQUIRE(s.error == "");
  // Not its last 256 frees: a tight loop.
  SampleRuns sr = sample_runs(s, static_cast<uint64_t>(s.header_int("pid").value_or(0)), 3600);
  REQUIRE(sr.events == 3600);
  CAPTURE(sr.events, sr.samples, sr.longest);
  CHECK(sr.longest <= 16);
  CHECK(sr.samples >= sr.events / 16);
  CHECK(s.header_int("timestamp_period") == 128);

  RunOptions fixed;
  fixed.setenv = {{"MEMLAYOUT_TICK_PERIOD", "4"}};
  RunResult set = record({"-o", dir + "/set.trace"}, {program("churn"), "20000"}, fixed);
  REQUIRE(set.exit_code() == 0);
  Dump p = dump(dir + "/set.trace", false);
  REQUIRE(p.error == "");
  CHECK(p.header_int("timestamp_period") == 4);
  SampleRuns pr = sample_runs(p, static_cast<uint64_t>(p.header_int("pid").value_or(0)));
  CAPTURE(pr.events, pr.samples, pr.longest);
  CHECK(pr.longest <= 4);
  CHECK(pr.samples >= pr.events / 4);
}

// `memlayout record` loads no LLVM (its start-up would cost every recording
// ~15 ms): the recorded program reads its parent's mappings. Commands that
// need LLVM are handed to memlayout-full and work the same.
TEST_CASE("cli.launcher_loads_no_llvm", "[record][cli]") {
  std::string dir = work_dir("cli_launcher");
  RunResult r = record({"-o", dir + "/out.trace"}, {"/bin/sh", "-c", "cat /proc/$PPID/maps"});
  REQUIRE(r.exit_code() == 0);
  CHECK(r.out.find("libmemlayout") == std::string::npos); // the launcher itself is not preloaded
  CHECK(r.out.find("/memlayout") != std::string::npos);   // the maps are memlayout's
  CHECK(r.out.find("libLLVM") == std::string::npos);
  CHECK(r.out.find("libclang") == std::string::npos);
  RunResult d = run({memlayout_bin(), "dump", dir + "/out.trace"});
  CHECK(d.exit_code() == 0);
  CHECK(d.out.find("# memlayout trace") == 0);
}

// Recording again to the same path replaces the trace (the writer reopens
// it after truncating, see trace_writer.cpp); through a symlink, the file
// it names is written and the link stays.
TEST_CASE("cli.rerecord_replaces", "[record][cli]") {
  std::string dir = work_dir("cli_rerecord");
  std::string path = dir + "/out.trace";
  REQUIRE(record({"-o", path}, {program("churn"), "20000"}).exit_code() == 0);
  REQUIRE(record({"-o", path}, {program("churn"), "3000"}).exit_code() == 0);
  Dump d = dump(path, false);
  REQUIRE(d.error == "");
  CHECK(d.count("alloc") >= 3000);
  CHECK(d.count("alloc") < 3100);
  CHECK(d.end_lines == 1);

  std::string target = dir + "/target.trace", link = dir + "/link.trace";
  REQUIRE(record({"-o", target}, {program("churn"), "20000"}).exit_code() == 0);
  unlink(link.c_str());
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  REQUIRE(record({"-o", link}, {program("churn"), "3000"}).exit_code() == 0);
  struct stat st;
  REQUIRE(lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  Dump t = dump(target, false);
  REQUIRE(t.error == "");
  CHECK(t.count("alloc") >= 3000);
  CHECK(t.count("alloc") < 3100);
}

// docs/trace-format.md's worked example, byte for byte: its hexdump read back
// by `dump` gives the events the doc lists after it.
TEST_CASE("cli.trace_format_worked_example", "[record][cli]") {
  std::string doc = std::string(__FILE__);
  doc = read_file(doc.substr(0, doc.rfind("/tests/")) + "/docs/trace-format.md");
  size_t at = doc.find("## A worked example");
  REQUIRE(at != std::string::npos);
  size_t begin = doc.find("```\n", at) + 4, end = doc.find("```", begin);
  std::string bytes;
  std::istringstream lines(doc.substr(begin, end - begin));
  for (std::string line; std::getline(lines, line);) {
    // offset, then up to 16 hex bytes before the |ascii| column
    std::istringstream words(line.substr(0, line.find('|')));
    std::string word;
    words >> word;
    while (words >> word)
      bytes += static_cast<char>(std::stoi(word, nullptr, 16));
  }
  REQUIRE(bytes.size() == 0x94);
  const std::string path = work_dir("trace_format_example") + "/example.trace";
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  RunResult r = run({memlayout_bin(), "dump", path, "--format", "jsonl"});
  INFO(r.err);
  REQUIRE(r.exit_code() == 0);
  // The example has no command line field: it is omitted, not empty.
  CHECK(r.out.find("\"command_line\"") == std::string::npos);
  size_t shown = doc.find("$ memlayout dump example.trace --format jsonl", end);
  REQUIRE(shown != std::string::npos);
  std::istringstream expected(doc.substr(shown, doc.find("```", shown) - shown));
  std::string line;
  std::getline(expected, line); // the command
  std::getline(expected, line); // the header, elided in the doc
  int checked = 0;
  while (std::getline(expected, line) && !line.empty()) {
    INFO(line);
    CHECK(r.out.find(line + "\n") != std::string::npos);
    ++checked;
  }
  CHECK(checked == 4);
}

// A command line longer than the header holds ends at a whole argument and a
// last one that says it was cut, never in the middle of an argument.
TEST_CASE("cli.long_command_line_is_cut_visibly", "[record][cli]") {
  const std::string path = work_dir("long_cmdline") + "/t.trace";
  std::vector<std::string> argv = {program("edge_cases")};
  for (int i = 0; i < 20000; ++i)
    argv.push_back(std::to_string(100000 + i));
  REQUIRE(record({"-o", path}, argv).exit_code() == 0);
  RunResult d = run({memlayout_bin(), "dump", path, "--format", "jsonl"});
  REQUIRE(d.exit_code() == 0);
  std::string header = d.out.substr(0, d.out.find('\n'));
  size_t at = header.find("\"command_line\":[");
  REQUIRE(at != std::string::npos);
  size_t marker = header.find(",\"[memlayout: more arguments, cut at 8 KiB]\"]", at);
  REQUIRE(marker != std::string::npos);
  std::string list = header.substr(at, marker - at);
  // Every argument before the marker is whole: six digits.
  std::regex cut_number(R"(,"[0-9]{1,5}")");
  CHECK_FALSE(std::regex_search(list, cut_number));
}
