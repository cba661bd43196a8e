// memlayout record: run a program under the preload and leave its trace.
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "preload_launch.h"
#include "preload_reach.h"
#include "record_rules.h"
#include "trace_reader.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace memlayout::cli {
namespace {

struct Options {
  std::string output;
  std::string allocator = "native";
  std::string unwind = "cfi";
  int stack_depth = 8;
  bool follow_children = false;
  bool no_page_frames = false;
  RuleArgs rules;
  std::string types_file;            // --types MAP for type= rules
  inspector::WrapperPolicy wrappers; // --wrapper, --not-wrapper
  std::vector<std::string> program;
  std::vector<char *> command; // program, for execvp
};

// `record` and `run` share their launcher; run records nothing.
bool g_run_mode = false;

// Returns -1 when parsing succeeded, else the exit status to return.
int parse(int argc, char **argv, Options &o) {
  auto app = make_command(
      g_run_mode ? "run" : "record",
      g_run_mode ? "Runs COMMAND with segregation rules applied and nothing recorded: the\n"
                   "allocations whose sites the rules name come from their pools, padded or\n"
                   "aligned as the rules say, and one line per rule at exit says what it routed.\n"
                   "Without rules it runs COMMAND on the same allocator, untouched: the baseline\n"
                   "to compare a fix with (see memlayout compare). COMMAND's output and exit\n"
                   "status are its own."
                 : "Runs COMMAND with every heap allocation recorded: address, requested and\n"
                   "usable size, thread, time and call stack, plus loaded modules and page\n"
                   "frames. COMMAND's output and exit status are its own. Forked children write\n"
                   "FILE with .PID inserted before the extension; with --follow-children an image\n"
                   "replaced by exec continues in FILE.PID.N.",
      std::string("Usage: memlayout ") + (g_run_mode ? "run" : "record") +
          " [OPTIONS] [--] COMMAND [ARGS...]");
  // record's own options; run takes them only to say they are record's.
  const std::string group = g_run_mode ? "" : "Options";
  std::vector<CLI::Option *> record_only = {
      app->add_option("-o,--output", o.output, "trace file (default memlayout.PROGRAM.PID.trace)")
          ->type_name("FILE")
          ->check(a_path())
          ->group(group),
      app->add_option("--stack-depth", o.stack_depth, "frames recorded per call site")
          ->check(CLI::Range(1, 64).description(""))
          ->type_name("1-64")
          ->capture_default_str()
          ->group(group),
      app->add_option("--unwind", o.unwind,
                      "cfi: exact, cached .eh_frame rules; fp: frame pointers; dwarf: libgcc, slow")
          ->check(one_of({"cfi", "fp", "dwarf"}))
          ->type_name("cfi|fp|dwarf")
          ->capture_default_str()
          ->group(group),
      app->add_flag("--no-page-frames", o.no_page_frames,
                    "do not read physical frames at snapshots")
          ->group(group)};
  add_allocator_option(*app, o.allocator,
                       g_run_mode ? "native (default): the program's own allocator, for what the "
                                    "rules leave alone; jemalloc: jemalloc 5.3"
                                  : "native (default): the program's own allocator; jemalloc: "
                                    "serve it from jemalloc 5.3, the BST study's");
  app->add_flag("--follow-children", o.follow_children,
                g_run_mode ? "also apply the rules to programs COMMAND executes"
                           : "also record programs COMMAND executes");
  add_rule_options(*app, o.rules);
  app->add_option("--types", o.types_file,
                  "type map for type= rules (default: PROGRAM's .memlayout-types.json beside it)")
      ->type_name("MAP");
  add_wrapper_options(*app, o.wrappers.wrappers, o.wrappers.not_wrappers);
  if (int rc = parse_command_with_program(*app, argc, argv, o.program); rc >= 0)
    return rc;
  if (g_run_mode)
    for (const CLI::Option *opt : record_only)
      if (opt->count())
        return usage_error(*app, "'" +
                                     (opt->get_lnames().empty() ? "-" + opt->get_snames()[0]
                                                                : "--" + opt->get_lnames()[0]) +
                                     "' is an option of memlayout record");
  if (o.program.empty())
    return usage_error(*app, g_run_mode ? "no command to run" : "no command to record");
  for (auto &arg : o.program)
    o.command.push_back(arg.data());
  o.command.push_back(nullptr);
  return -1;
}

std::string absolute(const std::string &path) {
  if (!path.empty() && path[0] == '/')
    return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd))
    return path;
  return std::string(cwd) + "/" + path;
}

std::string basename_of(const char *path) {
  const char *s = std::strrchr(path, '/');
  return s ? s + 1 : path;
}

// What the child tells the parent through a close-on-exec pipe when it could
// not start the program.
struct ChildFailure {
  int stage; // 1: trace file, 2: exec
  int error;
};

struct TraceSummary {
  bool complete = false;
  bool ended_by_exec = false; // the image replaced itself (its last end record says so)
  uint64_t events = 0, allocs = 0, bytes = 0, file_bytes = 0, lost = 0;
  std::string executable;
  std::optional<inspector::StopRecord> stopped; // why the recorder stopped writing early
};

// The reader's prescan: record headers and tables, no event block decoded.
TraceSummary summarize(const std::string &path) {
  TraceSummary s;
  inspector::TraceReader r;
  if (!r.open(path))
    return s;
  s.file_bytes = r.file_size();
  s.executable = r.header().executable;
  s.stopped = r.stopped();
  if (const auto &end = r.final_end()) {
    s.complete = true;
    s.ended_by_exec = end->reason == trace::EndReason::kExec;
    s.events = end->events;
    s.allocs = end->allocs;
    s.bytes = end->bytes_allocated;
    s.lost = end->lost_events;
  } else {
    s.events = r.block_event_count();
  }
  return s;
}

std::string human(double v, const char *unit) {
  const char *prefix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  const char *sep = (i || *unit) ? " " : "";
  std::snprintf(buf, sizeof buf, i ? "%.1f%s%s%s" : "%.0f%s%s%s", v, sep, prefix[i], unit);
  return buf;
}

// The file system holding `path` has no room left for its user.
bool file_system_full(const std::string &path) {
  std::string dir = path.substr(0, path.rfind('/') + 1);
  struct statvfs fs;
  return statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0 && fs.f_bavail == 0;
}

// RLIMIT_FSIZE as the launcher runs under it (the program inherited it, as
// from `ulimit -f`), in bytes; 0 when there is none.
uint64_t inherited_file_size_limit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  return rl.rlim_cur;
}

// Why a trace with no end record ends where it does. The recorder says so in
// a stop record where the file size limit cut it; one without (that write
// failed too) that is as large as the limit the launcher runs under, which
// the program inherited, was cut by that limit all the same.
std::string cut_short_cause(const TraceSummary &s, const std::string &path) {
  if (s.stopped)
    return inspector::stop_cause_text(*s.stopped);
  if (uint64_t limit = inherited_file_size_limit(); limit && s.file_bytes >= limit)
    return inspector::stop_cause_text({trace::StopCause::kFileSizeLimit, limit, s.file_bytes});
  if (file_system_full(path))
    return "the file system holding it is full";
  return "the program did not finish writing it";
}

void print_summary_line(const TraceSummary &s, const std::string &path) {
  // Without an end record the totals are unknown; the blocks tell the events.
  std::string incomplete = s.complete ? "" : " (incomplete: " + cut_short_cause(s, path) + ")";
  std::string totals =
      s.complete ? " (" + human(static_cast<double>(s.allocs), "") + " allocations, " +
                       human(static_cast<double>(s.bytes), "B") +
                       (s.lost ? ", " + human(static_cast<double>(s.lost), "") + " lost" : "") + ")"
                 : "";
  std::fprintf(stderr, "memlayout: %s events%s, %s trace, %.2f B/event%s -> %s\n",
               human(static_cast<double>(s.events), "").c_str(), totals.c_str(),
               human(static_cast<double>(s.file_bytes), "B").c_str(),
               s.events ? static_cast<double>(s.file_bytes) / static_cast<double>(s.events) : 0.0,
               incomplete.c_str(), path.c_str());
}

// The trace of the pid's Nth image after the root process's first.
std::string exec_trace_path(const std::string &root_trace, pid_t pid, uint32_t generation) {
  std::vector<char> buf(root_trace.size() + 32);
  if (!trace::process_trace_path(root_trace.c_str(), static_cast<uint32_t>(pid), generation,
                                 buf.data(), buf.size()))
    return {};
  return buf.data();
}

// The traces of other processes of the recording: FILE with ".PID" (and
// ".N") before its extension (trace::process_trace_path), written since
// `since`; the root pid's own images after exec are said elsewhere.
std::vector<std::string> child_traces(const std::string &root_trace, pid_t root_pid,
                                      const timespec &since) {
  size_t slash = root_trace.rfind('/');
  size_t name_at = slash == std::string::npos ? 0 : slash + 1;
  size_t cut = trace::process_trace_path_cut(root_trace.c_str());
  std::string dir = slash == std::string::npos ? "." : root_trace.substr(0, slash);
  std::string stem = root_trace.substr(name_at, cut - name_at);
  std::string ext = root_trace.substr(cut);
  std::string own = stem + "." + std::to_string(root_pid) + ".";
  std::vector<std::string> out;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return out;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() <= stem.size() + 1 + ext.size() || n.compare(0, stem.size() + 1, stem + ".") ||
        n.compare(n.size() - ext.size(), ext.size(), ext) || n.rfind(own, 0) == 0)
      continue;
    // PID or PID.N between them, digits only.
    std::string mid = n.substr(stem.size() + 1, n.size() - stem.size() - 1 - ext.size());
    size_t inner = mid.find('.');
    auto digits = [](const std::string &s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(mid.substr(0, inner)) ||
        (inner != std::string::npos && !digits(mid.substr(inner + 1))))
      continue;
    struct stat st;
    std::string full = dir + "/" + n;
    if (stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtim.tv_sec < since.tv_sec ||
        (st.st_mtim.tv_sec == since.tv_sec && st.st_mtim.tv_nsec < since.tv_nsec))
      continue;
    out.push_back(full);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A program a process of the command started without recording it: a line
// the preload appended to the MEMLAYOUT_NOTES file ("PID\tHOW\tPROGRAM").
struct UnrecordedStart {
  pid_t pid = 0;
  // exec, spawn, system, popen; unrecordable-exec, unrecordable-spawn: a
  // program no loader preloads memlayout into, started so
  std::string how;
  bool unrecordable() const { return how.starts_with("unrecordable-"); }
  std::string program;
};

// Reads and removes the notes file.
std::vector<UnrecordedStart> take_notes(const std::string &path) {
  std::vector<UnrecordedStart> out;
  if (path.empty())
    return out;
  FILE *f = std::fopen(path.c_str(), "r");
  if (f) {
    char line[2048];
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line);
      if (!l.empty() && l.back() == '\n')
        l.pop_back();
      size_t a = l.find('\t'), b = a == std::string::npos ? a : l.find('\t', a + 1);
      if (b == std::string::npos)
        continue;
      UnrecordedStart u;
      u.pid = static_cast<pid_t>(std::atol(l.substr(0, a).c_str()));
      u.how = l.substr(a + 1, b - a - 1);
      u.program = l.substr(b + 1);
      if (u.how == "exec-failed") { // the exec noted last for it did not happen
        for (auto it = out.rbegin(); it != out.rend(); ++it)
          if (it->pid == u.pid && (it->how == "exec" || it->how == "unrecordable-exec") &&
              it->program == u.program) {
            out.erase(std::next(it).base());
            break;
          }
        continue;
      }
      out.push_back(std::move(u));
    }
    std::fclose(f);
  }
  unlink(path.c_str());
  return out;
}

// The program the root process became by exec, when it said so.
const UnrecordedStart *root_exec(const std::vector<UnrecordedStart> &notes, pid_t root) {
  for (const UnrecordedStart &n : notes)
    if (n.pid == root && (n.how == "exec" || n.how == "unrecordable-exec"))
      return &n;
  return nullptr;
}

// Without --follow-children, the programs the command's processes started
// are not recorded; when the command is a script or a shell running the
// program as a child, that program is the one the user meant. With it or
// without, those no loader preloads (statically linked, set-user-ID) are
// said apart: following cannot reach them.
constexpr const char *kNotPreloadable =
    "statically linked, 32-bit, or set-user-ID: no dynamic loader preloads memlayout there";

void print_unrecorded(const std::vector<UnrecordedStart> &notes, pid_t root) {
  const UnrecordedStart *became = g_run_mode ? nullptr : root_exec(notes, root);
  struct Started {
    std::vector<std::pair<std::string, size_t>> programs; // in order of first start
    size_t total = 0;
    std::string names() const {
      std::string out;
      for (size_t i = 0; i < programs.size() && i < 5; ++i) {
        out += (i ? ", " : "") + programs[i].first;
        if (programs[i].second > 1)
          out += " (" + std::to_string(programs[i].second) + " times)";
      }
      if (programs.size() > 5)
        out += " and " + std::to_string(programs.size() - 5) + " more";
      return out;
    }
  } unrecorded, unrecordable;
  for (const UnrecordedStart &n : notes) {
    if (&n == became)
      continue; // print_exec_chain says it
    std::string name =
        n.how == "system" || n.how == "popen"
            ? "sh -c '" + n.program.substr(0, 60) + (n.program.size() > 60 ? "...'" : "'")
            : basename_of(n.program.c_str());
    Started &s = n.unrecordable() ? unrecordable : unrecorded;
    auto it = std::find_if(s.programs.begin(), s.programs.end(),
                           [&](const auto &p) { return p.first == name; });
    if (it == s.programs.end())
      s.programs.emplace_back(name, 1);
    else
      ++it->second;
    ++s.total;
  }
  const size_t total = unrecorded.total;
  if (total && g_run_mode)
    std::fprintf(stderr,
                 "memlayout: the command started %zu program%s that the rules did not reach: %s "
                 "(--follow-children takes them there)\n",
                 total, total == 1 ? "" : "s", unrecorded.names().c_str());
  else if (total)
    std::fprintf(stderr,
                 "memlayout: the command started %zu program%s that %s not recorded: %s "
                 "(--follow-children records %s)\n",
                 total, total == 1 ? "" : "s", total == 1 ? "was" : "were",
                 unrecorded.names().c_str(), total == 1 ? "it" : "them");
  if (const size_t n = unrecordable.total)
    std::fprintf(stderr, "memlayout: the command started %zu program%s that %s: %s (%s)\n", n,
                 n == 1 ? "" : "s", g_run_mode ? "the rules cannot reach" : "cannot be recorded",
                 unrecordable.names().c_str(), kNotPreloadable);
}

void print_unrecordable_exec(const std::string &executable, const std::string &program) {
  std::fprintf(stderr,
               "memlayout: %s replaced itself with %s (exec), which cannot be recorded: %s\n",
               executable.c_str(), program.c_str(), kNotPreloadable);
}

// A command that replaces itself by exec (a shell script's `exec`, a version
// manager's shim, `env`) leaves its allocations in FILE and the program it
// became elsewhere, or nowhere: say which, so that nobody reports on the
// wrapper by mistake.
void print_exec_chain(const std::string &path, const TraceSummary &s, pid_t pid,
                      bool follow_children, const std::vector<UnrecordedStart> &notes) {
  if (!s.ended_by_exec)
    return;
  if (!follow_children) {
    const UnrecordedStart *became = root_exec(notes, pid);
    if (became && became->unrecordable()) {
      print_unrecordable_exec(s.executable, became->program);
      return;
    }
    std::fprintf(stderr,
                 "memlayout: %s replaced itself with %s (exec), which was not recorded: with "
                 "--follow-children it is, in %s\n",
                 s.executable.c_str(), became ? became->program.c_str() : "another program",
                 exec_trace_path(path, pid, 1).c_str());
    return;
  }
  // Followed: the pid's images are FILE.PID.1, .2, ... up to the one that exited.
  TraceSummary last = s;
  std::string last_path = path;
  uint32_t generation = 0;
  while (last.ended_by_exec && generation < 10000) {
    std::string next_path = exec_trace_path(path, pid, generation + 1);
    TraceSummary next = summarize(next_path);
    if (!next.file_bytes)
      break;
    last = next;
    last_path = next_path;
    ++generation;
  }
  if (generation == 0) {
    if (const UnrecordedStart *became = root_exec(notes, pid)) {
      print_unrecordable_exec(s.executable, became->program);
      return;
    }
    std::fprintf(stderr,
                 "memlayout: %s replaced itself with another program (exec), which wrote no "
                 "trace (%s): a statically linked or set-user-ID program cannot be recorded\n",
                 s.executable.c_str(), exec_trace_path(path, pid, 1).c_str());
    return;
  }
  std::string times = generation > 1 ? " " + std::to_string(generation) + " times" : "";
  std::fprintf(stderr, "memlayout: %s replaced itself by exec%s; the program it became, %s:\n",
               s.executable.c_str(), times.c_str(), last.executable.c_str());
  print_summary_line(last, last_path);
}

using preload::ElfKind;

// What an ELF file is, as far as loading the recorder into it goes.
ElfKind elf_kind(const std::string &file) {
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ElfKind::kNotElf;
  ElfKind kind = preload::elf_kind([fd](void *buf, size_t n, uint64_t offset) -> long {
    return pread(fd, buf, n, static_cast<off_t>(offset));
  });
  close(fd);
  return kind;
}

// Whether an ELF64 file defines malloc itself in its dynamic symbols (an
// executable exports what the libraries it links refer to): the program's
// own allocator, which the recorder's malloc never sees.
bool defines_malloc(const std::string &file) {
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  auto read_at = [fd](void *to, size_t n, uint64_t at) {
    return pread(fd, to, n, static_cast<off_t>(at)) == static_cast<ssize_t>(n);
  };
  bool found = false;
  Elf64_Ehdr eh;
  if (read_at(&eh, sizeof eh, 0) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr)) {
    for (uint16_t i = 0; i < eh.e_shnum && !found; ++i) {
      Elf64_Shdr sh, strtab;
      if (!read_at(&sh, sizeof sh, eh.e_shoff + uint64_t{i} * sizeof sh))
        break;
      if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym) ||
          sh.sh_link >= eh.e_shnum ||
          !read_at(&strtab, sizeof strtab, eh.e_shoff + uint64_t{sh.sh_link} * sizeof strtab))
        continue;
      for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym) && k < 1000000 && !found; ++k) {
        Elf64_Sym sym;
        char name[8] = {};
        if (!read_at(&sym, sizeof sym, sh.sh_offset + k * sizeof sym))
          break;
        found = sym.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym.st_info) == STT_FUNC &&
                sym.st_name < strtab.sh_size && read_at(name, 7, strtab.sh_offset + sym.st_name) &&
                std::strcmp(name, "malloc") == 0;
      }
    }
  }
  close(fd);
  return found;
}

// -o's file made ready before the program runs: replaced as a shell's >
// replaces it, or written to when a device (/dev/null); a FIFO would block
// the program. *created says whether the launcher made it: what was there
// before is never removed afterwards. While the recording runs, the
// launcher holds a lock on the file (its descriptor stays open until it
// exits): a second recording into it would interleave its records with
// the first's into a trace that reads as one. 0, or 2 once it said why not.
int claim_output(const std::string &path, bool *created) {
  struct stat st;
  *created = lstat(path.c_str(), &st) != 0;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
    std::fprintf(stderr, "memlayout: cannot write the trace '%s': %s\n", path.c_str(),
                 S_ISDIR(st.st_mode)    ? "Is a directory"
                 : S_ISFIFO(st.st_mode) ? "it is a FIFO (a trace is a file, written in blocks)"
                                        : "not a regular file");
    return 2;
  }
  // What cannot be opened here, the launched child reports.
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return 0;
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fcntl(fd, F_SETLK, &lock) == 0)
    return 0;
  struct flock holder = lock;
  bool known = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
  std::string who = known ? " (pid " + std::to_string(holder.l_pid) + ")" : "";
  std::fprintf(stderr,
               "memlayout: cannot write the trace '%s': another memlayout record%s is "
               "writing it\n",
               path.c_str(), who.c_str());
  close(fd);
  return 2;
}

// Why a trace stayed empty, as far as the launcher can tell afterwards.
std::string why_no_trace(const char *command, const std::string &path) {
  std::string file = find_in_path(command);
  struct stat st;
  if (!file.empty() && stat(file.c_str(), &st) == 0) {
    if (elf_kind(file) == ElfKind::kElf64Static)
      return file + " is statically linked: no dynamic loader reads LD_PRELOAD there";
    if (preload::runs_in_secure_mode(st, getuid(), getgid()))
      return file + " is set-user-ID: the loader ignores LD_PRELOAD for it";
  }
  if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode))
    return "it is a device, not a file";
  if (file_system_full(path))
    return "the file system holding it is full";
  // The recorder writes no header that the limit would cut (a header is at
  // most 32 KiB, and a few KiB unless the command line is long).
  if (uint64_t limit = inherited_file_size_limit(); limit && limit < (32 << 10))
    return "the file size limit (RLIMIT_FSIZE, ulimit -f) of " + std::to_string(limit) +
           " bytes leaves no room for its header";
  return "the program never loaded the recorder (a statically linked or set-user-ID program, "
         "or one started by it, cannot be recorded) or could not write to it";
}

// The empty file the launcher created for the trace, removed: a trace that
// is not one. Never what was there before (a device, a FIFO, a symbolic
// link or a file -o named), and only a regular file.
void remove_empty_trace(const std::string &path, bool created) {
  struct stat st;
  if (created && lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
    unlink(path.c_str());
}
// A file's first `cap` bytes, "" when it cannot be read.
std::string read_head(const std::string &path, size_t cap) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {};
  std::string out(cap, '\0');
  ssize_t n = read(fd, out.data(), cap);
  close(fd);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// Processes of this recording still running once the command ended: a
// daemon forked and went on (memcached -d, redis --daemonize). They carry
// the environment the launcher gave the command and have the preload
// mapped; their traces are still being written, maybe not yet created.
std::vector<pid_t> still_recording(pid_t root) {
  const std::string mark = std::string("MEMLAYOUT_ROOT_PID=") + std::to_string(root);
  std::vector<pid_t> out;
  DIR *d = opendir("/proc");
  if (!d)
    return out;
  while (dirent *e = readdir(d)) {
    char *end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end || pid == getpid())
      continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    std::string env = read_head(dir + "/environ", 1 << 16);
    bool ours = false;
    for (size_t at = 0; at < env.size() && !ours;) {
      size_t end = std::min(env.find('\0', at), env.size());
      ours = env.compare(at, end - at, mark) == 0;
      at = end + 1;
    }
    if (ours && read_head(dir + "/maps", 1 << 20).find("libmemlayout_preload") != std::string::npos)
      out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void print_summary(const std::string &path, const char *command, bool created, pid_t pid,
                   bool follow_children, const timespec &started,
                   const std::vector<UnrecordedStart> &notes) {
  TraceSummary s = summarize(path);
  if (!s.file_bytes) {
    std::string why = why_no_trace(command, path);
    remove_empty_trace(path, created);
    std::fprintf(stderr, "memlayout: no trace was written to %s: %s\n", path.c_str(), why.c_str());
    return;
  }
  print_summary_line(s, path);
  if (s.complete && s.allocs == 0)
    if (std::string file = find_in_path(command); !file.empty() && defines_malloc(file))
      std::fprintf(stderr,
                   "memlayout: %s defines malloc itself: its allocations go to its own "
                   "allocator, which the recorder does not see\n",
                   file.c_str());
  print_exec_chain(path, s, pid, follow_children, notes);
  print_unrecorded(notes, pid);
  std::vector<std::string> children = child_traces(path, pid, started);
  std::vector<pid_t> running = still_recording(pid);
  if (!running.empty()) {
    std::string names;
    for (size_t i = 0; i < running.size() && i < 4; ++i) {
      names += (i ? ", " : "") + std::to_string(running[i]);
      char trace[PATH_MAX];
      if (!trace::process_trace_path(path.c_str(), static_cast<uint32_t>(running[i]), 0, trace,
                                     sizeof trace))
        continue;
      names += std::string(" -> ") + trace;
      // Said here, not again among the traces written.
      children.erase(std::remove(children.begin(), children.end(), std::string(trace)),
                     children.end());
    }
    if (running.size() > 4)
      names += " and " + std::to_string(running.size() - 4) + " more";
    const bool one = running.size() == 1;
    std::fprintf(stderr,
                 "memlayout: %zu %s of the command still %s (a daemon?): %s; a trace is complete "
                 "once its process ends\n",
                 running.size(), one ? "process" : "processes",
                 one ? "runs and records" : "run and record", names.c_str());
  }
  if (children.empty())
    return;
  // Each with the program it holds: a forked shell and the program it ran
  // are both there.
  std::string names;
  for (size_t i = 0; i < children.size() && i < 4; ++i) {
    std::string program = summarize(children[i]).executable;
    names += (i ? ", " : "") + children[i] +
             (program.empty() ? "" : " (" + basename_of(program.c_str()) + ")");
  }
  if (children.size() > 4)
    names += " and " + std::to_string(children.size() - 4) + " more";
  std::fprintf(stderr, "memlayout: %zu other process%s of the command wrote %s: %s\n",
               children.size(), children.size() == 1 ? "" : "es",
               children.size() == 1 ? "its own trace" : "traces of their own", names.c_str());
}

int launch(int argc, char **argv) {
  Options o;
  if (int rc = parse(argc, argv, o); rc >= 0)
    return rc;
  std::unique_ptr<RecordRules> rules;
  if (!o.rules.empty() || !o.types_file.empty() || !o.wrappers.wrappers.empty() ||
      !o.wrappers.not_wrappers.empty()) {
    // Rules read the program's code with LLVM, which `memlayout` does not
    // load (it would cost every recording its start-up): memlayout-full does.
    if (!prepare_record_rules)
      return run_full_cli(argc, argv);
    int status = 0;
    rules =
        prepare_record_rules(o.rules, o.types_file, o.wrappers,
                             {o.command.begin(), o.command.end() - 1}, o.follow_children, &status);
    if (!rules)
      return status;
  }
  std::string preload = preload_for_launch();
  if (preload.empty())
    return 2;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    std::perror("memlayout: pipe");
    return 2;
  }
  std::string prog = basename_of(o.command[0]);
  std::string explicit_output = o.output.empty() ? std::string() : absolute(o.output);
  // A 32-bit program's loader would print an error of its own for the
  // 64-bit preload, on the program's stderr, and run it unrecorded.
  if (std::string file = find_in_path(o.command[0]);
      !file.empty() && elf_kind(file) == ElfKind::kElf32) {
    std::fprintf(stderr, "memlayout: %s is a 32-bit program: memlayout %s 64-bit programs only\n",
                 file.c_str(), g_run_mode ? "runs" : "records");
    return 2;
  }
  // -o naming the program (or a file its rules read) would truncate it
  // before it runs: refused, as the analysis commands refuse their inputs.
  if (!g_run_mode && !explicit_output.empty()) {
    std::vector<std::string> read = {find_in_path(o.command[0]), o.types_file};
    read.insert(read.end(), o.rules.files.begin(), o.rules.files.end());
    if (output_is_an_input(explicit_output, read, "record"))
      return 2;
  }
  // record sets these from its options: one in the environment would seem
  // to work, as the other MEMLAYOUT_* variables do, and be overridden.
  if (!g_run_mode)
    for (const auto &[var, option] : std::initializer_list<std::pair<const char *, const char *>>{
             {"MEMLAYOUT_OUTPUT", "-o"},
             {"MEMLAYOUT_UNWIND", "--unwind"},
             {"MEMLAYOUT_STACK_DEPTH", "--stack-depth"},
             {"MEMLAYOUT_FOLLOW_CHILDREN", "--follow-children"},
             {"MEMLAYOUT_PAGEMAP", "--no-page-frames"}})
      if (const char *v = std::getenv(var))
        std::fprintf(stderr,
                     "memlayout record: warning: %s=%s in the environment is ignored: record sets "
                     "it from its options (%s)\n",
                     var, v, option);
  bool output_created = true;
  if (!g_run_mode && !explicit_output.empty())
    if (int rc = claim_output(explicit_output, &output_created); rc != 0)
      return rc;
  // Without --follow-children, what the command starts runs unrecorded: the
  // preload notes it there, for the summary.
  // ("" when no file can be made: then nothing is said of them.)
  // With it, those that cannot be followed (a static program) are noted.
  std::string notes_path = temp_file("memlayout-notes");
  std::fflush(nullptr);
  // Traces of other processes written since (a coarse clock, as file times).
  timespec started{};
  clock_gettime(CLOCK_REALTIME_COARSE, &started);
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("memlayout: fork");
    take_notes(notes_path);
    return 2;
  }
  if (pid == 0) {
    close(pipefd[0]);
    std::string out =
        explicit_output.empty()
            ? absolute("memlayout." + prog + "." + std::to_string(getpid()) + ".trace")
            : explicit_output;
    auto fail = [&](int stage, int err) {
      ChildFailure f{stage, err};
      (void)!write(pipefd[1], &f, sizeof f);
      _exit(stage == 2 ? (err == ENOENT ? 127 : 126) : 2);
    };
    if (!g_run_mode) {
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0)
        fail(1, errno);
      close(fd);
    }
    PreloadEnv env;
    env.preload = preload;
    env.mode = g_run_mode ? "run" : "record";
    env.allocator = o.allocator;
    if (rules)
      rules->set_env(env);
    apply_preload_env(env);
    setenv("MEMLAYOUT_OUTPUT", out.c_str(), 1);
    setenv("MEMLAYOUT_UNWIND", o.unwind.c_str(), 1);
    setenv("MEMLAYOUT_STACK_DEPTH", std::to_string(o.stack_depth).c_str(), 1);
    setenv("MEMLAYOUT_ROOT_PID", std::to_string(getpid()).c_str(), 1);
    setenv("MEMLAYOUT_FOLLOW_CHILDREN", o.follow_children ? "1" : "0", 1);
    setenv("MEMLAYOUT_PAGEMAP", o.no_page_frames ? "0" : "1", 1);
    if (notes_path.empty())
      unsetenv("MEMLAYOUT_NOTES");
    else
      setenv("MEMLAYOUT_NOTES", notes_path.c_str(), 1);
    unsetenv("MEMLAYOUT_EXEC_GEN");
    execvp(o.command[0], o.command.data());
    fail(2, errno);
  }
  close(pipefd[1]);
  // The summary goes to stderr; a file there at its size limit must refuse
  // it (EFBIG), not end the launcher by SIGXFSZ before it passes on the
  // program's status. Set after the fork: the program keeps its own.
  signal(SIGXFSZ, SIG_IGN);
  ChildFailure failure{};
  ssize_t got;
  int status = 0;
  std::vector<UnrecordedStart> notes;
  {
    ChildSignals signals(pid); // until the notes are read: the program's children write them
    do
      got = read(pipefd[0], &failure, sizeof failure);
    while (got < 0 && errno == EINTR);
    close(pipefd[0]);
    status = wait_child(pid);
    notes = take_notes(notes_path);
  }
  std::string out = explicit_output.empty()
                        ? absolute("memlayout." + prog + "." + std::to_string(pid) + ".trace")
                        : explicit_output;
  if (got == static_cast<ssize_t>(sizeof failure)) {
    if (failure.stage == 1) {
      std::fprintf(stderr, "memlayout: cannot write the trace '%s': %s\n", out.c_str(),
                   std::strerror(failure.error));
      return 2;
    }
    std::fprintf(stderr, "memlayout: %s: %s\n", o.command[0],
                 exec_failure(o.command[0], failure.error).c_str());
    remove_empty_trace(out, output_created);
    return failure.error == ENOENT ? 127 : 126;
  }
  if (!g_run_mode)
    print_summary(out, o.command[0], output_created, pid, o.follow_children, started, notes);
  else
    print_unrecorded(notes, pid);
  if (rules)
    rules->print_summary(status, root_exec(notes, pid) != nullptr);
  if (WIFSIGNALED(status)) {
    // Die the same way, so a shell or CI sees what the program did.
    int sig = WTERMSIG(status);
    std::fflush(nullptr);
    if (rules)
      rules->remove_files(); // no destructor runs after raise()
    signal(sig, SIG_DFL);
    struct rlimit no_core {
      0, 0
    };
    setrlimit(RLIMIT_CORE, &no_core);
    raise(sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

} // namespace

int record_main(int argc, char **argv) {
  g_run_mode = false;
  return launch(argc, argv);
}

int run_main(int argc, char **argv) {
  g_run_mode = true;
  return launch(argc, argv);
}

} // namespace memlayout::cli
