#include "support.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

namespace mlt {

// ---- paths ----------------------------------------------------------------------------

std::string memlayout_bin() { return MLT_MEMLAYOUT; }

std::string program(const std::string &name) {
  static const std::map<std::string, std::string> paths = {
      {"alloc_threads", MLT_PATH_alloc_threads},
      {"cxx_alloc", MLT_PATH_cxx_alloc},
      {"fork_child", MLT_PATH_fork_child},
      {"exec_child", MLT_PATH_exec_child},
      {"exec_child_static", MLT_PATH_exec_child_static},
      {"exec_parent", MLT_PATH_exec_parent},
      {"exit_paths", MLT_PATH_exit_paths},
      {"handler_exit", MLT_PATH_handler_exit},
      {"churn", MLT_PATH_churn},
      {"annotated", MLT_PATH_annotated},
      {"dlopen_main", MLT_PATH_dlopen_main},
      {"edge_cases", MLT_PATH_edge_cases},
      {"errno_contract", MLT_PATH_errno_contract},
      {"node_descriptor", MLT_PATH_node_descriptor},
      {"seg_pools", MLT_PATH_seg_pools},
      {"join_frees", MLT_PATH_join_frees},
      {"sparse_allocs", MLT_PATH_sparse_allocs},
      {"two_classes", MLT_PATH_two_classes},
      {"getattr_first", MLT_PATH_getattr_first},
      {"signal_views", MLT_PATH_signal_views},
      {"daemonize", MLT_PATH_daemonize},
      {"string_builder", MLT_PATH_string_builder},
      {"cancel_threads", MLT_PATH_cancel_threads},
      {"rlimit_as", MLT_PATH_rlimit_as},
      {"fsize_limit", MLT_PATH_fsize_limit},
      {"own_malloc", MLT_PATH_own_malloc},
      {"many_threads", MLT_PATH_many_threads},
      {"handoff", MLT_PATH_handoff},
      {"heap_offsets", MLT_PATH_heap_offsets},
      {"thread_waves", MLT_PATH_thread_waves},
      {"detached_exit", MLT_PATH_detached_exit},
      {"own_rseq", MLT_PATH_own_rseq},
      {"key_rounds", MLT_PATH_key_rounds},
      {"lambdas", MLT_PATH_lambdas},
      {"local_functions", MLT_PATH_local_functions},
      {"bucket_table", MLT_PATH_bucket_table},
      {"fix_layouts", MLT_PATH_fix_layouts},
      {"bst_inline", MLT_PATH_bst_inline},
      {"oneline_ctors", MLT_PATH_oneline_ctors},
      {"latch_names", MLT_PATH_latch_names},
      {"library_sites", MLT_PATH_library_sites},
      {"bst_wrapped", MLT_PATH_bst_wrapped},
      {"bst_tail", MLT_PATH_bst_tail},
      {"bst_nested", MLT_PATH_bst_nested},
      {"bst_lto", MLT_PATH_bst_lto},
      {"lf_tree", MLT_PATH_lf_tree},
      {"task_queue", MLT_PATH_task_queue},
      {"ledger", MLT_PATH_ledger},
      {"tail_ctors", MLT_PATH_tail_ctors},
      {"lib_wrappers_main", MLT_PATH_lib_wrappers_main},
      {"one_file_wrappers", MLT_PATH_one_file_wrappers},
      {"stripped_wrappers_main", MLT_PATH_stripped_wrappers_main},
      {"debuglink_main", MLT_PATH_debuglink_main},
      {"one_line_sites", MLT_PATH_one_line_sites},
      {"nodebug_wrapper", MLT_PATH_nodebug_wrapper},
      {"short_buffer", MLT_PATH_short_buffer},
      {"fork_signalled", MLT_PATH_fork_signalled},
      {"nodebug_wrapper_stripped", MLT_PATH_nodebug_wrapper_stripped},
      {"signal_while_allocating", MLT_PATH_signal_while_allocating},
  };
  auto it = paths.find(name);
  if (it == paths.end())
    throw std::runtime_error("no test program " + name);
  return it->second;
}

std::string plugin_path() { return MLT_PATH_plugin; }

namespace {
void remove_tree(const std::string &path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR *d = opendir(path.c_str())) {
      while (dirent *e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
          remove_tree(path + "/" + e->d_name);
      closedir(d);
    }
    rmdir(path.c_str());
  } else {
    unlink(path.c_str());
  }
}
} // namespace

std::string work_dir(const std::string &name) {
  std::string root = MLT_WORK_DIR;
  mkdir(root.c_str(), 0755);
  std::string dir = root + "/" + name;
  remove_tree(dir);
  if (mkdir(dir.c_str(), 0755) != 0)
    throw std::runtime_error("cannot create " + dir + ": " + std::strerror(errno));
  return dir;
}

std::string build_c_program(const std::string &dir, const std::string &name,
                            const std::string &source, const std::vector<std::string> &flags) {
  const std::string src = dir + "/" + name + ".c", out = dir + "/" + name;
  std::ofstream(src) << source;
  std::vector<std::string> argv = {"/usr/bin/cc"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {src, "-o", out});
  RunResult r = run(argv);
  if (r.exit_code() != 0)
    throw std::runtime_error("cc " + src + ": " + r.describe() + "\n" + r.err);
  return out;
}

bool file_exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> list_dir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// ---- running ---------------------------------------------------------------------------

bool RunResult::exited() const { return !timed_out && WIFEXITED(status); }
int RunResult::exit_code() const { return exited() ? WEXITSTATUS(status) : -1; }
int RunResult::term_signal() const {
  return !timed_out && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

std::string RunResult::describe() const {
  if (timed_out)
    return "timed out";
  if (exited())
    return "exit " + std::to_string(exit_code());
  if (term_signal())
    return "signal " + std::to_string(term_signal()) + " (" + strsignal(term_signal()) + ")";
  return "status " + std::to_string(status);
}

namespace {
double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
} // namespace

RunResult run(const std::vector<std::string> &argv, const RunOptions &opts) {
  int out[2], err[2], in[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(in, O_CLOEXEC))
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // A group of its own: a timeout kills whatever it started too (a hung
    // recorded program outlives the `memlayout record` that launched it).
    setpgid(0, 0);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!opts.cwd.empty() && chdir(opts.cwd.c_str()) != 0)
      _exit(125);
    ::unsetenv("LD_PRELOAD"); // unless the test sets one
    for (const auto &[k, v] : opts.setenv)
      ::setenv(k.c_str(), v.c_str(), 1);
    for (const std::string &k : opts.unsetenv)
      ::unsetenv(k.c_str());
    struct rlimit no_core {
      0, 0
    };
    setrlimit(RLIMIT_CORE, &no_core); // abort() and SIGSEGV tests leave no cores
    if (opts.fsize_limit >= 0) {
      struct rlimit f {
        static_cast<rlim_t>(opts.fsize_limit), static_cast<rlim_t>(opts.fsize_limit)
      };
      setrlimit(RLIMIT_FSIZE, &f);
    }
    signal(SIGXFSZ, opts.ignore_sigxfsz ? SIG_IGN : SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvp(args[0], args.data());
    _exit(errno == ENOENT ? 127 : 126);
  }
  setpgid(pid, pid); // as the child does: whichever runs first
  close(out[1]);
  close(err[1]);
  close(in[0]);
  // stdin: whatever the test gives, then EOF.
  size_t in_off = 0;
  int in_fd = in[1];
  if (opts.stdin_data.empty()) {
    close(in_fd);
    in_fd = -1;
  } else {
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  RunResult r;
  int fds[2] = {out[0], err[0]};
  std::string *bufs[2] = {&r.out, &r.err};
  double deadline = now_s() + opts.timeout_s;
  int open_fds = 2;
  bool signal_sent = opts.signal_when_exists.empty();
  while (open_fds > 0 || in_fd >= 0) {
    pollfd p[3];
    int n = 0, idx[3];
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) {
        p[n] = {fds[i], POLLIN, 0};
        idx[n++] = i;
      }
    if (in_fd >= 0) {
      p[n] = {in_fd, POLLOUT, 0};
      idx[n++] = 2;
    }
    double left = deadline - now_s();
    if (left <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      break;
    }
    if (!signal_sent && access(opts.signal_when_exists.c_str(), F_OK) == 0) {
      kill(pid, opts.send_signal);
      signal_sent = true;
    }
    double wait_s = std::min(left, signal_sent ? 1.0 : 0.02);
    int k = poll(p, static_cast<nfds_t>(n), static_cast<int>(wait_s * 1000) + 1);
    if (k < 0 && errno != EINTR)
      break;
    for (int j = 0; j < n && k > 0; ++j) {
      if (!p[j].revents)
        continue;
      if (idx[j] == 2) {
        ssize_t w = write(in_fd, opts.stdin_data.data() + in_off, opts.stdin_data.size() - in_off);
        if (w > 0)
          in_off += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
          in_off = opts.stdin_data.size();
        if (in_off == opts.stdin_data.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[65536];
      ssize_t got = read(p[j].fd, buf, sizeof buf);
      if (got > 0) {
        bufs[idx[j]]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[idx[j]]);
        fds[idx[j]] = -1;
        --open_fds;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0)
      close(fd);
  if (in_fd >= 0)
    close(in_fd);
  // Output closed: the process is ending (or is killed); collect it.
  while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

RunResult record(const std::vector<std::string> &record_args, const std::vector<std::string> &argv,
                 const RunOptions &opts) {
  std::vector<std::string> full = {memlayout_bin(), "record"};
  full.insert(full.end(), record_args.begin(), record_args.end());
  full.push_back("--");
  full.insert(full.end(), argv.begin(), argv.end());
  return run(full, opts);
}

std::string program_stderr(const std::string &recorded) {
  std::string kept;
  size_t pos = 0;
  while (pos < recorded.size()) {
    size_t nl = recorded.find('\n', pos);
    size_t end = nl == std::string::npos ? recorded.size() : nl + 1;
    std::string line = recorded.substr(pos, end - pos);
    bool summary = line.rfind("memlayout: ", 0) == 0 &&
                   (line.find(" -> ") != std::string::npos ||
                    line.find("no trace was written") != std::string::npos ||
                    line.find(" replaced itself ") != std::string::npos ||
                    line.find(" of the command wrote ") != std::string::npos ||
                    line.find("memlayout: the command started ") == 0);
    if (!summary)
      kept += line;
    pos = end;
  }
  return kept;
}

std::string behaviour_difference(const RunResult &direct, const RunResult &recorded) {
  std::string diff;
  if (direct.out != recorded.out)
    diff += "stdout differs:\n--- direct ---\n" + direct.out.substr(0, 2000) +
            "\n--- recorded ---\n" + recorded.out.substr(0, 2000) + "\n";
  std::string err = program_stderr(recorded.err);
  if (direct.err != err)
    diff += "stderr differs:\n--- direct ---\n" + direct.err.substr(0, 2000) +
            "\n--- recorded (memlayout summary removed) ---\n" + err.substr(0, 2000) + "\n";
  if (direct.describe() != recorded.describe())
    diff +=
        "status differs: direct " + direct.describe() + ", recorded " + recorded.describe() + "\n";
  return diff;
}

// ---- traces --------------------------------------------------------------------------

const std::string &Event::innermost() const {
  static const std::string none;
  return frames.empty() ? none : frames.front().function;
}

std::optional<int64_t> Dump::header_int(const char *key) const {
  if (auto v = header.getInteger(key))
    return *v;
  return std::nullopt;
}

std::string Dump::header_str(const char *key) const {
  if (auto v = header.getString(key))
    return v->str();
  return {};
}

std::optional<int64_t> Dump::end_int(const char *key) const {
  if (!end)
    return std::nullopt;
  if (auto v = end->getInteger(key))
    return *v;
  return std::nullopt;
}

bool Dump::end_is_null(const char *key) const {
  if (!end)
    return false;
  const llvm::json::Value *v = end->get(key);
  return v && v->kind() == llvm::json::Value::Null;
}

size_t Dump::count(const std::string &ev) const {
  auto it = line_kinds.find(ev);
  return it == line_kinds.end() ? 0 : it->second;
}

namespace {

uint64_t parse_hex(const llvm::json::Object &o, const char *key) {
  auto s = o.getString(key);
  if (!s)
    return 0;
  return std::strtoull(s->str().c_str(), nullptr, 16);
}

uint64_t get_u64(const llvm::json::Object &o, const char *key) {
  if (auto v = o.getInteger(key))
    return static_cast<uint64_t>(*v);
  return 0;
}

std::string get_str(const llvm::json::Object &o, const char *key) {
  if (auto v = o.getString(key))
    return v->str();
  return {};
}

} // namespace

Dump dump(const std::string &trace, bool symbolize) {
  Dump d;
  std::vector<std::string> argv = {memlayout_bin(), "dump", trace, "--format", "jsonl"};
  if (symbolize)
    argv.push_back("--symbolize");
  RunOptions opts;
  opts.timeout_s = 120;
  d.run = run(argv, opts);
  bool have_header = false;
  size_t line_no = 0, pos = 0;
  const std::string &text = d.run.out;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      d.error += "last line has no newline; ";
      nl = text.size();
    }
    llvm::StringRef line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    auto parsed = llvm::json::parse(line);
    if (!parsed) {
      if (d.error.size() < 2000)
        d.error +=
            "line " + std::to_string(line_no) + ": " + llvm::toString(parsed.takeError()) + "; ";
      continue;
    }
    llvm::json::Object *o = parsed->getAsObject();
    if (!o) {
      d.error += "line " + std::to_string(line_no) + " is not an object; ";
      continue;
    }
    std::string ev = get_str(*o, "ev");
    ++d.line_kinds[ev];
    if (ev == "header") {
      if (have_header)
        d.error += "second header at line " + std::to_string(line_no) + "; ";
      have_header = true;
      d.header = std::move(*o);
    } else if (ev == "end") {
      d.end = std::move(*o);
      ++d.end_lines;
    } else if (ev == "module") {
      d.modules.push_back({get_str(*o, "what"), get_str(*o, "path"), parse_hex(*o, "base")});
    } else if (ev == "thread") {
      d.threads.push_back({get_str(*o, "what"), get_str(*o, "name"), get_u64(*o, "tid")});
    } else if (ev == "memory_map") {
      d.map_pfns.push_back(o->getBoolean("pfns").getValueOr(false));
    } else {
      Event e;
      e.ev = ev;
      e.line = line_no;
      e.api = get_str(*o, "api");
      e.name = get_str(*o, "name");
      e.ptr = parse_hex(*o, "ptr");
      e.old = parse_hex(*o, "old");
      e.size = get_u64(*o, "size");
      e.usable = get_u64(*o, "usable");
      e.align = get_u64(*o, "align");
      e.tid = get_u64(*o, "tid");
      e.child = get_u64(*o, "child");
      e.stack = get_u64(*o, "stack");
      if (auto ts = o->getInteger("ts_ns"))
        e.ts_ns = *ts;
      if (const llvm::json::Array *frames = o->getArray("frames")) {
        for (const llvm::json::Value &fv : *frames) {
          Frame f;
          if (const llvm::json::Object *fo = fv.getAsObject()) {
            f.addr = parse_hex(*fo, "addr");
            f.function = get_str(*fo, "function");
            f.file = get_str(*fo, "file");
            if (auto l = fo->getInteger("line"))
              f.line = *l;
            if (auto b = fo->getBoolean("inlined"))
              f.inlined = *b;
          } else if (auto s = fv.getAsString()) {
            f.addr = std::strtoull(s->str().c_str(), nullptr, 16);
          }
          e.frames.push_back(std::move(f));
        }
      }
      d.events.push_back(std::move(e));
    }
  }
  if (!have_header)
    d.error += "no header line; ";
  return d;
}

std::vector<std::string> lifetime_errors(const Dump &d) {
  struct Use {
    int delta; // +1 allocated, -1 freed, 0 realloc in place
    uint64_t tid;
    size_t line;
  };
  std::map<uint64_t, std::vector<Use>> uses;
  for (const Event &e : d.events) {
    if (e.ev == "alloc")
      uses[e.ptr].push_back({+1, e.tid, e.line});
    else if (e.ev == "free")
      uses[e.ptr].push_back({-1, e.tid, e.line});
    else if (e.ev == "realloc" && e.old == e.ptr)
      uses[e.ptr].push_back({0, e.tid, e.line});
    else if (e.ev == "realloc") {
      uses[e.old].push_back({-1, e.tid, e.line});
      uses[e.ptr].push_back({+1, e.tid, e.line});
    }
  }
  std::vector<std::string> errors;
  for (const auto &[addr, list] : uses) {
    bool one_thread = std::all_of(list.begin(), list.end(),
                                  [&](const Use &u) { return u.tid == list.front().tid; });
    if (one_thread) {
      int live = 0;
      for (const Use &u : list) {
        if (u.delta == 0 && live != 1)
          errors.push_back(hex(addr) + ": reallocated in place while not allocated (dump line " +
                           std::to_string(u.line) + ")");
        else if (u.delta > 0 && live == 1)
          errors.push_back(hex(addr) + ": allocated again while live (dump line " +
                           std::to_string(u.line) + ")");
        else if (u.delta < 0 && live == 0)
          errors.push_back(hex(addr) + ": freed while not allocated (dump line " +
                           std::to_string(u.line) + ")");
        live = u.delta > 0 ? 1 : u.delta < 0 ? 0 : live;
      }
      continue;
    }
    long allocs = 0, frees = 0;
    for (const Use &u : list) {
      allocs += u.delta > 0;
      frees += u.delta < 0;
    }
    if (frees > allocs || allocs - frees > 1)
      errors.push_back(hex(addr) + ": " + std::to_string(allocs) + " allocations but " +
                       std::to_string(frees) + " frees across threads (first at dump line " +
                       std::to_string(list.front().line) + ")");
  }
  return errors;
}

bool same_function(const std::string &s, const std::string &name) {
  if (s == name)
    return true;
  // after namespaces or a return type ("ns::name(", "void name("), before
  // arguments, template arguments or a clone suffix
  for (size_t p = s.find(name); p != std::string::npos; p = s.find(name, p + 1)) {
    bool start_ok = p == 0 || s[p - 1] == ':' || s[p - 1] == ' ';
    size_t after = p + name.size();
    bool end_ok = after == s.size() || s[after] == '(' || s[after] == '.' || s[after] == '<';
    if (start_ok && end_ok)
      return true;
  }
  return false;
}

// ---- logs --------------------------------------------------------------------------------

size_t ProgramLog::count(char kind) const {
  return static_cast<size_t>(std::count_if(entries.begin(), entries.end(),
                                           [&](const LogEntry &e) { return e.kind == kind; }));
}

ProgramLog read_log(const std::string &path) {
  ProgramLog log;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    LogEntry e;
    f >> e.kind;
    auto num = [&](uint64_t &v) {
      std::string t;
      f >> t;
      v = std::strtoull(t.c_str(), nullptr, 0);
    };
    switch (e.kind) {
    case 'A':
      f >> e.api >> e.fn;
      num(e.ptr);
      num(e.size);
      num(e.usable);
      num(e.tid);
      num(e.align);
      break;
    case 'R':
      f >> e.api >> e.fn;
      num(e.old);
      num(e.ptr);
      num(e.size);
      num(e.usable);
      num(e.tid);
      break;
    case 'F':
      f >> e.api;
      num(e.ptr);
      num(e.tid);
      break;
    case 'T':
      num(e.tid);
      f >> e.role;
      break;
    case 'P':
      f >> e.pid >> e.ppid >> e.role;
      log.pid = e.pid;
      log.ppid = e.ppid;
      break;
    case 'X':
      log.dropped = true;
      continue;
    default:
      continue;
    }
    log.entries.push_back(std::move(e));
  }
  return log;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<std::string> missing_from_dump(const ProgramLog &log, const Dump &d,
                                           bool check_free_api) {
  // Index the dump's events by pointer; each can be used once.
  std::multimap<uint64_t, size_t> by_ptr;
  for (size_t i = 0; i < d.events.size(); ++i)
    if (d.events[i].ev == "alloc" || d.events[i].ev == "realloc" || d.events[i].ev == "free")
      by_ptr.emplace(d.events[i].ptr, i);
  std::vector<bool> used(d.events.size(), false);
  std::vector<std::string> missing;
  for (const LogEntry &l : log.entries) {
    if (l.kind != 'A' && l.kind != 'R' && l.kind != 'F')
      continue;
    const char *want_ev = l.kind == 'A' ? "alloc" : l.kind == 'R' ? "realloc" : "free";
    // Why the closest candidate did not match: one of the same kind and api
    // explains more than an unrelated event that reused the address.
    std::string why = "no event with this pointer";
    int why_rank = 0;
    auto because = [&](int rank, std::string text) {
      if (rank >= why_rank) {
        why_rank = rank;
        why = std::move(text);
      }
    };
    bool found = false;
    auto [lo, hi] = by_ptr.equal_range(l.ptr);
    for (auto it = lo; it != hi && !found; ++it) {
      const Event &e = d.events[it->second];
      if (used[it->second])
        continue;
      int rank = e.ev != want_ev ? 1 : e.api != l.api ? 2 : 3;
      auto why_not = [&](std::string text) { because(rank, std::move(text)); };
      if (e.ev != want_ev) {
        why_not("a " + e.ev + " event (" + e.api + ") instead");
        continue;
      }
      if (e.tid != l.tid) {
        why_not("thread " + std::to_string(e.tid) + " instead of " + std::to_string(l.tid));
        continue;
      }
      if (l.kind == 'F') {
        if (check_free_api && e.api != l.api) {
          why_not("freed with api " + e.api);
          continue;
        }
      } else {
        if (e.api != l.api) {
          why_not("api " + e.api);
          continue;
        }
        if (e.size != l.size) {
          why_not("size " + std::to_string(e.size));
          continue;
        }
        if (l.kind == 'R' && e.old != l.old) {
          why_not("old pointer " + hex(e.old));
          continue;
        }
        if (l.usable && e.usable != l.usable) {
          why_not("usable " + std::to_string(e.usable) + " but malloc_usable_size said " +
                  std::to_string(l.usable));
          continue;
        }
        if (l.align && e.align != l.align) {
          why_not("align " + std::to_string(e.align));
          continue;
        }
        if (!same_function(e.innermost(), l.fn)) {
          why_not("innermost frame '" + e.innermost() + "'");
          continue;
        }
      }
      used[it->second] = true;
      found = true;
    }
    if (!found) {
      std::string desc = std::string(1, l.kind) + " " + l.api + " " + l.fn + " " +
                         (l.kind == 'R' ? hex(l.old) + "->" : "") + hex(l.ptr) + " size " +
                         std::to_string(l.size) + " tid " + std::to_string(l.tid);
      missing.push_back(desc + ": " + why);
    }
  }
  return missing;
}

std::string join(const std::vector<std::string> &lines, size_t max_lines) {
  std::string s;
  for (size_t i = 0; i < lines.size() && i < max_lines; ++i)
    s += lines[i] + "\n";
  if (lines.size() > max_lines)
    s += "... and " + std::to_string(lines.size() - max_lines) + " more\n";
  return s;
}

// "memlayout: rule 2 function=create_node,pool=create_node (FILE:LINE): 17690
// allocations, 1.1 MiB" -> 17690 for the rule naming `fn`; -1 when absent.
long long routed_by(const std::string &stderr_text, const std::string &fn) {
  std::istringstream in(stderr_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("memlayout: rule ") != 0 ||
        line.find("function=" + fn + ",") == std::string::npos)
      continue;
    size_t colon = line.rfind("): ");
    if (colon == std::string::npos)
      continue;
    return std::atoll(line.c_str() + colon + 3);
  }
  return -1;
}

} // namespace mlt
