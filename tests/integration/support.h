// Shared by the integration tests: run programs (with and without `memlayout
// record`), read traces back through `memlayout dump --format jsonl`, and read
// the logs the test programs write (tests/programs/ml_log.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <llvm/Support/JSON.h>

namespace mlt {

// ---- paths given by CMake -------------------------------------------------------

std::string memlayout_bin();
std::string program(const std::string &name); // tests/programs/<name>
std::string plugin_path();
// A fresh empty directory for one test: <build>/tests/integration/work/<name>.
std::string work_dir(const std::string &name);
bool file_exists(const std::string &path);
std::string read_file(const std::string &path);
std::vector<std::string> list_dir(const std::string &dir); // names, sorted

// ---- running programs --------------------------------------------------------------

struct RunOptions {
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> setenv;
  std::vector<std::string> unsetenv;
  std::string stdin_data;
  long fsize_limit = -1; // RLIMIT_FSIZE in bytes; -1 leaves it alone
  bool ignore_sigxfsz = false;
  int timeout_s = 60;
  // Once this file exists, `send_signal` goes to the process run() started
  // alone, not its group: what `kill PID`, a supervisor or a cancelled CI job
  // does.
  std::string signal_when_exists;
  int send_signal = 15; // SIGTERM
};

struct RunResult {
  int status = 0; // as waitpid() gives it
  std::string out, err;
  bool timed_out = false;

  bool exited() const;
  int exit_code() const;        // -1 when it did not exit
  int term_signal() const;      // 0 when not killed by a signal
  std::string describe() const; // "exit 3" / "signal 6 (Aborted)"
};

RunResult run(const std::vector<std::string> &argv, const RunOptions &opts = {});

// `source` written to DIR/NAME.c and built by cc with `flags` into DIR/NAME,
// whose path it returns: a program shaped for one test, built as the field
// builds. Throws with the compiler's message when it does not build.
std::string build_c_program(const std::string &dir, const std::string &name,
                            const std::string &source, const std::vector<std::string> &flags);

// `memlayout record [record_args] -- argv`.
RunResult record(const std::vector<std::string> &record_args, const std::vector<std::string> &argv,
                 const RunOptions &opts = {});

// The lines `memlayout record` adds to stderr ("memlayout: N events ... -> FILE")
// taken out, so what is left is the program's own stderr.
std::string program_stderr(const std::string &recorded_stderr);

// "" when the recorded run behaved like the direct one: same stdout bytes, same
// stderr bytes apart from memlayout's summary, same exit status or signal.
// Otherwise what differs.
std::string behaviour_difference(const RunResult &direct, const RunResult &recorded);

// ---- traces --------------------------------------------------------------------------

struct Frame {
  uint64_t addr = 0;
  std::string function, file;
  int64_t line = 0;
  bool inlined = false;
};

struct Event {
  std::string ev;   // alloc, free, realloc, mark, tag, fork, snapshot, ...
  std::string api;  // alloc/free/realloc: malloc, new[](align), delete(sized), ...
  std::string name; // mark, tag
  uint64_t ptr = 0, old = 0, size = 0, usable = 0, align = 0, tid = 0, child = 0, stack = 0;
  int64_t ts_ns = 0;
  std::vector<Frame> frames; // with --symbolize: innermost first
  size_t line = 0;           // line number in the dump

  // The innermost frame's function, "" when there is none.
  const std::string &innermost() const;
};

struct Module {
  std::string what, path; // an "unloaded" record may name its module by base only
  uint64_t base = 0;
};

struct ThreadRecord {
  std::string what, name;
  uint64_t tid = 0;
};

struct Dump {
  RunResult run;     // of `memlayout dump`
  std::string error; // JSON parse errors, missing header
  llvm::json::Object header;
  std::optional<llvm::json::Object> end; // the last "end" line
  size_t end_lines = 0;
  std::vector<Event> events; // alloc, free, realloc, mark, tag, fork, ... in dump order
  std::vector<Module> modules;
  std::vector<ThreadRecord> threads;
  std::vector<bool> map_pfns;               // per memory_map snapshot: were page frames read
  std::map<std::string, size_t> line_kinds; // "ev" value -> number of lines

  std::optional<int64_t> header_int(const char *key) const;
  std::string header_str(const char *key) const; // "" when absent
  std::optional<int64_t> end_int(const char *key) const;
  bool end_is_null(const char *key) const;
  size_t count(const std::string &ev) const;
};

Dump dump(const std::string &trace, bool symbolize = true);

// Checks the heap's story told by the trace, per address: no block freed that
// was not allocated, none allocated twice while live. Addresses that only one
// thread touched are checked event by event in that thread's order; those
// shared by threads (a block freed by another thread than its allocator) only
// by counts, as events of different threads are not exactly ordered.
// Returns one line per violation.
std::vector<std::string> lifetime_errors(const Dump &d);

// Does a symbolized function name denote the function `name`? Accepts
// "name", C++'s "name(args)", "ns::name(args)" and compiler clones ("name.cold").
bool same_function(const std::string &symbolized, const std::string &name);

// ---- the test programs' logs (ml_log.h) ---------------------------------------------

struct LogEntry {
  char kind = 0; // A R F T P
  std::string api, fn, role;
  uint64_t ptr = 0, old = 0, size = 0, usable = 0, align = 0, tid = 0;
  long pid = 0, ppid = 0;
};

struct ProgramLog {
  std::vector<LogEntry> entries;
  long pid = 0, ppid = 0;
  bool dropped = false;
  size_t count(char kind) const;
};

ProgramLog read_log(const std::string &path);

// Finds every 'A'/'R' entry of the log in the dump as an alloc/realloc event
// with the same api, pointer(s), size, thread, innermost function (and usable
// size and alignment where the log has them), and every 'F' entry as a free of
// that pointer by that thread. Returns one line per entry not found (empty:
// all found). Each dump event matches at most one log entry.
std::vector<std::string> missing_from_dump(const ProgramLog &log, const Dump &d,
                                           bool check_free_api = true);

std::string hex(uint64_t v);
std::string join(const std::vector<std::string> &lines, size_t max_lines = 20);

// What `memlayout run` says rule `fn` (function=fn,...) routed: the
// allocations of its summary line; -1 when no such line.
long long routed_by(const std::string &stderr_text, const std::string &fn);

} // namespace mlt
