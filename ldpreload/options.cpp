#include "options.h"

#include "sys.h"
#include "trace_format.h"

#include <cstdlib>
#include <cstring>

namespace memlayout::preload {

Options g_options;

namespace {

struct Range {
  int64_t lo, hi;
};

// "NAME=VALUE: not a number from LO to HI, ignored", without allocating.
void warn_ignored(const char *name, const char *v, Range r) {
  // Room for the text after the value: two 20-digit bounds and the words.
  char text[256];
  constexpr size_t kTail = 80;
  size_t n = 0;
  auto put = [&](const char *s, size_t limit) {
    for (; *s && n < limit; ++s)
      text[n++] = *s;
  };
  auto put_int = [&](int64_t x) {
    if (x < 0) {
      text[n++] = '-';
      x = -x;
    }
    n += sys::format_u64(text + n, static_cast<uint64_t>(x));
  };
  put(name, sizeof text - kTail);
  put("=", sizeof text - kTail);
  put(v, sizeof text - kTail); // a value of any length: cut
  put(": not a whole number from ", sizeof text);
  put_int(r.lo);
  put(" to ", sizeof text);
  put_int(r.hi);
  text[n] = '\0';
  sys::warn("ignoring", text);
}

bool parse_int(const char *name, const char *v, Range r, int64_t *out) {
  bool neg = v[0] == '-';
  uint64_t u;
  if (!sys::parse_u64(v + (neg ? 1 : 0), &u) || u > (1ull << 40)) {
    warn_ignored(name, v, r);
    return false;
  }
  int64_t x = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
  if (x < r.lo || x > r.hi) {
    warn_ignored(name, v, r);
    return false;
  }
  *out = x;
  return true;
}

template <class T> bool int_option(const char *name, Range r, T *field) {
  const char *v = getenv(name);
  int64_t x;
  if (!v || !*v || !parse_int(name, v, r, &x))
    return false;
  *field = static_cast<T>(x);
  return true;
}

} // namespace

void load_options(Options *o) {
  *o = Options{};
  o->allocator = AllocatorMode::kNative;
  o->unwind = UnwindMethod::kCfi;
  o->stack_depth = 8;
  o->tick_period = 1;
  o->tick_period_max = 128;
  o->block_kib = 256;
  o->zstd_level = 1;
  o->page_frames = true;

  if (const char *v = getenv("MEMLAYOUT_OUTPUT"); v && *v && strlen(v) < sizeof o->output)
    strcpy(o->output, v);
  if (const char *v = getenv("MEMLAYOUT_NOTES"); v && *v && strlen(v) < sizeof o->notes)
    strcpy(o->notes, v);
  if (const char *v = getenv("MEMLAYOUT_ALLOCATOR"); v && *v) {
    if (!strcmp(v, "jemalloc"))
      o->allocator = AllocatorMode::kJemalloc;
    else if (strcmp(v, "native"))
      sys::warn("ignoring unknown MEMLAYOUT_ALLOCATOR (native|jemalloc)", v);
  }
  if (const char *v = getenv("MEMLAYOUT_UNWIND"); v && *v && !parse_unwind_method(v, &o->unwind))
    sys::warn("ignoring unknown MEMLAYOUT_UNWIND (fp|cfi|dwarf)", v);
  int_option("MEMLAYOUT_STACK_DEPTH", {1, kMaxStackDepth}, &o->stack_depth);
  int_option("MEMLAYOUT_ROOT_PID", {0, INT32_MAX}, &o->root_pid);
  // A period the user chose is kept as it is: tests and exact timelines want it.
  if (int_option("MEMLAYOUT_TICK_PERIOD", {1, 4096}, &o->tick_period))
    o->tick_period_max = o->tick_period;
  int_option("MEMLAYOUT_BLOCK_KIB", {16, 4096}, &o->block_kib);
  int_option("MEMLAYOUT_ZSTD_LEVEL", {-7, 9}, &o->zstd_level);
  // "PID:N": N execs happened in process PID. Other processes that inherit
  // the variable (posix_spawn children of an exec'd image) are first images.
  if (const char *v = getenv("MEMLAYOUT_EXEC_GEN"); v && *v) {
    char pid_text[16];
    const char *colon = strchr(v, ':');
    uint64_t pid = 0, gen = 0;
    size_t n = colon ? static_cast<size_t>(colon - v) : 0;
    if (colon && n < sizeof pid_text) {
      memcpy(pid_text, v, n);
      pid_text[n] = '\0';
      if (sys::parse_u64(pid_text, &pid) && sys::parse_u64(colon + 1, &gen) && pid == sys::getpid())
        o->exec_generation = static_cast<uint32_t>(gen);
    }
  }
  int64_t flag = 0;
  if (const char *v = getenv("MEMLAYOUT_MODE"); v && *v) {
    if (!strcmp(v, "run"))
      o->route_only = true;
    else if (strcmp(v, "record"))
      sys::warn("ignoring unknown MEMLAYOUT_MODE (record|run)", v);
  }
  if (const char *v = getenv("MEMLAYOUT_FOLLOW_CHILDREN"); v && *v)
    o->follow_children = parse_int("MEMLAYOUT_FOLLOW_CHILDREN", v, {0, 1}, &flag) && flag;
  if (const char *v = getenv("MEMLAYOUT_PAGEMAP");
      v && *v && parse_int("MEMLAYOUT_PAGEMAP", v, {0, 1}, &flag))
    o->page_frames = flag != 0;
}

bool trace_path_for(const Options &o, uint32_t pid, char *buf, size_t cap) {
  const char *base = o.output[0] ? o.output : "memlayout.trace";
  bool root = (o.root_pid == 0 || o.root_pid == pid) && o.exec_generation == 0;
  size_t len = strlen(base);
  if (root) {
    if (len + 1 > cap)
      return false;
    memcpy(buf, base, len + 1);
    return true;
  }
  return trace::process_trace_path(base, pid, o.exec_generation, buf, cap);
}

} // namespace memlayout::preload
