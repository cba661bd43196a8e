// Unwinder tests. This file is built with frame pointers; the chains it walks
// through live here (with), in test_unwind_nofp.cpp (without), in a linked
// shared library (without) and in dlopen'ed modules. Function identity comes
// from libgcc's _Unwind_Find_FDE, independent of the code under test.
#include "test_unwind_probe.h"
#include "unwind.h"
#include "unwind_cfi.h"
#include "unwind_state.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

using memlayout::preload::parse_unwind_method;
using memlayout::preload::unwind;
using memlayout::preload::unwind_method_name;
using memlayout::preload::UnwindMethod;
using memlayout::preload::UnwindStart;
namespace cfi = memlayout::preload::cfi;

struct dwarf_eh_bases {
  void *tbase;
  void *dbase;
  void *func;
};
extern "C" const void *_Unwind_Find_FDE(void *pc, dwarf_eh_bases *bases);

namespace {

constexpr UnwindMethod kFp = UnwindMethod::kFramePointer;
constexpr UnwindMethod kCfi = UnwindMethod::kCfi;
constexpr UnwindMethod kDwarf = UnwindMethod::kDwarf;
constexpr UnwindMethod kAll[] = {kFp, kCfi, kDwarf};

size_t idx(UnwindMethod m) { return static_cast<size_t>(m); }

// Start of the function whose code contains `addr`, or 0.
uintptr_t function_at(uintptr_t addr) {
  dwarf_eh_bases b{};
  if (!_Unwind_Find_FDE(reinterpret_cast<void *>(addr), &b))
    return 0;
  return reinterpret_cast<uintptr_t>(b.func);
}
// The function a return address returns into (its call is at ra - 1).
uintptr_t function_of_ra(uintptr_t ra) { return function_at(ra - 1); }
template <typename R, typename... A> uintptr_t fn(R (*f)(A...)) {
  return function_at(reinterpret_cast<uintptr_t>(f));
}

std::string symbolize(uintptr_t pc) {
  Dl_info info{};
  char buf[64];
  snprintf(buf, sizeof buf, "%#lx", static_cast<unsigned long>(pc));
  std::string s = buf;
  if (dladdr(reinterpret_cast<void *>(pc - 1), &info) && info.dli_sname)
    s += std::string(" ") + info.dli_sname;
  else if (info.dli_fname)
    s += std::string(" in ") + info.dli_fname;
  return s;
}

std::string describe(const UnwindProbe &p, UnwindMethod m) {
  std::string s = std::string(unwind_method_name(m)) + ":";
  for (size_t i = 0; i < p.n[idx(m)]; ++i)
    s += "\n  " + std::to_string(i) + " " + symbolize(p.frames[idx(m)][i]);
  return s;
}

bool is_code_address(uintptr_t pc) {
  Dl_info info{};
  return pc > 4096 && dladdr(reinterpret_cast<void *>(pc - 1), &info) != 0;
}

// The frames of `m` start with exactly these functions, innermost first.
void check_chain(const UnwindProbe &p, UnwindMethod m, std::initializer_list<uintptr_t> funcs) {
  INFO(describe(p, m));
  REQUIRE(p.n[idx(m)] >= funcs.size());
  size_t i = 0;
  for (uintptr_t f : funcs) {
    INFO("frame " << i);
    REQUIRE(f != 0);
    CHECK(function_of_ra(p.frames[idx(m)][i]) == f);
    ++i;
  }
}

// kCfi must reproduce libgcc's walk frame for frame; `whole` also requires
// that it got as far (it may stop earlier only at frames it cannot represent).
void check_cfi_equals_dwarf(const UnwindProbe &p, bool whole = true) {
  INFO(describe(p, kCfi));
  INFO(describe(p, kDwarf));
  size_t n = std::min(p.n[idx(kCfi)], p.n[idx(kDwarf)]);
  REQUIRE(n >= 1);
  for (size_t i = 0; i < n; ++i) {
    INFO("frame " << i);
    CHECK(p.frames[idx(kCfi)][i] == p.frames[idx(kDwarf)][i]);
  }
  if (whole)
    CHECK(p.n[idx(kCfi)] == p.n[idx(kDwarf)]);
  else
    CHECK(p.n[idx(kCfi)] <= p.n[idx(kDwarf)]);
}

// Every frame a method returns is a code address, whatever it skipped.
void check_all_code(const UnwindProbe &p, UnwindMethod m) {
  INFO(describe(p, m));
  for (size_t i = 0; i < p.n[idx(m)]; ++i) {
    INFO("frame " << i);
    CHECK(is_code_address(p.frames[idx(m)][i]));
  }
}

} // namespace

extern "C" {

// The "entry point": compiled with frame pointers, like an interposed malloc.
[[gnu::noipa]] int unwind_test_capture(UnwindProbe *p) {
  const UnwindStart start = MEMLAYOUT_UNWIND_START();
  for (UnwindMethod m : kAll)
    p->n[idx(m)] = unwind(m, start, p->frames[idx(m)], p->max_depth);
  asm volatile("" ::: "memory");
  return 1;
}

// Async-signal-safe subset: libgcc's unwinder may take a mutex.
[[gnu::noipa]] int unwind_test_capture_fast(UnwindProbe *p) {
  const UnwindStart start = MEMLAYOUT_UNWIND_START();
  p->n[idx(kFp)] = unwind(kFp, start, p->frames[idx(kFp)], p->max_depth);
  p->n[idx(kCfi)] = unwind(kCfi, start, p->frames[idx(kCfi)], p->max_depth);
  asm volatile("" ::: "memory");
  return 1;
}

[[gnu::noipa]] uintptr_t unwind_test_return_address() {
  return reinterpret_cast<uintptr_t>(__builtin_return_address(0));
}

[[gnu::noipa]] int unwind_fp_d(UnwindProbe *p) {
  int r = p->capture(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
[[gnu::noipa]] int unwind_fp_c(UnwindProbe *p) {
  int r = unwind_fp_d(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
[[gnu::noipa]] int unwind_fp_b(UnwindProbe *p) {
  int r = unwind_fp_c(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
[[gnu::noipa]] int unwind_fp_a(UnwindProbe *p) {
  int r = unwind_fp_b(p);
  asm volatile("" ::: "memory");
  return r + 1;
}

} // extern "C"

// The function the current test case body was compiled into.
#define THIS_FUNCTION() function_of_ra(unwind_test_return_address())

TEST_CASE("unwind: method names round-trip", "[unwind]") {
  for (UnwindMethod m : kAll) {
    UnwindMethod parsed{};
    REQUIRE(parse_unwind_method(unwind_method_name(m), &parsed));
    CHECK(parsed == m);
  }
  UnwindMethod out = kCfi;
  CHECK_FALSE(parse_unwind_method("libunwind", &out));
  CHECK_FALSE(parse_unwind_method("", &out));
  CHECK_FALSE(parse_unwind_method("CFI", &out));
  CHECK_FALSE(parse_unwind_method(nullptr, &out));
  CHECK(out == kCfi);
}

TEST_CASE("unwind: chain with frame pointers", "[unwind]") {
  const uintptr_t self = THIS_FUNCTION();
  UnwindProbe p;
  p.capture = unwind_test_capture;
  unwind_fp_a(&p);
  for (UnwindMethod m : kAll)
    check_chain(p, m, {fn(unwind_fp_d), fn(unwind_fp_c), fn(unwind_fp_b), fn(unwind_fp_a), self});
  check_cfi_equals_dwarf(p);
  // Outside this file frame pointers are not guaranteed, but whatever the
  // walk returned must still be code.
  check_all_code(p, kFp);
}

TEST_CASE("unwind: chain without frame pointers", "[unwind]") {
  const uintptr_t self = THIS_FUNCTION();
  UnwindProbe p;
  p.capture = unwind_test_capture;
  SECTION("rbp untouched") { p.rbp_mode = 0; }
  SECTION("rbp holds a constant") { p.rbp_mode = 1; }
  SECTION("rbp points at a fake frame on the stack") { p.rbp_mode = 2; }
  unwind_nofp_a(&p);
  for (UnwindMethod m : {kCfi, kDwarf})
    check_chain(p, m,
                {fn(unwind_nofp_d), fn(unwind_nofp_c), fn(unwind_nofp_b), fn(unwind_nofp_a), self});
  check_cfi_equals_dwarf(p);
  // The frame-pointer walk cannot be right here; it must stop at garbage
  // and never report a non-code address.
  INFO(describe(p, kFp));
  CHECK(function_of_ra(p.frames[idx(kFp)][0]) == fn(unwind_nofp_d));
  check_all_code(p, kFp);
  if (p.rbp_mode != 0)
    CHECK(p.n[idx(kFp)] == 1);
}

TEST_CASE("unwind: shared library without frame pointers", "[unwind]") {
  const uintptr_t self = THIS_FUNCTION();
  UnwindProbe p;
  p.capture = unwind_test_capture;
  unwind_lib_a(&p);
  for (UnwindMethod m : {kCfi, kDwarf})
    check_chain(p, m, {fn(unwind_lib_c), fn(unwind_lib_b), fn(unwind_lib_a), self});
  check_cfi_equals_dwarf(p);
  check_all_code(p, kFp);
}

TEST_CASE("unwind: depth limits", "[unwind]") {
  UnwindProbe full;
  full.capture = unwind_test_capture;
  unwind_fp_a(&full);
  for (size_t depth : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}}) {
    UnwindProbe p;
    p.capture = unwind_test_capture;
    p.max_depth = depth;
    for (auto &row : p.frames)
      std::fill(std::begin(row), std::end(row), uintptr_t{0xdead});
    unwind_fp_a(&p);
    for (UnwindMethod m : kAll) {
      INFO(unwind_method_name(m) << " depth " << depth);
      REQUIRE(p.n[idx(m)] == depth);
      // Frame 4 is this function, at another call site than full's.
      for (size_t i = 0; i < depth; ++i)
        CHECK(function_of_ra(p.frames[idx(m)][i]) == function_of_ra(full.frames[idx(m)][i]));
      for (size_t i = 0; i < std::min(depth, size_t{4}); ++i)
        CHECK(p.frames[idx(m)][i] == full.frames[idx(m)][i]);
      CHECK(p.frames[idx(m)][depth] == 0xdead); // nothing written past the limit
    }
  }
}

static UnwindProbe *g_qsort_probe;
extern "C" [[gnu::noipa]] int unwind_test_compare(const void *a, const void *b) {
  if (g_qsort_probe) {
    g_qsort_probe->capture(g_qsort_probe);
    g_qsort_probe = nullptr;
  }
  int x = *static_cast<const int *>(a), y = *static_cast<const int *>(b);
  return (x > y) - (x < y);
}

TEST_CASE("unwind: through libc (qsort calling back)", "[unwind]") {
  const uintptr_t self = THIS_FUNCTION();
  UnwindProbe p;
  p.capture = unwind_test_capture_fast;
  UnwindProbe ref;
  ref.capture = unwind_test_capture;
  for (UnwindProbe *probe : {&ref, &p}) {
    int values[64];
    for (int i = 0; i < 64; ++i)
      values[i] = (i * 37) % 64;
    g_qsort_probe = probe;
    qsort(values, 64, sizeof(int), unwind_test_compare);
    REQUIRE(g_qsort_probe == nullptr);
  }
  // Same call site, same stack: compare the cold (ref) and warm walks too.
  INFO(describe(ref, kCfi));
  REQUIRE(ref.n[idx(kCfi)] >= 3);
  CHECK(function_of_ra(ref.frames[idx(kCfi)][0]) == fn(unwind_test_compare));
  const uintptr_t *begin = ref.frames[idx(kCfi)], *end = begin + ref.n[idx(kCfi)];
  CHECK(std::find_if(begin, end, [&](uintptr_t f) { return function_of_ra(f) == self; }) != end);
  check_cfi_equals_dwarf(ref);
  CHECK(p.n[idx(kCfi)] == ref.n[idx(kCfi)]);
}

namespace {
int walk_in_callback(dl_phdr_info *, size_t, void *arg) {
  auto *p = static_cast<UnwindProbe *>(arg);
  unwind_nofp_a(p);
  return 1;
}
} // namespace

TEST_CASE("unwind: cold cache while the loader lock is held", "[unwind]") {
  // A dl_iterate_phdr callback runs under the lock that the cfi method's
  // cache misses take (recursively) too.
  memlayout::preload::unwind_modules_changed(); // empties the rule cache
  UnwindProbe p;
  p.capture = unwind_test_capture;
  dl_iterate_phdr(walk_in_callback, &p);
  check_chain(p, kCfi,
              {fn(unwind_nofp_d), fn(unwind_nofp_c), fn(unwind_nofp_b), fn(unwind_nofp_a),
               fn(walk_in_callback)});
  check_cfi_equals_dwarf(p);
}

TEST_CASE("unwind: start outside any known stack", "[unwind]") {
  // A heap buffer posing as a stack: no method may read it.
  std::vector<uintptr_t> heap(64, 0);
  for (size_t i = 0; i + 1 < heap.size(); i += 2) {
    heap[i] = reinterpret_cast<uintptr_t>(&heap[i + 2]);
    heap[i + 1] = reinterpret_cast<uintptr_t>(&unwind_fp_a) + 4;
  }
  UnwindStart s{reinterpret_cast<uintptr_t>(&unwind_fp_a) + 4,
                reinterpret_cast<uintptr_t>(&heap[0]), reinterpret_cast<uintptr_t>(&heap[0])};
  uintptr_t frames[16];
  CHECK(unwind(kFp, s, frames, 16) == 1);
  CHECK(unwind(kCfi, s, frames, 16) == 1);
  CHECK(frames[0] == s.pc);
}

namespace {
UnwindProbe *g_ctx_probe;
ucontext_t g_main_ctx, g_coro_ctx;
void coroutine_body() { unwind_nofp_a(g_ctx_probe); }
} // namespace

TEST_CASE("unwind: on a user-allocated stack (makecontext)", "[unwind]") {
  // Not a thread stack, not a sigaltstack: the bounds are unknown, so the
  // stack-reading methods must stop at once rather than guess.
  std::vector<char> stack(256 * 1024);
  UnwindProbe p;
  p.capture = unwind_test_capture_fast;
  g_ctx_probe = &p;
  REQUIRE(getcontext(&g_coro_ctx) == 0);
  g_coro_ctx.uc_stack.ss_sp = stack.data();
  g_coro_ctx.uc_stack.ss_size = stack.size();
  g_coro_ctx.uc_link = &g_main_ctx;
  makecontext(&g_coro_ctx, coroutine_body, 0);
  REQUIRE(swapcontext(&g_main_ctx, &g_coro_ctx) == 0);
  CHECK(p.n[idx(kFp)] == 1);
  CHECK(p.n[idx(kCfi)] == 1);
  CHECK(function_of_ra(p.frames[idx(kCfi)][0]) == fn(unwind_nofp_d));
}

namespace {
using ChainFn = int (*)(UnwindProbe *);
ChainFn load_chain(void *handle) {
  return reinterpret_cast<ChainFn>(dlsym(handle, "unwind_dlmod_a"));
}
[[gnu::noipa]] void check_dlmod_walk(void *handle) {
  const uintptr_t caller = THIS_FUNCTION();
  ChainFn a = load_chain(handle);
  REQUIRE(a != nullptr);
  auto b = reinterpret_cast<ChainFn>(dlsym(handle, "unwind_dlmod_b"));
  UnwindProbe p;
  p.capture = unwind_test_capture;
  a(&p);
  check_chain(p, kCfi, {fn(b), fn(a), caller});
  check_cfi_equals_dwarf(p);
}
} // namespace

TEST_CASE("unwind: modules loaded after the first unwind", "[unwind]") {
  UnwindProbe warm;
  warm.capture = unwind_test_capture;
  unwind_fp_a(&warm); // the module list has been seen before the dlopen
  void *h1 = dlopen(UNWIND_DLMOD_A, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h1 != nullptr);
  check_dlmod_walk(h1);
  uintptr_t a1 = reinterpret_cast<uintptr_t>(dlsym(h1, "unwind_dlmod_b"));
  REQUIRE(dlclose(h1) == 0);

  // A module with other frame sizes, same layout: if it lands where the first
  // one was, stale rules would misplace every CFA.
  void *h2 = dlopen(UNWIND_DLMOD_B, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h2 != nullptr);
  uintptr_t a2 = reinterpret_cast<uintptr_t>(dlsym(h2, "unwind_dlmod_b"));
  INFO("second module at the first one's address: " << (a1 == a2));
  memlayout::preload::unwind_modules_changed();
  check_dlmod_walk(h2);
  REQUIRE(dlclose(h2) == 0);
}

namespace {
// One call site for loops that compare walks with each other (the compiler
// may otherwise duplicate a loop's call, giving two return addresses).
[[gnu::noipa]] void walk_nofp(UnwindProbe *p) {
  unwind_nofp_a(p);
  asm volatile("" ::: "memory");
}

struct ThreadResult {
  bool flusher = false; // also empties the rule cache now and then
  bool ok = true;
  size_t iterations = 0;
  std::string failure;
};

void *thread_body(void *arg) {
  auto *res = static_cast<ThreadResult *>(arg);
  const uintptr_t expect[] = {fn(unwind_nofp_d), fn(unwind_nofp_c), fn(unwind_nofp_b),
                              fn(unwind_nofp_a), fn(walk_nofp),     fn(thread_body)};
  auto fail = [&](const std::string &why, const UnwindProbe &p) {
    res->ok = false;
    res->failure = why + "\n" + describe(p, kCfi) + "\n" + describe(p, kDwarf);
    return nullptr;
  };
  UnwindProbe first;
  for (int i = 0; i < 3000; ++i) {
    UnwindProbe p;
    // The first walk of each chain also runs libgcc's, as the reference.
    p.capture = i < 2 ? unwind_test_capture : unwind_test_capture_fast;
    if (i % 2) {
      walk_nofp(&p);
      if (i == 1) {
        first = p;
        if (p.n[idx(kCfi)] != p.n[idx(kDwarf)] ||
            !std::equal(p.frames[idx(kCfi)], p.frames[idx(kCfi)] + p.n[idx(kCfi)],
                        p.frames[idx(kDwarf)]))
          return fail("cfi differs from dwarf", p);
        for (size_t f = 0; f < 6; ++f)
          if (f >= p.n[idx(kCfi)] || function_of_ra(p.frames[idx(kCfi)][f]) != expect[f])
            return fail("wrong frame " + std::to_string(f), p);
      } else if (p.n[idx(kCfi)] != first.n[idx(kCfi)] ||
                 !std::equal(p.frames[idx(kCfi)], p.frames[idx(kCfi)] + 5,
                             first.frames[idx(kCfi)]) ||
                 function_of_ra(p.frames[idx(kCfi)][5]) != expect[5]) {
        // (Frame 5 may be another copy of the call site in thread_body.)
        return fail("iteration " + std::to_string(i) + " differs from\n" + describe(first, kCfi),
                    p);
      }
    } else {
      unwind_fp_a(&p); // other pcs, other cache entries
    }
    if (i % 500 == 0 && res->flusher)
      memlayout::preload::unwind_modules_changed(); // rebuild caches under readers
    ++res->iterations;
  }
  return nullptr;
}

bool run_thread(pthread_attr_t *attr, ThreadResult *res) {
  pthread_t t;
  if (pthread_create(&t, attr, thread_body, res) != 0)
    return false;
  return pthread_join(t, nullptr) == 0;
}
} // namespace

TEST_CASE("unwind: concurrent threads agree", "[unwind]") {
  ThreadResult res[4];
  res[0].flusher = true;
  pthread_t t[4];
  for (int i = 0; i < 4; ++i)
    REQUIRE(pthread_create(&t[i], nullptr, thread_body, &res[i]) == 0);
  for (int i = 0; i < 4; ++i)
    REQUIRE(pthread_join(t[i], nullptr) == 0);
  for (auto &r : res) {
    INFO(r.failure);
    CHECK(r.ok);
    CHECK(r.iterations == 3000);
  }
}

TEST_CASE("unwind: threads with small and caller-provided stacks", "[unwind]") {
  ThreadResult res;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  SECTION("small stack") { REQUIRE(pthread_attr_setstacksize(&attr, 64 * 1024) == 0); }
  std::vector<char> own;
  SECTION("caller-provided stack") {
    own.resize(256 * 1024);
    REQUIRE(pthread_attr_setstack(&attr, own.data(), own.size()) == 0);
  }
  REQUIRE(run_thread(&attr, &res));
  pthread_attr_destroy(&attr);
  INFO(res.failure);
  CHECK(res.ok);
}

namespace {
UnwindProbe g_sig_probe;
volatile sig_atomic_t g_sig_chain = 0;

void probe_handler(int, siginfo_t *, void *) {
  if (g_sig_chain)
    unwind_nofp_a(&g_sig_probe);
  else
    unwind_fp_a(&g_sig_probe);
  asm volatile("" ::: "memory"); // not a tail call: this frame must exist
}

struct ScopedHandler {
  int sig;
  struct sigaction old {};
  ScopedHandler(int s, void (*h)(int, siginfo_t *, void *), int flags) : sig(s) {
    struct sigaction sa {};
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | flags;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, &old);
  }
  ~ScopedHandler() { sigaction(sig, &old, nullptr); }
};
} // namespace

TEST_CASE("unwind: inside a signal handler", "[unwind]") {
  int flags = 0;
  stack_t alt{}, old_alt{};
  std::vector<char> alt_mem;
  SECTION("on the thread's stack") {}
  SECTION("on a sigaltstack") {
    alt_mem.resize(128 * 1024);
    alt.ss_sp = alt_mem.data();
    alt.ss_size = alt_mem.size();
    REQUIRE(sigaltstack(&alt, &old_alt) == 0);
    flags = SA_ONSTACK;
  }
  for (int chain = 0; chain < 2; ++chain) {
    g_sig_chain = chain;
    g_sig_probe = UnwindProbe{};
    g_sig_probe.capture = unwind_test_capture;
    {
      ScopedHandler h(SIGUSR1, probe_handler, flags);
      raise(SIGUSR1);
    }
    const UnwindProbe &p = g_sig_probe;
    if (chain)
      check_chain(p, kCfi,
                  {fn(unwind_nofp_d), fn(unwind_nofp_c), fn(unwind_nofp_b), fn(unwind_nofp_a),
                   fn(probe_handler)});
    else
      check_chain(
          p, kFp,
          {fn(unwind_fp_d), fn(unwind_fp_c), fn(unwind_fp_b), fn(unwind_fp_a), fn(probe_handler)});
    // cfi stops at the signal trampoline, which libgcc steps through.
    check_cfi_equals_dwarf(p, false);
    check_all_code(p, kFp);
    check_all_code(p, kCfi);
  }
  if (flags) {
    alt.ss_flags = SS_DISABLE;
    sigaltstack(&old_alt, nullptr);
  }
}

extern "C" {
// Two callers with equal frames: the capture point sees the same pc, sp and
// fp from either, and only the return addresses above tell them apart.
[[gnu::noipa]] int unwind_caller_x(UnwindProbe *p) {
  int r = unwind_nofp_a(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
[[gnu::noipa]] int unwind_caller_y(UnwindProbe *p) {
  int r = unwind_nofp_a(p);
  asm volatile("" ::: "memory");
  return r + 2;
}
}

TEST_CASE("unwind: the stack cache notices a changed stack", "[unwind]") {
  bool seen[2] = {};
  for (int i = 0; i < 200; ++i) {
    UnwindProbe p;
    p.capture = unwind_test_capture_fast;
    p.max_depth = 16;     // within the stack cache's reach
    bool x = (i / 3) % 2; // runs of three: hits, then a switch
    (x ? unwind_caller_x : unwind_caller_y)(&p);
    INFO("iteration " << i << "\n" << describe(p, kCfi));
    REQUIRE(p.n[idx(kCfi)] >= 6);
    CHECK(function_of_ra(p.frames[idx(kCfi)][4]) ==
          (x ? fn(unwind_caller_x) : fn(unwind_caller_y)));
    seen[x] = true;
  }
  CHECK((seen[0] && seen[1]));
}

extern "C" [[gnu::noipa]] int unwind_test_capture_both(UnwindProbe *p) {
  const UnwindStart start = MEMLAYOUT_UNWIND_START();
  p->n[idx(kCfi)] = unwind(kCfi, start, p->frames[idx(kCfi)], p->max_depth);
  // Slot kFp holds the rules-only walk here.
  p->n[idx(kFp)] = cfi::unwind_rules_only(start, p->frames[idx(kFp)], p->max_depth);
  asm volatile("" ::: "memory");
  return 1;
}

TEST_CASE("unwind: stack cache hits equal fresh walks", "[unwind]") {
  for (int i = 0; i < 50; ++i) {
    UnwindProbe p;
    p.capture = unwind_test_capture_both;
    p.max_depth = i % 2 ? 8 : 32;
    if (i % 3)
      unwind_lib_a(&p);
    else
      unwind_nofp_a(&p);
    INFO(describe(p, kCfi) << "\n" << describe(p, kFp));
    REQUIRE(p.n[idx(kCfi)] == p.n[idx(kFp)]);
    CHECK(
        std::equal(p.frames[idx(kCfi)], p.frames[idx(kCfi)] + p.n[idx(kCfi)], p.frames[idx(kFp)]));
  }
}

namespace {
// The handler only records: libgcc's FDE lookup (used to check) takes a mutex
// that the interrupted code may hold.
struct StormRecord {
  size_t n;
  uintptr_t frames[6];
};
constexpr int kStormRecords = 256;
StormRecord g_storm[kStormRecords];
std::atomic<int> g_storm_count{0};

void storm_handler(int, siginfo_t *, void *) {
  UnwindProbe p;
  p.capture = unwind_test_capture_fast;
  unwind_nofp_a(&p);
  int i = g_storm_count.fetch_add(1, std::memory_order_relaxed);
  if (i < kStormRecords) {
    g_storm[i].n = p.n[idx(kCfi)];
    std::copy(p.frames[idx(kCfi)], p.frames[idx(kCfi)] + 6, g_storm[i].frames);
  }
}
} // namespace

TEST_CASE("unwind: signals arriving in the middle of unwinds", "[unwind]") {
  UnwindProbe first;
  g_storm_count = 0;
  size_t done = 0, wrong = 0;
  {
    ScopedHandler h(SIGPROF, storm_handler, 0);
    itimerval every{{0, 200}, {0, 200}};
    REQUIRE(setitimer(ITIMER_PROF, &every, nullptr) == 0);
    for (int i = 0; i < 20000 || (g_storm_count.load() < 20 && i < 2000000); ++i) {
      if (i % 1000 == 0)
        memlayout::preload::unwind_modules_changed(); // cold misses in both contexts
      UnwindProbe p;
      p.capture = i == 0 ? unwind_test_capture : unwind_test_capture_fast;
      walk_nofp(&p);
      if (i == 0) {
        first = p;
        check_cfi_equals_dwarf(first);
      } else if (p.n[idx(kCfi)] != first.n[idx(kCfi)] ||
                 !std::equal(p.frames[idx(kCfi)], p.frames[idx(kCfi)] + 5, first.frames[idx(kCfi)]))
        ++wrong;
      ++done;
    }
    itimerval off{};
    setitimer(ITIMER_PROF, &off, nullptr);
  }
  INFO(done << " unwinds, " << g_storm_count.load() << " signals");
  CHECK(wrong == 0);
  REQUIRE(g_storm_count.load() >= 20);
  const uintptr_t expect[] = {fn(unwind_nofp_d), fn(unwind_nofp_c), fn(unwind_nofp_b),
                              fn(unwind_nofp_a), fn(storm_handler)};
  // A handler that interrupts the unwinder inside the loader's module walk
  // must not walk the modules itself (see in_loader): it stops early, but
  // whatever it returns is right.
  int complete = 0, records = std::min(g_storm_count.load(), kStormRecords);
  for (int i = 0; i < records; ++i) {
    INFO("signal " << i);
    REQUIRE(g_storm[i].n >= 1);
    complete += g_storm[i].n >= 5;
    for (size_t f = 0; f < std::min(g_storm[i].n, size_t{5}); ++f)
      CHECK(function_of_ra(g_storm[i].frames[f]) == expect[f]);
  }
  CHECK(complete * 2 >= records);
}

// --- The CFA program interpreter on hand-written programs -------------------

namespace {
// x86-64 CIE initial instructions: CFA = rsp + 8, return address at CFA - 8.
const uint8_t kCie[] = {0x0c, 0x07, 0x08, 0x90, 0x01};

cfi::Rule run(std::initializer_list<uint8_t> fde, uintptr_t target) {
  std::vector<uint8_t> bytes(fde);
  return cfi::rule_from_programs(kCie, sizeof kCie, bytes.data(), bytes.size(), 0x1000, target);
}
} // namespace

TEST_CASE("unwind: CFA programs", "[unwind][cfi]") {
  // push rbp; mov rbp, rsp; ...; leave-style epilogue with remember/restore.
  const std::initializer_list<uint8_t> prologue = {
      0x41,             // advance 1
      0x0e, 0x10,       // def_cfa_offset 16
      0x86, 0x02,       // offset r6 at cfa-16
      0x43,             // advance 3
      0x0d, 0x06,       // def_cfa_register r6
      0x4a,             // advance 10
      0x0a,             // remember_state
      0x0c, 0x07, 0x08, // def_cfa rsp+8
      0xc6,             // restore r6
      0x41,             // advance 1
      0x0b,             // restore_state
  };
  SECTION("entry row") {
    cfi::Rule r = run(prologue, 0x1000);
    REQUIRE(r.kind == cfi::Rule::kStep);
    CHECK(r.cfa_base == cfi::Rule::kCfaRsp);
    CHECK(r.cfa_off == 8);
    CHECK(r.rbp == cfi::Rule::kRbpSame);
  }
  SECTION("after push rbp") {
    cfi::Rule r = run(prologue, 0x1003);
    REQUIRE(r.kind == cfi::Rule::kStep);
    CHECK(r.cfa_base == cfi::Rule::kCfaRsp);
    CHECK(r.cfa_off == 16);
    CHECK(r.rbp == cfi::Rule::kRbpSaved);
    CHECK(r.rbp_off == -16);
  }
  SECTION("body uses rbp") {
    cfi::Rule r = run(prologue, 0x1004);
    REQUIRE(r.kind == cfi::Rule::kStep);
    CHECK(r.cfa_base == cfi::Rule::kCfaRbp);
    CHECK(r.cfa_off == 16);
  }
  SECTION("epilogue row after remember_state") {
    cfi::Rule r = run(prologue, 0x100e);
    REQUIRE(r.kind == cfi::Rule::kStep);
    CHECK(r.cfa_base == cfi::Rule::kCfaRsp);
    CHECK(r.cfa_off == 8);
    CHECK(r.rbp == cfi::Rule::kRbpSame);
  }
  SECTION("restore_state brings back CFA and rbp") {
    cfi::Rule r = run(prologue, 0x100f);
    REQUIRE(r.kind == cfi::Rule::kStep);
    CHECK(r.cfa_base == cfi::Rule::kCfaRbp);
    CHECK(r.cfa_off == 16);
    CHECK(r.rbp == cfi::Rule::kRbpSaved);
  }
  SECTION("advance_loc1/2/4 and the _sf forms") {
    const std::initializer_list<uint8_t> prog = {
        0x02, 0x10,                   // advance_loc1 16
        0x13, 0x7c,                   // def_cfa_offset_sf -4 * -8 = 32
        0x03, 0x00, 0x01,             // advance_loc2 256
        0x11, 0x06, 0x7d,             // offset_extended_sf r6 at cfa + -3 * -8
        0x04, 0x00, 0x00, 0x01, 0x00, // advance_loc4 65536
        0x12, 0x07, 0x7f,             // def_cfa_sf rsp, -1 * -8
    };
    cfi::Rule early = run(prog, 0x1000 + 15);
    CHECK(early.cfa_off == 8);
    cfi::Rule mid = run(prog, 0x1000 + 16);
    CHECK(mid.cfa_off == 32);
    CHECK(mid.rbp == cfi::Rule::kRbpSame);
    cfi::Rule late = run(prog, 0x1000 + 16 + 256);
    CHECK(late.cfa_off == 32);
    CHECK(late.rbp == cfi::Rule::kRbpSaved);
    CHECK(late.rbp_off == 24);
    cfi::Rule last = run(prog, 0x1000 + 16 + 256 + 65536);
    CHECK(last.cfa_off == 8);
  }
  SECTION("unrepresentable rows stop the walk") {
    // def_cfa_expression (as in PLT stubs)
    CHECK(run({0x0f, 0x02, 0x77, 0x08}, 0x1000).kind == cfi::Rule::kEnd);
    // CFA based on r10 (stack realignment)
    CHECK(run({0x0c, 0x0a, 0x00}, 0x1000).kind == cfi::Rule::kEnd);
    // return address undefined (outermost frame)
    CHECK(run({0x07, 0x10}, 0x1000).kind == cfi::Rule::kEnd);
    // return address somewhere else than CFA - 8
    CHECK(run({0x90, 0x02}, 0x1000).kind == cfi::Rule::kEnd);
    // unknown opcode
    CHECK(run({0x3f}, 0x1000).kind == cfi::Rule::kEnd);
    // restore_state without remember_state
    CHECK(run({0x0b}, 0x1000).kind == cfi::Rule::kEnd);
    // truncated operand
    CHECK(run({0x0c, 0x07}, 0x1000).kind == cfi::Rule::kEnd);
  }
  SECTION("rbp in another register is lost, not guessed") {
    cfi::Rule r = run({0x09, 0x06, 0x03}, 0x1000); // register r6 in rbx
    REQUIRE(r.kind == cfi::Rule::kStep);
    CHECK(r.rbp == cfi::Rule::kRbpLost);
    r = run({0x16, 0x06, 0x01, 0x00}, 0x1000); // val_expression
    CHECK(r.rbp == cfi::Rule::kRbpLost);
  }
  SECTION("rules pack losslessly") {
    cfi::Rule r;
    r.kind = cfi::Rule::kStep;
    r.cfa_base = cfi::Rule::kCfaRbp;
    r.rbp = cfi::Rule::kRbpSaved;
    r.rbp_off = -1024;
    r.cfa_off = 0x7fffff00;
    uint64_t v = cfi::pack(r, 0xbeef);
    cfi::Rule u = cfi::unpack(v);
    CHECK(cfi::packed_tag(v) == 0xbeef);
    CHECK(u.kind == r.kind);
    CHECK(u.cfa_base == r.cfa_base);
    CHECK(u.rbp == r.rbp);
    CHECK(u.rbp_off == r.rbp_off);
    CHECK(u.cfa_off == r.cfa_off);
  }
}

// The memo is per verified stack: what the caller stored comes back for the
// same stack, and a different stack starts from 0.
[[gnu::noipa]] uint32_t *unwind_memo_probe(UnwindMethod m) {
  UnwindStart s = MEMLAYOUT_UNWIND_START();
  uintptr_t frames[8];
  uint32_t *memo = reinterpret_cast<uint32_t *>(1);
  unwind(m, s, frames, 8, &memo);
  return memo;
}
[[gnu::noipa]] uint32_t *unwind_memo_site_a(UnwindMethod m) { return unwind_memo_probe(m); }
[[gnu::noipa]] uint32_t *unwind_memo_site_b(UnwindMethod m) { return unwind_memo_probe(m); }

TEST_CASE("unwind: the stack cache's memo follows the stack", "[unwind]") {
  for (int round = 0; round < 3; ++round) {
    uint32_t *a = unwind_memo_site_a(kCfi);
    REQUIRE(a != nullptr);
    if (round == 0) {
      CHECK(*a == 0);
      *a = 7;
    } else {
      CHECK(*a == 7);
    }
  }
  uint32_t *b = unwind_memo_site_b(kCfi);
  REQUIRE(b != nullptr);
  CHECK(*b == 0);
  CHECK(unwind_memo_site_a(kFp) == nullptr);
  CHECK(unwind_memo_site_a(kDwarf) == nullptr);
}

// unwind_memo, the recorder's inline hit check, against the walk that filled
// the entry. The two callers (test_unwind_nofp.cpp) have the same frame, so
// the probe starts from the same pc, sp and fp under both: only a slot above
// (the return address into one caller or the other) tells the stacks apart.
// Their frames save no rbp, so walks read odd numbers of slots too.
struct MemoProbe {
  UnwindStart start;
  uint32_t *memo;       // unwind_memo's answer
  uint32_t *filled;     // unwind's, when asked to fill
  uint32_t *one_deeper; // unwind_memo's for depth + 1, right after the fill
};
bool g_memo_fill;
size_t g_memo_depth;
MemoProbe g_memo_probe;

[[gnu::noipa]] void memo_probe() {
  MemoProbe p{MEMLAYOUT_UNWIND_START(), nullptr, nullptr, nullptr};
  size_t depth = g_memo_depth;
  if (g_memo_fill) {
    uintptr_t frames[8];
    unwind(kCfi, p.start, frames, depth, &p.filled);
    if (p.filled)
      *p.filled = static_cast<uint32_t>(100 + depth);
    p.one_deeper = memlayout::preload::unwind_memo(kCfi, p.start, depth + 1);
  }
  // Nothing above this frame changed since the walk: the check must hit.
  p.memo = memlayout::preload::unwind_memo(kCfi, p.start, depth);
  g_memo_probe = p;
}

// One call site for every caller: the stacks differ in nothing below it.
[[gnu::noipa]] MemoProbe call(void (*caller)(void (*)()), size_t depth, bool fill) {
  g_memo_depth = depth;
  g_memo_fill = fill;
  caller(memo_probe);
  return g_memo_probe;
}

TEST_CASE("unwind: unwind_memo answers only for the very stack the walk saw", "[unwind]") {
  namespace us = memlayout::preload::unwind_state;
  bool odd_seen = false;
  for (size_t depth = 2; depth <= 8; ++depth) {
    CAPTURE(depth);
    MemoProbe p = call(unwind_nofp_memo_caller_a, depth, true);
    REQUIRE(p.filled != nullptr);
    CHECK(p.memo == p.filled);
    CHECK(*p.memo == 100 + depth);
    CHECK(p.one_deeper == nullptr); // filled for another depth
    // The hit check compares slots in pairs: an odd count is padded.
    REQUIRE(us::t_thread.stack_cache != nullptr);
    const us::StackEntry &e = us::stack_entry_for(us::t_thread.stack_cache, p.start);
    CHECK(e.nreads % 2 == 0);
    odd_seen |= e.nreads >= 2 && e.reads[e.nreads - 1].off == e.reads[e.nreads - 2].off;
  }
  CHECK(odd_seen); // the padding was exercised
  // The slot that tells the callers apart is the first of a pair the check
  // compares (caller -> site) or the second (caller -> mid -> site).
  struct Pair {
    void (*a)(void (*)());
    void (*b)(void (*)());
    size_t depth; // the shallowest that reads the slot
  };
  for (Pair pair : {Pair{unwind_nofp_memo_caller_a, unwind_nofp_memo_caller_b, 2},
                    Pair{unwind_nofp_memo_mid_caller_a, unwind_nofp_memo_mid_caller_b, 3}}) {
    CAPTURE(pair.depth);
    if (pair.depth > 2) { // shallower, both stacks are the same
      MemoProbe a = call(pair.a, pair.depth - 1, true);
      REQUIRE(a.memo != nullptr);
      CHECK(call(pair.b, pair.depth - 1, false).memo == a.memo);
    }
    for (size_t depth = pair.depth; depth <= pair.depth + 1; ++depth) {
      CAPTURE(depth);
      MemoProbe a = call(pair.a, depth, true);
      REQUIRE(a.memo != nullptr);
      MemoProbe b = call(pair.b, depth, false);
      REQUIRE(b.start.pc == a.start.pc);
      REQUIRE(b.start.sp == a.start.sp);
      REQUIRE(b.start.fp == a.start.fp);
      CHECK(b.memo == nullptr); // same start, another caller above it
      CHECK(call(pair.a, depth, false).memo == a.memo);
      // Once the other stack is walked, it is the one the entry answers for.
      b = call(pair.b, depth, true);
      REQUIRE(b.filled != nullptr);
      CHECK(b.memo == b.filled);
      CHECK(call(pair.a, depth, false).memo == nullptr);
    }
  }
}
