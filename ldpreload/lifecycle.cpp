#include "lifecycle.h"

#include "own_heap.h"
#include "preload_reach.h"

#include "process_info.h"
#include "real_alloc.h"
#include "rule_router.h"
#include "rules.h"
#include "stack_table.h"
#include "switch_watch.h"
#include "trace_writer.h"
#include "unwind_state.h"

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

extern char **environ;

namespace memlayout::preload {

// glibc's own name for sigaction: what ours calls, as we define sigaction.
extern "C" int __sigaction(int, const struct sigaction *, struct sigaction *);

namespace {

using trace::HeaderTag;

uint32_t g_pid = 0;
pthread_key_t g_thread_key;
bool g_have_key = false;
SpinLock g_open_lock;
char g_self_path[4096];
constexpr uint64_t kUnknownStatus = ~0ull;

// ---- The trace file ------------------------------------------------------------

class HeaderBuilder {
public:
  HeaderBuilder() {
    auto *h = reinterpret_cast<trace::FileHeader *>(buf_);
    memcpy(h->magic, trace::kFileMagic, sizeof h->magic);
    h->version = trace::kTraceVersion;
    n_ = sizeof(trace::FileHeader);
  }
  void bytes(HeaderTag tag, const void *p, size_t len) {
    if (len > 0xffff || n_ + sizeof(trace::HeaderField) + len > sizeof buf_)
      return;
    trace::HeaderField f{static_cast<uint16_t>(tag), static_cast<uint16_t>(len)};
    memcpy(buf_ + n_, &f, sizeof f);
    memcpy(buf_ + n_ + sizeof f, p, len);
    n_ += sizeof f + len;
  }
  void u32(HeaderTag tag, uint32_t v) { bytes(tag, &v, sizeof v); }
  void u64(HeaderTag tag, uint64_t v) { bytes(tag, &v, sizeof v); }
  void str(HeaderTag tag, const char *s) { bytes(tag, s, strlen(s)); }
  const void *finish() {
    reinterpret_cast<trace::FileHeader *>(buf_)->header_bytes = static_cast<uint16_t>(n_);
    return buf_;
  }
  size_t size() const { return n_; }

private:
  unsigned char buf_[32768];
  size_t n_;
};

const char *unwind_label() {
  return g_options.stack_depth == 1 ? "return-address" : unwind_method_name(g_options.unwind);
}

// A forked child's trace begins at the fork, where its events begin, though
// its file is made at its first write (most children exec without one).
struct StartStamps {
  uint64_t realtime_ns, tsc, monotonic_ns;
  bool taken;
} g_child_start;

bool open_trace() {
  char path[4096];
  if (!trace_path_for(g_options, g_pid, path, sizeof path)) {
    sys::warn("trace path too long");
    return false;
  }
  static HeaderBuilder h; // 32 KiB: keep it off small thread stacks
  h = HeaderBuilder();
  h.u32(HeaderTag::kPid, g_pid);
  h.u32(HeaderTag::kParentPid, static_cast<uint32_t>(getppid()));
  const StartStamps start = g_child_start.taken ? g_child_start
                                                : StartStamps{sys::realtime_ns(), sys::rdtsc(),
                                                              sys::monotonic_ns(), false};
  h.u64(HeaderTag::kStartRealtimeNs, start.realtime_ns);
  h.u64(HeaderTag::kStartTsc, start.tsc);
  h.u64(HeaderTag::kStartMonotonicNs, start.monotonic_ns);
  h.u32(HeaderTag::kPageSize, static_cast<uint32_t>(sys::page_size()));
  h.str(HeaderTag::kAllocator,
        g_options.allocator == AllocatorMode::kJemalloc ? "jemalloc" : "native");
  h.str(HeaderTag::kUnwind, unwind_label());
  h.u32(HeaderTag::kStackDepth, g_options.stack_depth);
  h.u32(HeaderTag::kTimestampPeriod, g_options.tick_period_max);
  h.u32(HeaderTag::kPointerBits, 64);
  h.u32(HeaderTag::kUsableModel, static_cast<uint32_t>(g_usable_model));
  h.u32(HeaderTag::kSwitchWatch, !tl_state.unwatched && switch_watch::thread_word() ? 1 : 0);
  char text[8192];
  ssize_t n = readlink("/proc/self/exe", text, sizeof text - 1);
  if (n > 0)
    h.bytes(HeaderTag::kExecutable, text, static_cast<size_t>(n));
  long len = sys::read_file("/proc/self/cmdline", text, sizeof text);
  if (len == static_cast<long>(sizeof text) - 1) { // read_file keeps a byte for its NUL
    // Longer than the field holds: whole arguments only, then a last one
    // that says so (a cut argument would read as one the program was given).
    static constexpr char kCut[] = "[memlayout: more arguments, cut at 8 KiB]";
    long keep = len - static_cast<long>(sizeof kCut);
    while (keep > 0 && text[keep - 1] != '\0')
      --keep;
    std::memcpy(text + keep, kCut, sizeof kCut);
    len = keep + static_cast<long>(sizeof kCut);
  }
  if (len > 0)
    h.bytes(HeaderTag::kCommandLine, text, static_cast<size_t>(len));
  if (gethostname(text, 256) == 0) {
    text[255] = '\0';
    h.str(HeaderTag::kHostname, text);
  }
  static struct utsname u;
  if (uname(&u) == 0)
    h.str(HeaderTag::kKernel, u.release);
  const void *bytes = h.finish();
  if (!g_writer.open(path, bytes, h.size())) {
    // "PATH: why" (out of descriptors in a forked child, a full disk, a
    // directory gone): strerrordesc_np's strings are static, no locale.
    const char *why = strerrordesc_np(errno);
    char detail[sizeof path + 128];
    size_t n = 0;
    for (const char *part : {static_cast<const char *>(path), ": ", why ? why : "unknown error"})
      for (; *part && n < sizeof detail - 1; ++part)
        detail[n++] = *part;
    detail[n] = '\0';
    sys::warn("cannot write the trace; recording stopped", detail);
    return false;
  }
  g_writer.set_compression_level(g_options.zstd_level);
  return true;
}

// ---- Environment of this process and of its children --------------------------

// Our MEMLAYOUT_* settings, copied at start: children that are followed get
// them back even if the program cleared its environment.
char *g_saved_vars[32];
size_t g_nsaved = 0;

bool is_self(const char *token, size_t n) {
  const char *base = strrchr(g_self_path, '/');
  base = base ? base + 1 : g_self_path;
  size_t bn = strlen(base);
  if (n == strlen(g_self_path) && !memcmp(token, g_self_path, n))
    return true;
  return n >= bn && !memcmp(token + n - bn, base, bn) && (n == bn || token[n - bn - 1] == '/');
}

// Removes our library from an LD_PRELOAD value in place.
void strip_self(char *value) {
  char *r = value, *w = value;
  while (*r) {
    while (*r == ':' || *r == ' ')
      ++r;
    char *start = r;
    while (*r && *r != ':' && *r != ' ')
      ++r;
    size_t n = static_cast<size_t>(r - start);
    if (!n || is_self(start, n))
      continue;
    if (w != value)
      *w++ = ':';
    memmove(w, start, n);
    w += n;
  }
  *w = '\0';
}

// Children run unrecorded unless asked, and the program sees the environment
// it would have seen without us: take ourselves out of LD_PRELOAD and drop our
// settings now, before the program reads or copies its environment.
void strip_our_environment() {
  for (char **e = environ; e && *e; ++e)
    if (!strncmp(*e, "LD_PRELOAD=", 11)) {
      strip_self(*e + 11);
      if (!(*e)[11])
        unsetenv("LD_PRELOAD");
      break;
    }
  for (size_t i = 0; i < g_nsaved; ++i) {
    char name[64];
    size_t n = static_cast<size_t>(strchr(g_saved_vars[i], '=') - g_saved_vars[i]);
    if (n < sizeof name) {
      memcpy(name, g_saved_vars[i], n);
      name[n] = '\0';
      unsetenv(name);
    }
  }
  unsetenv("MEMLAYOUT_EXEC_GEN");
}

// The environment a child gets: the caller's, with our library removed from
// LD_PRELOAD (not following) or with LD_PRELOAD and our settings restored
// (following) plus the exec generation of this pid.
void save_our_vars() {
  for (char **e = environ; e && *e && g_nsaved < 31; ++e)
    if (!strncmp(*e, "MEMLAYOUT_", 10) && strncmp(*e, "MEMLAYOUT_EXEC_GEN=", 19)) {
      size_t n = strlen(*e) + 1;
      auto *copy = static_cast<char *>(sys::map_pages(n));
      if (copy) {
        memcpy(copy, *e, n);
        g_saved_vars[g_nsaved++] = copy;
      }
    }
}

// Built in its own mapping of *bytes_out bytes (0 when envp is returned as is).
char **child_environment(char *const *envp, bool same_pid, size_t *bytes_out) {
  *bytes_out = 0;
  size_t n = 0;
  while (envp && envp[n])
    ++n;
  // Another `memlayout record` run by the program (a record inside a
  // record, a test suite that records) set its child up itself: its output,
  // its preload, left as it put them.
  for (size_t i = 0; i < n; ++i)
    if (!strncmp(envp[i], "MEMLAYOUT_OUTPUT=", 17)) {
      bool ours = false;
      for (size_t s = 0; s < g_nsaved && !ours; ++s)
        ours = !strcmp(g_saved_vars[s], envp[i]);
      if (!ours)
        return const_cast<char **>(envp);
    }
  size_t strings = 8192 + strlen(g_self_path);
  for (size_t i = 0; i < n; ++i)
    if (!strncmp(envp[i], "LD_PRELOAD=", 11))
      strings += strlen(envp[i]);
  size_t bytes = (n + g_nsaved + 4) * sizeof(char *) + strings;
  auto *out = static_cast<char **>(sys::map_pages(bytes));
  if (!out)
    return const_cast<char **>(envp);
  *bytes_out = bytes;
  char *text = reinterpret_cast<char *>(out + n + g_nsaved + 4);
  size_t k = 0;
  bool have_preload = false;
  for (size_t i = 0; i < n; ++i) {
    const char *v = envp[i];
    if (!strncmp(v, "MEMLAYOUT_EXEC_GEN=", 19))
      continue;
    if (!strncmp(v, "LD_PRELOAD=", 11)) {
      char *copy = text;
      strcpy(copy, v);
      text += strlen(v) + 1;
      strip_self(copy + 11);
      if (g_options.follow_children) {
        // ours first, as `memlayout record` set it up
        size_t rest = strlen(copy + 11);
        memmove(copy + 11 + strlen(g_self_path) + (rest ? 1 : 0), copy + 11, rest + 1);
        memcpy(copy + 11, g_self_path, strlen(g_self_path));
        if (rest)
          copy[11 + strlen(g_self_path)] = ':';
        text += strlen(g_self_path) + 1;
      }
      have_preload = true;
      if (copy[11])
        out[k++] = copy;
      continue;
    }
    out[k++] = const_cast<char *>(v);
  }
  if (g_options.follow_children) {
    if (!have_preload) {
      char *copy = text;
      strcpy(copy, "LD_PRELOAD=");
      strcat(copy, g_self_path);
      text += strlen(copy) + 1;
      out[k++] = copy;
    }
    for (size_t s = 0; s < g_nsaved; ++s) {
      size_t name_len = static_cast<size_t>(strchr(g_saved_vars[s], '=') - g_saved_vars[s]) + 1;
      bool present = false;
      for (size_t i = 0; i < k && !present; ++i)
        present = !strncmp(out[i], g_saved_vars[s], name_len);
      if (!present)
        out[k++] = g_saved_vars[s];
    }
    if (same_pid) {
      char *gen = text;
      size_t m = 0;
      memcpy(gen, "MEMLAYOUT_EXEC_GEN=", 19);
      m = 19;
      m += sys::format_u64(gen + m, g_pid);
      gen[m++] = ':';
      m += sys::format_u64(gen + m, g_options.exec_generation + 1);
      gen[m++] = '\0';
      text += m;
      out[k++] = gen;
    }
  }
  out[k] = nullptr;
  return out;
}

// ---- Hooks registered with libc --------------------------------------------------

void on_thread_exit(void *) {
  thread_exit(tl_state);
  router_thread_exit();
  if (g_pools_exist.load(std::memory_order_relaxed))
    seg::thread_exit();
}

// `memlayout run`'s per-rule counts, once per process image.
void write_rule_stats() {
  static uint32_t written_by;
  uint32_t pid = static_cast<uint32_t>(sys::getpid());
  if (pid != g_pid || written_by == pid)
    return;
  written_by = pid;
  router_write_stats();
}

// What the rules routed, before the end record: report and diff show it.
void write_rules_record() {
  constexpr size_t kCap = (rules::kMaxRules + rules::kMaxWrappers) * (rules::kMaxName * 2 + 64);
  auto *buf = static_cast<uint8_t *>(sys::map_pages(kCap));
  if (!buf)
    return;
  if (size_t n = router_encode_stats(buf, kCap))
    g_writer.write_record(trace::RecordType::kRules, 0, 1, buf, n, false);
  sys::unmap_pages(buf, kCap);
}

void on_process_exit(int status, void *) {
  finish_trace(trace::EndReason::kExit, status);
  write_rule_stats();
}

// quick_exit runs at_quick_exit handlers, not on_exit's, and ends in
// glibc's own _exit: ours, registered first, runs after the program's, with
// the status quick_exit was given.
std::atomic<int> g_quick_exit_status{0};
void on_quick_exit() { on_process_exit(g_quick_exit_status.load(), nullptr); }

// Signals whose default action ends the process. Where the program left that
// default in place, a handler of ours writes what was recorded and then lets
// the signal do what it would have done: Ctrl-C on a recorded server or a
// crash no longer loses the last block of every thread.
constexpr int kDeadlySignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,
                                  SIGBUS,  SIGFPE,  SIGSEGV, SIGTERM, SIGSYS,  SIGXCPU,
                                  SIGALRM, SIGUSR1, SIGUSR2, SIGPIPE};

// The stack finishing the trace takes (encoding, the writer's buffers):
// measured under 8 KiB, with room to spare.
constexpr uintptr_t kFinishStackBytes = 16 << 10;

// Whether the handler's stack has room to finish the trace. A program's
// small alternate signal stack (a few KiB, within the kernel's minimum) or
// a thread started with PTHREAD_STACK_MIN, most of it taken by TLS, had
// not: a program dying of SIGTERM died of SIGSEGV instead.
bool room_to_finish() {
  auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  stack_t alt;
  if (sigaltstack(nullptr, &alt) == 0 && (alt.ss_flags & SS_ONSTACK))
    return sp - reinterpret_cast<uintptr_t>(alt.ss_sp) >= kFinishStackBytes;
  const unwind_state::Thread &t = unwind_state::t_thread;
  if (t.lo && sp >= t.lo && sp < t.hi)
    return sp - t.lo >= kFinishStackBytes;
  return true; // bounds unknown: as before
}

// Where the handler's own stack is short (a program's SIGSTKSZ alternate
// stack: every Rust program's, a crash on its main stack included), the
// trace is finished on this one. One thread at a time: a second thread
// dying meanwhile finds the trace being finished (finish_trace says so).
alignas(64) unsigned char g_finish_stack[64 << 10];
std::atomic<bool> g_finish_stack_taken{false};

void finish_from_signal(int sig) {
  finish_trace(trace::EndReason::kSignal, sig);
  write_rule_stats(); // a server stopped by SIGTERM still says what its rules routed
}

// Calls finish_from_signal(sig) with the stack pointer at `top` (16-byte
// aligned), back on the caller's stack after. The callee keeps rbx and rbp
// (callee-saved): the caller's stack pointer waits in rbx.
__attribute__((noinline)) void finish_on_stack(int sig, unsigned char *top) {
  asm volatile("mov %%rsp, %%rbx\n\t"
               "mov %[top], %%rsp\n\t"
               "call *%[fn]\n\t"
               "mov %%rbx, %%rsp\n\t"
               : "+D"(sig), [top] "+r"(top)
               : [fn] "r"(&finish_from_signal)
               : "rbx", "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc",
                 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                 "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

void on_deadly_signal(int sig) {
  // SA_RESETHAND has put the default action back; put it back here too, for
  // a handler installed without it (a program that restored an action it
  // read with a raw system call): raise() must end the process, not come
  // back here forever. Without room on its stack the trace is finished on
  // a stack of ours: the program still dies as it would have.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  __sigaction(sig, &dfl, nullptr);
  if (room_to_finish()) {
    finish_from_signal(sig);
  } else if (!g_finish_stack_taken.exchange(true)) {
    finish_on_stack(sig, g_finish_stack + sizeof g_finish_stack);
    g_finish_stack_taken.store(false);
  }
  raise(sig); // delivered on return from this handler (SA_NODEFER): dies as it would have
}

bool is_deadly(int sig) {
  for (int d : kDeadlySignals)
    if (d == sig)
      return true;
  return false;
}

struct sigaction deadly_action() {
  struct sigaction sa {};
  sa.sa_handler = on_deadly_signal;
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK | SA_RESTART;
  return sa;
}

// Set once our handlers are in: from then on, a program that puts a deadly
// signal's default action back gets ours in its place (see sigaction below).
std::atomic<bool> g_deadly_handlers{false};
using SignalFn = __sighandler_t (*)(int, __sighandler_t);
SignalFn g_real_signal = nullptr;

void install_signal_handlers() {
  for (int sig : kDeadlySignals) {
    struct sigaction old {};
    if (__sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
      continue;
    struct sigaction sa = deadly_action();
    __sigaction(sig, &sa, nullptr);
  }
  g_deadly_handlers.store(true, std::memory_order_release);
}

// A vfork child shares our memory and must not touch the parent's trace.
bool in_this_process() { return sys::getpid() == g_pid; }

// Whether a program's request for `sig`'s default action should get ours,
// which writes the trace's end and then takes the default: the cleanup
// handlers of sort and the like (`signal(sig, SIG_DFL); raise(sig);`) ended
// the process without a word of its trace written.
bool default_becomes_ours(int sig, __sighandler_t handler, int flags) {
  return handler == SIG_DFL && !(flags & SA_SIGINFO) && is_deadly(sig) &&
         g_deadly_handlers.load(std::memory_order_acquire) && in_this_process();
}

void before_fork() {
  pin_busy(tl_state); // until after_fork_parent or after_fork_child
  recorder_prepare_fork();
  process_info_prepare_fork();
  g_dictionary.prepare_fork();
  g_writer.prepare_fork();
  own_heap::prepare_fork();
}
void after_fork_parent() {
  own_heap::parent_after_fork();
  g_writer.parent_after_fork();
  g_dictionary.parent_after_fork();
  process_info_parent_after_fork();
  recorder_parent_after_fork();
  tl_state.busy = 0;
}
void after_fork_child() {
  g_child_start = {sys::realtime_ns(), sys::rdtsc(), sys::monotonic_ns(), true};
  own_heap::child_after_fork();
  g_pid = sys::getpid();
  g_options.exec_generation = 0;
  g_writer.child_after_fork();
  g_dictionary.child_after_fork();
  process_info_child_after_fork();
  recorder_child_after_fork();
  router_child_after_fork();
  g_open_lock.reset_after_fork();
  tl_state.busy = 0;
}

template <class F> F next_symbol(const char *name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

} // namespace

bool ensure_trace_open() {
  if (g_writer.is_open())
    return true;
  State s = g_state.load(std::memory_order_acquire);
  if (s != State::kRecording && s != State::kInitializing)
    return false;
  LockGuard g(g_open_lock);
  if (g_writer.is_open())
    return true;
  if (!open_trace()) {
    g_state.store(State::kDisabled);
    return false;
  }
  record_module_changes();
  return true;
}

bool ensure_trace_open_from_signal() {
  if (g_writer.is_open())
    return true;
  if (g_state.load(std::memory_order_acquire) != State::kRecording || !g_open_lock.try_lock())
    return false;
  bool ok = g_writer.is_open();
  if (!ok && open_trace()) {
    record_inherited_modules_from_signal();
    ok = true;
  }
  g_open_lock.unlock();
  return ok;
}

void arm_thread_exit(ThreadLog *log) {
  // The destructor runs only for a non-null value; a routing thread that
  // records nothing has no log.
  static char no_log;
  if (g_have_key)
    pthread_setspecific(g_thread_key, log ? static_cast<void *>(log) : &no_log);
}

bool initialize() {
  State s = g_state.load(std::memory_order_acquire);
  if (s == State::kRecording)
    return true;
  if (s != State::kUninitialized) {
    // Another thread is setting up: wait for it, unless it is us recursing.
    if (s == State::kInitializing && !tl_state.busy)
      for (unsigned spins = 0; g_state.load(std::memory_order_acquire) == State::kInitializing;)
        wait_a_little(spins);
    return g_state.load(std::memory_order_acquire) == State::kRecording;
  }
  if (!g_state.compare_exchange_strong(s, State::kInitializing))
    return initialize();
  uint8_t was_busy = tl_state.busy;
  enter_busy(tl_state);
  sys::KeepErrno keep_errno;
  load_options(&g_options);
  g_memo_depth = unwind_memo_depth(g_options.unwind, g_options.stack_depth);
  resolve_real_allocator(g_options.allocator);
  if (g_options.allocator == AllocatorMode::kJemalloc)
    g_real.free(g_real.malloc(1)); // jemalloc's fork handlers must precede ours
  g_arm_thread_exit = [] {
    uint8_t busy = tl_state.busy;
    enter_busy(tl_state); // pthread_setspecific may allocate
    arm_thread_exit(tl_state.log);
    tl_state.busy = busy;
  };
  router_init();
  g_pid = sys::getpid();
  if (!g_options.output[0]) {
    // Preloaded by hand without a path: heaptrack-style default name.
    char *w = g_options.output;
    memcpy(w, "memlayout.", 10);
    size_t n = 10 + sys::format_u64(w + 10, g_pid);
    memcpy(w + n, ".trace", 7);
    g_options.root_pid = g_pid;
  }
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&initialize), &info) && info.dli_fname)
    strncpy(g_self_path, info.dli_fname, sizeof g_self_path - 1);
  save_our_vars();
  if (!g_options.follow_children)
    strip_our_environment();
  g_have_key = pthread_key_create(&g_thread_key, on_thread_exit) == 0;
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  on_exit(on_process_exit, nullptr);
  at_quick_exit(on_quick_exit);
  // `memlayout run`: rules only, nothing recorded.
  bool ok = !g_options.route_only && open_trace();
  // `memlayout run` records nothing, but its rule counts are written on the
  // way out too.
  if (ok || g_options.route_only)
    install_signal_handlers();
  g_real_signal = next_symbol<SignalFn>("signal");
  g_state.store(ok ? State::kRecording : State::kDisabled, std::memory_order_release);
  if (ok)
    record_module_changes();
  tl_state.busy = was_busy;
  return ok;
}

void finish_trace(trace::EndReason reason, int exit_status) {
  static std::atomic<bool> finishing{false};
  if (!in_this_process() || g_state.load(std::memory_order_acquire) != State::kRecording ||
      finishing.exchange(true))
    return;
  // exit(256) ends the process with status 0, as the parent sees it.
  if (reason == trace::EndReason::kExit && exit_status > 0)
    exit_status &= 0xff;
  uint8_t was_busy = tl_state.busy;
  // Busy: a signal handler interrupted the recorder and ended the process
  // (exit() from a handler), and the interrupted code may hold the thread's
  // log or the loader's lock: finish as from a signal, waiting for nothing.
  bool from_signal = reason == trace::EndReason::kSignal || was_busy;
  pin_busy(tl_state);
  sys::KeepErrno keep_errno;
  if (from_signal) {
    g_writer.stop_compressing();
    flush_all_threads_from_signal();
  } else {
    flush_all_threads();
  }
  if (g_writer.is_open()) { // a forked child that recorded nothing has no file
    if (!from_signal)       // dl_iterate_phdr takes the loader lock
      record_module_changes();
    if (uint32_t id = record_memory_map(); id && tl_state.log && !from_signal) {
      record_ext(tl_state, trace::ExtKind::kSnapshot, id);
      flush_log(tl_state.log);
    }
    write_rules_record();
    Totals t = totals(from_signal);
    uint8_t buf[128], *w = buf;
    *w++ = static_cast<uint8_t>(reason);
    w = trace::put_varint(w, sys::rdtsc());
    w = trace::put_varint(w, sys::monotonic_ns());
    w = trace::put_varint(w, exit_status < 0 ? kUnknownStatus : static_cast<uint64_t>(exit_status));
    for (uint64_t v :
         {t.events, t.allocs, t.frees, t.bytes_allocated, t.lost, g_writer.write_errors()})
      w = trace::put_varint(w, v);
    g_writer.write_record(trace::RecordType::kEnd, 0, 1, buf, static_cast<size_t>(w - buf), false);
  }
  if (reason == trace::EndReason::kExec) {
    // Recording goes on if the exec fails; the next kEnd supersedes this one.
    finishing.store(false);
  } else {
    g_state.store(State::kFinished, std::memory_order_release);
  }
  tl_state.busy = was_busy;
}

} // namespace memlayout::preload

// ---- Interposed process-lifecycle functions -------------------------------------

using namespace memlayout::preload;

namespace {

// Recorded by `memlayout record`, or routed by `memlayout run`: a process of
// the command, whose children get our environment's treatment and whose
// unfollowed programs are noted.
bool command_mode() {
  return g_state.load(std::memory_order_acquire) == State::kRecording || g_options.route_only;
}
bool command_process() { return command_mode() && in_this_process(); }

bool recording_process() {
  return g_state.load(std::memory_order_acquire) == State::kRecording && in_this_process();
}

// Without --follow-children, one line per program a process of the command
// starts ("PID\tHOW\tPROGRAM\n", appended to the file `memlayout record`
// named), so that its summary can say what ran unrecorded: a wrapper
// script's or a shell's children are often the program the user meant.
void note_start(const char *how, const char *program) {
  if (!g_options.notes[0] || !program || !*program)
    return;
  sys::KeepErrno keep_errno;
  char line[1024];
  size_t n = sys::format_u64(line, sys::getpid());
  line[n++] = '\t';
  for (const char *p = how; *p && n < 64;)
    line[n++] = *p++;
  line[n++] = '\t';
  for (const char *p = program; *p && n < sizeof line - 1;)
    line[n++] = *p == '\n' || *p == '\t' ? ' ' : *p, ++p;
  line[n++] = '\n';
  if (int fd = sys::open_file(g_options.notes, O_WRONLY | O_APPEND | O_CLOEXEC); fd >= 0) {
    sys::write_all(fd, line, n);
    sys::close_file(fd);
  }
}

void note_unrecorded(const char *how, const char *program) {
  if (!g_options.follow_children)
    note_start(how, program);
}

// A program no dynamic loader will load the recorder into
// (preload_reach.h). Scripts are their interpreter's business: not these.
bool loader_ignores_preload(const char *program, const struct stat &st) {
  if (runs_in_secure_mode(st, getuid(), getgid()))
    return true;
  int fd = sys::open_file(program, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ElfKind kind = elf_kind(
      [fd](void *buf, size_t n, uint64_t offset) { return sys::pread_some(fd, buf, n, offset); });
  sys::close_file(fd);
  return kind == ElfKind::kElf64Static || kind == ElfKind::kElf32;
}

// An exec about to be tried: a shell tries each directory of PATH in turn,
// and only the one that exists runs. `checkable`: the name is a path from
// here, not a name to search or one relative to a descriptor.
// A program that cannot be recorded is noted with --follow-children too.
bool note_exec(const char *program, bool checkable) {
  if (!g_options.notes[0] || !program)
    return false;
  sys::KeepErrno keep_errno;
  struct stat st;
  bool runs =
      !checkable || (stat(program, &st) == 0 && S_ISREG(st.st_mode) && access(program, X_OK) == 0);
  if (!runs)
    return false;
  if (checkable && loader_ignores_preload(program, st)) {
    note_start("unrecordable-exec", program);
    return true;
  }
  if (g_options.follow_children)
    return false;
  note_unrecorded("exec", program);
  return true;
}

// An exec noted before it was tried returned: it failed (a name execvp
// found nowhere, a script without its interpreter), and `memlayout record`
// drops the note.
int exec_returned(int result, const char *program, bool noted) {
  if (noted)
    note_start("exec-failed", program);
  return result;
}

// Linux lets argv be NULL and a path empty; glibc declares them non-null,
// which a comparison in the interposed functions would be warned about.
const char *first_argument(char *const *argv) { return argv ? argv[0] : nullptr; }
bool no_path(const char *path) { return !path || !*path; }

// Everything before an exec: the image and its buffers are about to vanish.
char **prepare_exec(char *const *envp, const char *program, bool checkable, bool *noted) {
  // A vfork child (dash runs every command so) shares its parent's memory
  // and records nothing, but what it runs is unrecorded all the same.
  *noted = command_mode() && note_exec(program, checkable);
  if (!command_process())
    return const_cast<char **>(envp);
  enter_busy(tl_state);
  size_t bytes; // not unmapped: the image is replaced, or it fails rarely
  char **env = child_environment(envp, true, &bytes);
  tl_state.busy = 0;
  finish_trace(memlayout::trace::EndReason::kExec, -1);
  return env;
}

// Collects execl-style variadic arguments into an argv on our own memory.
char **collect_args(const char *first, va_list ap, char ***envp_out) {
  va_list count;
  va_copy(count, ap);
  size_t n = 1;
  while (va_arg(count, char *))
    ++n;
  va_end(count);
  auto **argv = static_cast<char **>(sys::map_pages((n + 1) * sizeof(char *)));
  if (!argv)
    return nullptr;
  argv[0] = const_cast<char *>(first);
  for (size_t i = 1; i < n; ++i)
    argv[i] = va_arg(ap, char *);
  argv[n] = nullptr;
  (void)va_arg(ap, char *); // the terminating NULL
  if (envp_out)
    *envp_out = va_arg(ap, char **);
  return argv;
}

using ExecveFn = int (*)(const char *, char *const[], char *const[]);
using FexecveFn = int (*)(int, char *const[], char *const[]);
using ExecveatFn = int (*)(int, const char *, char *const[], char *const[], int);

int do_execve(const char *path, char *const argv[], char *const envp[]) {
  static auto real = next_symbol<ExecveFn>("execve");
  bool noted;
  char **env = prepare_exec(envp, path, true, &noted);
  return exec_returned(real(path, argv, env), path, noted);
}
int do_execvpe(const char *file, char *const argv[], char *const envp[]) {
  static auto real = next_symbol<ExecveFn>("execvpe");
  bool noted;
  char **env = prepare_exec(envp, file, file && strchr(file, '/'), &noted);
  return exec_returned(real(file, argv, env), file, noted);
}

// execl, execlp, execle: the argument list (and execle's environment after
// its terminating NULL) collected, then as execve or execvpe.
int exec_list(const char *file, const char *arg, va_list ap, bool search_path, bool with_env) {
  char **envp = environ;
  char **argv = collect_args(arg, ap, with_env ? &envp : nullptr);
  if (!argv) {
    errno = ENOMEM;
    return -1;
  }
  return search_path ? do_execvpe(file, argv, envp) : do_execve(file, argv, envp);
}

} // namespace

ML_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  return do_execve(path, argv, envp);
}
ML_EXPORT int execv(const char *path, char *const argv[]) { return do_execve(path, argv, environ); }
ML_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  return do_execvpe(file, argv, envp);
}
ML_EXPORT int execvp(const char *file, char *const argv[]) {
  return do_execvpe(file, argv, environ);
}
ML_EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int r = exec_list(path, arg, ap, false, false);
  va_end(ap);
  return r;
}
ML_EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int r = exec_list(file, arg, ap, true, false);
  va_end(ap);
  return r;
}
ML_EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int r = exec_list(path, arg, ap, false, true);
  va_end(ap);
  return r;
}
ML_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  static auto real = next_symbol<FexecveFn>("fexecve");
  bool noted;
  const char *program = first_argument(argv);
  char **env = prepare_exec(envp, program, false, &noted);
  return exec_returned(real(fd, argv, env), program, noted);
}
ML_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags) {
  static auto real = next_symbol<ExecveatFn>("execveat");
  // Relative to dirfd, or dirfd itself (AT_EMPTY_PATH): argv[0] names it.
  bool by_fd = no_path(path) || (path[0] != '/' && dirfd != AT_FDCWD), noted;
  const char *program = by_fd ? first_argument(argv) : path;
  char **env = prepare_exec(envp, program, !by_fd, &noted);
  return exec_returned(real(dirfd, path, argv, env, flags), program, noted);
}

// posix_spawn starts a new process without replacing ours: only its
// environment needs our treatment. (glibc's system() and popen() call its
// own posix_spawn, not this one, with `environ`, which is treated already.)
using SpawnFn = int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);
static int spawn_with(SpawnFn real, pid_t *pid, const char *path,
                      const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                      char *const argv[], char *const envp[]) {
  char **env = const_cast<char **>(envp);
  size_t bytes = 0;
  if (command_process()) {
    uint8_t was = tl_state.busy;
    enter_busy(tl_state);
    env = child_environment(envp, false, &bytes);
    tl_state.busy = was;
  }
  int r = real(pid, path, fa, attr, argv, env);
  if (bytes)
    sys::unmap_pages(env, bytes);
  if (r == 0 && command_process()) {
    sys::KeepErrno keep_errno;
    struct stat st;
    // A name posix_spawnp searches for is not checked: where it ran is not known here.
    if (path && strchr(path, '/') && stat(path, &st) == 0 && loader_ignores_preload(path, st))
      note_start("unrecordable-spawn", path);
    else
      note_unrecorded("spawn", path);
  }
  return r;
}
ML_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  static auto real = next_symbol<SpawnFn>("posix_spawn");
  return spawn_with(real, pid, path, fa, attr, argv, envp);
}
ML_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  static auto real = next_symbol<SpawnFn>("posix_spawnp");
  return spawn_with(real, pid, file, fa, attr, argv, envp);
}

// glibc's system() and popen() start /bin/sh through its own posix_spawn,
// which is not interposed: they are noted here.
ML_EXPORT int system(const char *command) {
  using SystemFn = int (*)(const char *);
  static auto real = next_symbol<SystemFn>("system");
  if (command && command_process())
    note_unrecorded("system", command);
  return real(command);
}
ML_EXPORT FILE *popen(const char *command, const char *type) {
  using PopenFn = FILE *(*)(const char *, const char *);
  static auto real = next_symbol<PopenFn>("popen");
  FILE *f = real(command, type);
  if (f && command_process())
    note_unrecorded("popen", command);
  return f;
}

// What the program sees of an action: ours is the default it left or set.
// Programs decide by it: CPython installs its SIGINT handler (and so
// KeyboardInterrupt) only over the default; bash, git and Ruby save an
// action and restore it later, which must give the default back.
void as_the_program_sees_it(struct sigaction *old) {
  if (old && !(old->sa_flags & SA_SIGINFO) && old->sa_handler == on_deadly_signal) {
    old->sa_handler = SIG_DFL;
    old->sa_flags = 0;
    sigemptyset(&old->sa_mask);
  }
}

// The program's sigaction and signal, which set a deadly signal's default
// action: ours instead (default_becomes_ours). Anything else goes through
// as asked. Asked what the action is, they answer the default where ours
// is in (docs/recording.md).
ML_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  int rc;
  if (act && default_becomes_ours(sig, act->sa_handler, act->sa_flags)) {
    struct sigaction ours = deadly_action();
    rc = __sigaction(sig, &ours, old);
  } else {
    rc = __sigaction(sig, act, old);
  }
  if (rc == 0)
    as_the_program_sees_it(old);
  return rc;
}

ML_EXPORT __sighandler_t signal(int sig, __sighandler_t handler) {
  if (default_becomes_ours(sig, handler, 0)) {
    struct sigaction ours = deadly_action(), old{};
    if (__sigaction(sig, &ours, &old) != 0)
      return SIG_ERR;
    as_the_program_sees_it(&old);
    return old.sa_handler;
  }
  // Resolved at start (initialize), not in a handler: dlsym is not
  // async-signal-safe.
  if (!g_real_signal)
    g_real_signal = next_symbol<SignalFn>("signal");
  __sighandler_t before = g_real_signal(sig, handler);
  return before == on_deadly_signal ? SIG_DFL : before;
}

// The program's own pthread_getattr_np holds the thread's lock while it
// reallocs; a thread's first event there must not ask for it again
// (unwind.cpp: init_thread_stack).
ML_EXPORT int pthread_getattr_np(pthread_t thread, pthread_attr_t *attr) {
  using GetattrFn = int (*)(pthread_t, pthread_attr_t *);
  static auto real = next_symbol<GetattrFn>("pthread_getattr_np");
  unwind_state::Thread &t = unwind_state::t_thread;
  ++t.in_getattr;
  int rc = real(thread, attr);
  --t.in_getattr;
  return rc;
}

ML_EXPORT pid_t fork() {
  using ForkFn = pid_t (*)();
  static auto real = next_symbol<ForkFn>("fork");
  pid_t pid = real();
  if (pid > 0 && recording_process() && !tl_state.busy) {
    enter_busy(tl_state);
    record_ext(tl_state, memlayout::trace::ExtKind::kFork, static_cast<uint64_t>(pid));
    tl_state.busy = 0;
  }
  return pid;
}

// A thread that waited for another often frees what the other allocated
// (main, after joining its workers). Its clock sample is from before the
// wait, and the events after it would carry that stamp, ordered before the
// allocations they follow: the next event samples the clock again.
ML_EXPORT int pthread_join(pthread_t thread, void **result) {
  using JoinFn = int (*)(pthread_t, void **);
  static auto real = next_symbol<JoinFn>("pthread_join");
  int rc = real(thread, result);
  sample_clock_at_next_event(tl_state);
  return rc;
}

// A program that registers the thread's rseq area itself (a runtime with
// per-CPU caches, after unregistering glibc's) may give it a signature of
// its own: the recorder's pointer left in the area would then be a
// descriptor the kernel finds unsigned, and it kills the thread at its next
// switch. Through libc's syscall(), the pointer is taken out first and the
// thread samples by its count of events from then on (switch_watch.h); a
// registration by inline assembly is seen only where it came before the
// thread's first event.
ML_EXPORT long syscall(long number, ...) {
  using SyscallFn = long (*)(long, ...);
  static auto real = next_symbol<SyscallFn>("syscall");
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long &v : a)
    v = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_rseq)
    stop_switch_watch(tl_state);
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

// The trace writer reads RLIMIT_FSIZE at most once a millisecond: a limit
// the program sets takes effect for the writer at once, so that the record
// that would cross it is refused whole and the stop record names it. A limit
// set below what the trace already holds gets the stop record written
// first, while the old limit still lets it.
namespace {

// Before the program's own call: `soft` the RLIMIT_FSIZE it asks for, where
// the call cannot fail for asking more than it may (a soft limit lowered
// within the hard one it keeps or lowers).
void before_setting_file_size_limit(int resource, uint64_t soft, uint64_t hard) {
  rlimit now;
  if (resource != RLIMIT_FSIZE || getrlimit(RLIMIT_FSIZE, &now) != 0)
    return;
  if (!(soft <= hard && hard <= now.rlim_max && soft < now.rlim_cur))
    return;
  // The trace ends here for good: every thread's events so far go in
  // first, while the old limit still lets them (a thread's staged events
  // and block in progress were lost). What threads record after is
  // refused anyway.
  if (g_writer.stops_at(soft) && recording_process() && !tl_state.busy) {
    enter_busy(tl_state);
    flush_all_threads();
    tl_state.busy = 0;
  }
  g_writer.before_file_size_limit(soft);
}

// glibc declares setrlimit's argument non-null, so gcc would drop a check of
// it; a program passing NULL anyway must get the kernel's EFAULT, not a
// crash in here.
template <class T> const T *unchecked(const T *p) {
  asm("" : "+r"(p));
  return p;
}

bool is_this_process(pid_t pid) { return pid == 0 || static_cast<uint32_t>(pid) == sys::getpid(); }

// Around the program's setrlimit or prlimit (`call`), of this process
// (`ours`) or another (then the writer only reads its limit once more).
template <class Limit, class Call>
int around_limit_call(bool ours, int resource, const Limit *limit, Call call) {
  const Limit *l = unchecked(limit);
  if (l && ours)
    before_setting_file_size_limit(resource, l->rlim_cur, l->rlim_max);
  int rc = call();
  if (rc == 0 && l && resource == RLIMIT_FSIZE)
    g_writer.forget_file_size_limit();
  return rc;
}

} // namespace

ML_EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *limit) {
  static auto real = next_symbol<int (*)(__rlimit_resource_t, const struct rlimit *)>("setrlimit");
  return around_limit_call(true, resource, limit, [&] { return real(resource, limit); });
}

ML_EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *limit) {
  static auto real =
      next_symbol<int (*)(__rlimit_resource_t, const struct rlimit64 *)>("setrlimit64");
  return around_limit_call(true, resource, limit, [&] { return real(resource, limit); });
}

ML_EXPORT int prlimit(pid_t pid, enum __rlimit_resource resource, const struct rlimit *limit,
                      struct rlimit *old) {
  using PrFn = int (*)(pid_t, enum __rlimit_resource, const struct rlimit *, struct rlimit *);
  static auto real = next_symbol<PrFn>("prlimit");
  return around_limit_call(is_this_process(pid), resource, limit,
                           [&] { return real(pid, resource, limit, old); });
}

ML_EXPORT int prlimit64(pid_t pid, enum __rlimit_resource resource, const struct rlimit64 *limit,
                        struct rlimit64 *old) {
  using PrFn = int (*)(pid_t, enum __rlimit_resource, const struct rlimit64 *, struct rlimit64 *);
  static auto real = next_symbol<PrFn>("prlimit64");
  return around_limit_call(is_this_process(pid), resource, limit,
                           [&] { return real(pid, resource, limit, old); });
}

ML_EXPORT void _exit(int status) {
  using ExitFn = void (*)(int);
  static auto real = next_symbol<ExitFn>("_exit");
  finish_trace(memlayout::trace::EndReason::kExit, status);
  write_rule_stats();
  real(status);
  __builtin_unreachable();
}
ML_EXPORT void _Exit(int status) { _exit(status); }

ML_EXPORT void quick_exit(int status) {
  using QuickExitFn = void (*)(int);
  static auto real = next_symbol<QuickExitFn>("quick_exit");
  g_quick_exit_status.store(status);
  real(status);
  __builtin_unreachable();
}

ML_EXPORT void abort() {
  using AbortFn = void (*)();
  static auto real = next_symbol<AbortFn>("abort");
  finish_trace(memlayout::trace::EndReason::kAbort, -1);
  write_rule_stats();
  real();
  __builtin_unreachable();
}

// RTLD_DEEPBIND would give the library its own malloc lookup, so its
// allocations bypass us and its frees of our pointers crash (heaptrack strips
// it the same way).
ML_EXPORT void *dlopen(const char *file, int flags) {
  using DlopenFn = void *(*)(const char *, int);
  static auto real = next_symbol<DlopenFn>("dlopen");
  void *h = real(file, flags & ~RTLD_DEEPBIND);
  if (h) {
    unwind_modules_changed();
    router_modules_changed();
  }
  if (h && recording_process() && !tl_state.busy) {
    enter_busy(tl_state);
    record_module_changes();
    tl_state.busy = 0;
  }
  return h;
}
ML_EXPORT int dlclose(void *handle) {
  using DlcloseFn = int (*)(void *);
  static auto real = next_symbol<DlcloseFn>("dlclose");
  int r = real(handle);
  unwind_modules_changed();
  if (recording_process() && !tl_state.busy) {
    enter_busy(tl_state);
    record_module_changes();
    tl_state.busy = 0;
  }
  return r;
}

__attribute__((constructor)) static void memlayout_start() { initialize(); }
