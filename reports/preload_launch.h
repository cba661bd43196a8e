// Starting a program under the preload: what `record`, `run` and `compare`
// share. The child side sets the environment the interposer reads (see
// ldpreload/options.cpp) and execs; the parent waits like system() does.
#pragma once

#include <csignal>
#include <string>
#include <sys/resource.h>
#include <sys/types.h>
#include <vector>

namespace memlayout::cli {

// The directory of the running memlayout binary.
std::string self_dir();
// libmemlayout_preload.so: MEMLAYOUT_PRELOAD_LIBRARY, else ../lib beside us.
std::string find_preload();
// The same, or "" with the reason on stderr: not found, or on a path that
// LD_PRELOAD cannot carry (the loader splits it at spaces and colons, and
// would run the program unrecorded).
std::string preload_for_launch();

struct PreloadEnv {
  std::string preload;      // the library
  std::string mode = "run"; // "record" or "run"
  std::string allocator = "native";
  std::string rules_text;  // MEMLAYOUT_RULES; empty: none
  std::string route_table; // MEMLAYOUT_ROUTE_TABLE
  std::string rule_stats;  // MEMLAYOUT_RULE_STATS
};

// In the child, before exec: LD_PRELOAD (ahead of any the user set) and the
// interposer's variables; variables of a previous run are cleared.
void apply_preload_env(const PreloadEnv &env);

// An empty file of our own, $TMPDIR/STEM.XXXXXX (else in /tmp), by an
// absolute path: the program's processes reach it whatever directory they
// change to. "" when none can be made.
std::string temp_file(const char *stem);

// While the launcher waits for the program it runs, as perf and heaptrack
// do: SIGINT and SIGQUIT are ignored (the terminal sends them to the whole
// foreground group: they are for the program), and SIGTERM, SIGHUP, SIGUSR1,
// SIGUSR2 and SIGALRM, which `kill PID`, a supervisor or a cancelled CI job
// send to the launcher alone, are passed on to the program, which then ends
// (or not) as it would have without us.
class ChildSignals {
public:
  explicit ChildSignals(pid_t child);
  ~ChildSignals();
  ChildSignals(const ChildSignals &) = delete;
  ChildSignals &operator=(const ChildSignals &) = delete;

private:
  struct sigaction old_int_ {
  }, old_quit_{}, old_forwarded_[5]{};
  pid_t old_child_ = 0;
};

// Waits for `pid` under ChildSignals; returns the wait status and fills
// *usage when given.
int wait_child(pid_t pid, struct rusage *usage = nullptr);

// The file execvp would run for `program`: itself when it has a '/', else
// the first executable of that name in PATH; "" when there is none.
std::string find_in_path(const std::string &program);

// Why `command` could not be run, exec having failed with `error`, in the
// words a shell uses: "command not found" for a name looked up in PATH,
// "No such file or directory" for a path, "Is a directory".
std::string exec_failure(const char *command, int error);

// What `memlayout __measure FD -- PROGRAM ARGS...` writes to FD once PROGRAM
// ends. The measuring process is the small `memlayout` executable: a child's
// peak RSS (ru_maxrss) includes what its parent had mapped when it forked,
// and memlayout-full, with LLVM loaded, carries ~50 MB that a program forked
// from it would be charged (compare's figures had that floor).
struct MeasuredRun {
  int32_t exec_error = 0; // errno of the failed exec, 0 when it ran
  int32_t status = 0;     // as wait4 gives it
  int64_t wall_ns = 0, utime_us = 0, stime_us = 0, maxrss_kib = 0;
};
int measure_main(int argc, char **argv);
// The LD_PRELOAD the measured program gets, kept out of the measurer's own.
inline constexpr const char *kMeasuredPreloadEnv = "MEMLAYOUT_MEASURED_LD_PRELOAD";

} // namespace memlayout::cli
