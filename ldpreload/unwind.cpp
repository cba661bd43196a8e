#include "unwind.h"

#include "unwind_state.h"

#include "spinlock.h"
#include "sys.h"
#include "unwind_cfi.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {
extern void *__libc_stack_end; // ld.so: the initial stack pointer of the main thread

// libgcc's unwinder (<unwind.h> is shadowed by our own header on the include
// path). _Unwind_Reason_Code is an int-sized enum; these are its values.
struct _Unwind_Context;
int _Unwind_Backtrace(int (*trace)(_Unwind_Context *, void *), void *arg);
uintptr_t _Unwind_GetIPInfo(_Unwind_Context *ctx, int *ip_before_insn);
uintptr_t _Unwind_GetCFA(_Unwind_Context *ctx);
}

namespace memlayout::preload {
namespace {

// ---------------------------------------------------------------------------
// Stack bounds of the calling thread (see unwind_state::Thread).

using namespace unwind_state;

struct Range {
  uintptr_t lo, hi;
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); // vDSO: no syscall, signal-safe
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

// The /proc/self/maps line containing `addr`, read with raw file calls and a
// small buffer: no stdio (it allocates) and little stack (this may run on a
// sigaltstack).
bool mapping_containing(uintptr_t addr, Range *out) {
  int fd = sys::open_file("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[512];
  uintptr_t lo = 0, hi = 0;
  int field = 0; // 0: lo, 1: hi, 2: rest of line
  bool found = false;
  for (;;) {
    long n = sys::read_some(fd, buf, sizeof buf);
    if (n <= 0)
      break;
    for (ssize_t i = 0; i < n && !found; ++i) {
      char c = buf[i];
      if (c == '\n') {
        field = 0;
        lo = hi = 0;
      } else if (field == 0) {
        if (c == '-')
          field = 1;
        else if (hexval(c) >= 0)
          lo = lo << 4 | static_cast<uintptr_t>(hexval(c));
      } else if (field == 1) {
        if (hexval(c) >= 0) {
          hi = hi << 4 | static_cast<uintptr_t>(hexval(c));
        } else {
          field = 2;
          if (addr >= lo && addr < hi) {
            *out = {lo, hi};
            found = true;
          }
        }
      }
    }
    if (found)
      break;
  }
  sys::close_file(fd);
  return found;
}

bool on_altstack(uintptr_t sp, Range *out) {
  stack_t ss;
  if (sigaltstack(nullptr, &ss) != 0 || !(ss.ss_flags & SS_ONSTACK))
    return false;
  uintptr_t lo = reinterpret_cast<uintptr_t>(ss.ss_sp);
  if (sp < lo || sp >= lo + ss.ss_size)
    return false;
  *out = {lo, lo + ss.ss_size};
  return true;
}

void init_thread_stack(Thread &t) {
  t.state = StackState::kBusy; // a nested call (malloc below) sees "no bounds"
  t.check_countdown = 1;
  uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  Range r;
  if (syscall(SYS_gettid) == getpid()) {
    // pthread_getattr_np would fopen /proc/self/maps; reading it raw is
    // allocation-free. A process forked from a secondary thread also lands
    // here, on that thread's stack: then `here` is elsewhere.
    uintptr_t top = reinterpret_cast<uintptr_t>(__libc_stack_end);
    if (mapping_containing(top, &r) && here >= r.lo && here < r.hi) {
      t.lo = r.lo;
      t.hi = r.hi;
      t.main_stack = true;
      t.state = StackState::kReady;
      return;
    }
  }
  if (on_altstack(here, &r)) {
    t.state = StackState::kUninit; // the real stack can be learnt later
    return;
  }
  uintptr_t lo = 0, hi = 0;
  if (t.in_getattr) {
    // Inside the program's own pthread_getattr_np, which holds the lock a
    // second call would wait for: the mapping the stack is in, read raw.
    // All of it is readable, which is all the bounds are for.
    if (mapping_containing(here, &r)) {
      lo = r.lo;
      hi = r.hi;
    }
  } else {
    // May malloc (the affinity mask); the interposer's reentrancy guard
    // keeps that from recording, and kBusy keeps it from recursing here.
    pthread_attr_t attr;
    void *addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size != 0) {
        lo = reinterpret_cast<uintptr_t>(addr);
        hi = lo + size;
      }
      pthread_attr_destroy(&attr);
    }
  }
  if (hi == 0) {
    t.state = StackState::kFailed;
    return;
  }
  t.lo = lo;
  t.hi = hi;
  t.main_stack = false;
  t.state = StackState::kReady;
}

// [lo, hi) that unwinding from `sp` may read, or false if unknown.
[[gnu::noinline]] bool stack_bounds_slow(uintptr_t sp, Range *out) {
  Thread &t = t_thread;
  if (t.state == StackState::kUninit)
    init_thread_stack(t);
  if (t.state == StackState::kReady && sp >= t.lo && sp < t.hi) {
    *out = {sp, t.hi};
    return true;
  }
  Range r;
  if (on_altstack(sp, &r)) {
    *out = {sp, r.hi};
    return true;
  }
  if (t.state == StackState::kReady && t.main_stack && sp < t.lo &&
      mapping_containing(t.hi - 1, &r) && sp >= r.lo) {
    t.lo = r.lo; // the main stack grew since we looked
    *out = {sp, t.hi};
    return true;
  }
  return false;
}

inline bool stack_bounds(uintptr_t sp, Range *out) {
  const Thread &t = t_thread;
  if (t.state == StackState::kReady && sp >= t.lo && sp < t.hi) [[likely]] {
    *out = {sp, t.hi};
    return true;
  }
  return stack_bounds_slow(sp, out);
}

inline bool stack_readable(const Range &s, uintptr_t addr) {
  return addr >= s.lo && addr <= s.hi - 8 && (addr & 7) == 0;
}

inline uintptr_t load(uintptr_t addr) { return *reinterpret_cast<const uintptr_t *>(addr); }

// ---------------------------------------------------------------------------
// Loaded modules. dl_iterate_phdr counts loads (adds) and unloads (subs);
// every pass we make notes them so that cached facts about addresses go stale
// when the address space changes.

std::atomic<uint64_t> g_seen_subs{0};
std::atomic<bool> g_epoch_bumping{false};

void bump_epoch();

void note_dl_counts(dl_phdr_info *info, size_t size) {
  if (size < offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
    return;
  // Both counters only grow; keep the maximum so that a slow observer of an
  // older list cannot roll them back.
  uint64_t adds = info->dlpi_adds;
  uint64_t seen = g_seen_adds.load(std::memory_order_relaxed);
  while (adds > seen && !g_seen_adds.compare_exchange_weak(seen, adds))
    ;
  uint64_t subs = info->dlpi_subs;
  seen = g_seen_subs.load(std::memory_order_relaxed);
  while (subs > seen) {
    if (g_seen_subs.compare_exchange_weak(seen, subs)) {
      bump_epoch(); // rules of unloaded code must not serve code mapped there next
      break;
    }
  }
}

// Executable ranges of all modules, sorted, for kFramePointer's "is this a
// code address" test. Published under a sequence lock; refreshed (rarely) by
// whichever thread misses, never waiting for another refresher.
constexpr int kMaxCodeRanges = 4096;
struct CodeTable {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> count{0};
  std::atomic<uintptr_t> lo[kMaxCodeRanges];
  std::atomic<uintptr_t> hi[kMaxCodeRanges];
};
CodeTable g_code;
Range g_code_scratch[kMaxCodeRanges]; // owned by the holder of g_code_refreshing
int g_code_scratch_n;
std::atomic<bool> g_code_refreshing{false};
std::atomic<uint64_t> g_code_refreshed_ns{0};
std::atomic<uint64_t> g_code_refreshed_adds{~uint64_t{0}};

int collect_code_cb(dl_phdr_info *info, size_t size, void *) {
  note_dl_counts(info, size);
  for (int i = 0; i < info->dlpi_phnum && g_code_scratch_n < kMaxCodeRanges; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz)
      g_code_scratch[g_code_scratch_n++] = {info->dlpi_addr + ph.p_vaddr,
                                            info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
  }
  return 0;
}

// Runs dl_iterate_phdr unless this thread is already inside it (see in_loader).
bool iterate_modules(int (*cb)(dl_phdr_info *, size_t, void *), void *arg) {
  Thread &t = t_thread;
  if (t.in_loader)
    return false;
  t.in_loader = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  dl_iterate_phdr(cb, arg);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.in_loader = false;
  return true;
}

void refresh_code_table() {
  if (t_thread.in_loader || g_code_refreshing.exchange(true, std::memory_order_acquire))
    return; // someone else is at it; never wait (we may hold the loader lock)
  g_code_scratch_n = 0;
  if (!iterate_modules(collect_code_cb, nullptr)) {
    g_code_refreshing.store(false, std::memory_order_release);
    return;
  }
  std::sort(g_code_scratch, g_code_scratch + g_code_scratch_n,
            [](const Range &a, const Range &b) { return a.lo < b.lo; });
  uint32_t s = g_code.seq.load(std::memory_order_relaxed);
  g_code.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int i = 0; i < g_code_scratch_n; ++i) {
    g_code.lo[i].store(g_code_scratch[i].lo, std::memory_order_relaxed);
    g_code.hi[i].store(g_code_scratch[i].hi, std::memory_order_relaxed);
  }
  g_code.count.store(static_cast<uint32_t>(g_code_scratch_n), std::memory_order_relaxed);
  g_code.seq.store(s + 2, std::memory_order_release);
  g_code_refreshed_adds.store(g_seen_adds.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  g_code_refreshed_ns.store(now_ns(), std::memory_order_relaxed);
  g_code_refreshing.store(false, std::memory_order_release);
}

bool code_table_find(uintptr_t addr, Range *out) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint32_t s = g_code.seq.load(std::memory_order_acquire);
    if (s & 1)
      continue;
    uint32_t lo = 0, hi = g_code.count.load(std::memory_order_relaxed);
    if (hi > kMaxCodeRanges)
      continue;
    while (lo < hi) { // first range whose end is above addr
      uint32_t mid = (lo + hi) / 2;
      if (g_code.hi[mid].load(std::memory_order_relaxed) <= addr)
        lo = mid + 1;
      else
        hi = mid;
    }
    Range r{0, 0};
    uint32_t n = g_code.count.load(std::memory_order_relaxed);
    if (lo < n && lo < kMaxCodeRanges)
      r = {g_code.lo[lo].load(std::memory_order_relaxed),
           g_code.hi[lo].load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_code.seq.load(std::memory_order_relaxed) != s)
      continue;
    if (addr >= r.lo && addr < r.hi) {
      *out = r;
      return true;
    }
    return false;
  }
  return false;
}

// Whether `ra` can be a return address: the call before it lies in a
// module's executable segment.
bool is_code(Thread &t, uintptr_t ra) {
  uintptr_t a = ra - 1;
  if (a >= t.code_lo[0] && a < t.code_hi[0])
    return true;
  if (a >= t.code_lo[1] && a < t.code_hi[1]) {
    std::swap(t.code_lo[0], t.code_lo[1]);
    std::swap(t.code_hi[0], t.code_hi[1]);
    return true;
  }
  Range r;
  bool found = code_table_find(a, &r);
  if (!found) {
    // Maybe a module loaded since: look again, at most once a millisecond
    // (garbage in a frame-pointer chain must not cost a loader walk each time).
    uint64_t now = now_ns();
    if (now - g_code_refreshed_ns.load(std::memory_order_relaxed) >= 1000000 ||
        g_code.count.load(std::memory_order_relaxed) == 0) {
      refresh_code_table();
      found = code_table_find(a, &r);
    }
  }
  if (!found)
    return false;
  t.code_lo[1] = t.code_lo[0];
  t.code_hi[1] = t.code_hi[0];
  t.code_lo[0] = r.lo;
  t.code_hi[0] = r.hi;
  return true;
}

// ---------------------------------------------------------------------------
// Rule cache: return address -> packed cfi::Rule, open addressing in mmap'd
// memory. Two tables alternate across epochs: a bump zeroes the idle one and
// switches, so invalidation costs no walk over live entries. A slot is
// published with a single release store of its key; readers confirm the key
// after loading the value (a slot is only ever reused for another key after
// its value's epoch tag went stale, which the reader checks too).

constexpr unsigned kCacheBits = 18; // 256 Ki slots, 4 MiB per table, touched lazily
constexpr size_t kCacheSlots = size_t{1} << kCacheBits;
constexpr unsigned kProbe = 16;
constexpr uint64_t kBusyKey = 1; // never a return address

struct Slot {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> val;
};
std::atomic<Slot *> g_tables{nullptr}; // 2 * kCacheSlots

Slot *tables() {
  Slot *t = g_tables.load(std::memory_order_acquire);
  if (t) [[likely]]
    return t;
  void *p = sys::map_pages(2 * kCacheSlots * sizeof(Slot));
  if (!p)
    return nullptr;
  Slot *expected = nullptr;
  if (!g_tables.compare_exchange_strong(expected, static_cast<Slot *>(p))) {
    sys::unmap_pages(p, 2 * kCacheSlots * sizeof(Slot));
    return expected;
  }
  return static_cast<Slot *>(p);
}

void bump_epoch() {
  Slot *t = g_tables.load(std::memory_order_acquire);
  if (g_epoch_bumping.exchange(true, std::memory_order_acquire))
    return; // a concurrent bump serves us as well: it moves to a fresh table
  uint32_t next = g_epoch.load(std::memory_order_relaxed) + 1;
  if (t) // zero pages read back as empty slots
    madvise(t + (next & 1) * kCacheSlots, kCacheSlots * sizeof(Slot), MADV_DONTNEED);
  g_epoch.store(next, std::memory_order_release);
  g_epoch_bumping.store(false, std::memory_order_release);
}

inline size_t slot_of(uintptr_t pc) {
  return static_cast<size_t>((pc * 0x9E3779B97F4A7C15ull) >> (64 - kCacheBits));
}

struct CacheView {
  Slot *slots;
  uint16_t tag;
  uint32_t adds; // low bits of the load count, for kNotCode entries
};

inline bool cache_view(CacheView *v) {
  Slot *t = tables();
  if (!t)
    return false;
  uint32_t e = g_epoch.load(std::memory_order_acquire);
  v->slots = t + (e & 1) * kCacheSlots;
  v->tag = static_cast<uint16_t>(e);
  v->adds = static_cast<uint32_t>(g_seen_adds.load(std::memory_order_relaxed));
  return true;
}

// A valid cached entry, or 0.
inline uint64_t cache_find(const CacheView &v, uintptr_t pc) {
  size_t i = slot_of(pc);
  for (unsigned probe = 0; probe < kProbe; ++probe, i = (i + 1) & (kCacheSlots - 1)) {
    Slot &s = v.slots[i];
    uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == pc) {
      uint64_t val = s.val.load(std::memory_order_acquire);
      if (s.key.load(std::memory_order_relaxed) != pc || cfi::packed_tag(val) != v.tag)
        continue;
      // "Not code" is only true until the next module load.
      if (cfi::packed_kind(val) == cfi::Rule::kNotCode && (val >> 32) != v.adds)
        return 0;
      return val;
    }
    if (k == 0)
      return 0;
  }
  return 0;
}

void cache_insert(const CacheView &v, uintptr_t pc, uint64_t val) {
  size_t i = slot_of(pc);
  for (unsigned probe = 0; probe < kProbe; ++probe, i = (i + 1) & (kCacheSlots - 1)) {
    Slot &s = v.slots[i];
    uint64_t k = s.key.load(std::memory_order_relaxed);
    bool claimable =
        k == 0 || k == pc ||
        (k != kBusyKey && cfi::packed_tag(s.val.load(std::memory_order_relaxed)) != v.tag);
    if (!claimable || !s.key.compare_exchange_strong(k, kBusyKey, std::memory_order_acquire))
      continue;
    s.val.store(val, std::memory_order_release);
    s.key.store(pc, std::memory_order_release);
    return;
  }
  // Probe window full: the rule is recomputed next time. Correct, just slow.
}

struct RuleQuery {
  uintptr_t ra;
  cfi::Rule rule;
  bool in_module;
};

// Runs under the loader's lock, which is what keeps the module mapped while
// its tables are read: dlclose unlinks a module under that lock before it
// unmaps it.
int rule_cb(dl_phdr_info *info, size_t size, void *arg) {
  auto *q = static_cast<RuleQuery *>(arg);
  note_dl_counts(info, size);
  const uintptr_t target = q->ra - 1;
  bool hit = false;
  for (int i = 0; i < info->dlpi_phnum && !hit; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    hit = ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && target >= lo && target - lo < ph.p_memsz;
  }
  if (!hit)
    return 0;
  cfi::ModuleImage m;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && m.nloads < cfi::ModuleImage::kMaxSegments)
      m.loads[m.nloads++] = {lo, lo + ph.p_memsz};
    else if (ph.p_type == PT_GNU_EH_FRAME) {
      m.eh_frame_hdr = lo;
      m.eh_frame_hdr_size = ph.p_memsz;
    }
  }
  q->rule = cfi::rule_for(m, q->ra);
  q->in_module = true;
  return 1;
}

[[gnu::noinline]] uint64_t compute_rule(const CacheView &v, uintptr_t pc) {
  RuleQuery q{pc, {}, false};
  if (!iterate_modules(rule_cb, &q)) {
    cfi::Rule stop; // nested in our own module walk: give up on this frame, uncached
    stop.kind = cfi::Rule::kEnd;
    t_thread.refused = true;
    return cfi::pack(stop, v.tag);
  }
  uint64_t val;
  if (q.in_module) {
    val = cfi::pack(q.rule, v.tag);
  } else {
    cfi::Rule r;
    r.kind = cfi::Rule::kNotCode;
    // The load count as of this walk rides along in the cfa_off bits.
    r.cfa_off = static_cast<int32_t>(static_cast<uint32_t>(g_seen_adds.load()));
    val = cfi::pack(r, v.tag);
  }
  cache_insert(v, pc, val);
  return val;
}

inline uint64_t rule_of(const CacheView &v, uintptr_t pc) {
  uint64_t val = cache_find(v, pc);
  if (val) [[likely]]
    return val;
  return compute_rule(v, pc);
}

// ---------------------------------------------------------------------------
// The methods.

size_t unwind_fp(const UnwindStart &start, const Range &stack, uintptr_t *frames,
                 size_t max_depth) {
  Thread &t = t_thread;
  size_t n = 1;
  uintptr_t fp = start.fp;
  while (n < max_depth) {
    if (!stack_readable(stack, fp) || fp > stack.hi - 16)
      break;
    uintptr_t ra = load(fp + 8);
    uintptr_t next = load(fp);
    if (ra == 0 || !is_code(t, ra))
      break;
    frames[n++] = ra;
    if (next <= fp)
      break;
    fp = next;
  }
  return n;
}

void periodic_module_check(Thread &t) {
  // dlclose is not announced to us unless the interposer calls
  // unwind_modules_changed(); a cheap look every so often bounds how long a
  // rule for unloaded code can survive.
  t.check_countdown = 1u << 16;
  refresh_code_table();
}

// Blocks of exited threads, reused by new ones (unwind_thread_exit).
SpinLock g_free_caches_lock;
StackCache *g_free_caches;

StackCache *acquire_stack_cache() {
  if (g_free_caches_lock.try_lock()) {
    StackCache *c = g_free_caches;
    if (c)
      g_free_caches = c->next_free;
    g_free_caches_lock.unlock();
    if (c) {
      for (StackEntry &e : c->entries) // empty: the rest is rewritten before use
        e.tag = 0;
      c->next_free = nullptr;
      return c;
    }
  }
  return static_cast<StackCache *>(sys::map_pages(sizeof(StackCache)));
}

void release_stack_cache(StackCache *c) {
  // Thread exit is not a signal handler: it may wait.
  LockGuard g(g_free_caches_lock);
  c->next_free = g_free_caches;
  g_free_caches = c;
}

struct NoRecord {
  bool read(uintptr_t, uintptr_t) { return true; }
};
struct Record {
  StackEntry *e;
  uintptr_t sp;
  bool read(uintptr_t addr, uintptr_t value) {
    if (e->nreads == kStackCacheReads)
      return false;
    e->reads[e->nreads++] = {addr - sp, value};
    return true;
  }
};

template <typename Rec>
size_t walk_cfi(const CacheView &v, const UnwindStart &start, const Range &stack, uintptr_t *frames,
                size_t max_depth, Rec &rec, bool *cacheable) {
  size_t n = 1;
  uintptr_t pc = start.pc, sp = start.sp, rbp = start.fp;
  bool rbp_ok = true;
  for (;;) {
    uint64_t val = rule_of(v, pc);
    cfi::Rule::Kind kind = cfi::packed_kind(val);
    if (kind == cfi::Rule::kNotCode) {
      if (n > 1)
        --n; // pc came from a slot that held no return address
      break;
    }
    if (n >= max_depth || kind != cfi::Rule::kStep)
      break;
    cfi::Rule r = cfi::unpack(val);
    uintptr_t cfa;
    if (r.cfa_base == cfi::Rule::kCfaRsp)
      cfa = sp + static_cast<intptr_t>(r.cfa_off);
    else if (rbp_ok)
      cfa = rbp + static_cast<intptr_t>(r.cfa_off);
    else
      break;
    // The caller's frame lies strictly above this one, inside the stack.
    if (cfa < sp + 8 || !stack_readable(stack, cfa - 8))
      break;
    uintptr_t ra = load(cfa - 8);
    if (!rec.read(cfa - 8, ra))
      *cacheable = false;
    if (r.rbp == cfi::Rule::kRbpSaved) {
      uintptr_t at = cfa + static_cast<intptr_t>(r.rbp_off);
      if (!stack_readable(stack, at))
        break;
      rbp = load(at);
      if (!rec.read(at, rbp))
        *cacheable = false;
    } else if (r.rbp == cfi::Rule::kRbpLost) {
      rbp_ok = false;
    }
    if (ra == 0)
      break;
    frames[n++] = ra;
    pc = ra;
    sp = cfa;
  }
  return n;
}

size_t unwind_cfi(const UnwindStart &start, const Range &stack, uintptr_t *frames, size_t max_depth,
                  uint32_t **memo) {
  Thread &t = t_thread;
  if (--t.check_countdown == 0) [[unlikely]]
    periodic_module_check(t);
  CacheView v;
  if (!cache_view(&v))
    return 1;
  bool cacheable = true;
  if (max_depth > kStackCacheFrames || t.stack_cache_busy) {
    NoRecord none;
    return walk_cfi(v, start, stack, frames, max_depth, none, &cacheable);
  }
  if (!t.stack_cache) [[unlikely]] {
    t.stack_cache = acquire_stack_cache();
    if (!t.stack_cache) {
      NoRecord none;
      return walk_cfi(v, start, stack, frames, max_depth, none, &cacheable);
    }
  }
  t.stack_cache_busy = true;
  std::atomic_signal_fence(std::memory_order_seq_cst); // visible to our own handlers
  const uint64_t tag = stack_entry_tag(v.tag, v.adds, max_depth);
  StackEntry &e = stack_entry_for(t.stack_cache, start);
  size_t n;
  if (stack_entry_holds(e, tag, start, stack.hi)) {
    n = e.n;
    memcpy(frames, e.frames, n * sizeof(uintptr_t));
    if (memo)
      *memo = &e.memo;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.stack_cache_busy = false;
    return n;
  }
  e.tag = 0;
  e.nreads = 0;
  Record rec{&e, start.sp};
  const bool outer_refused = t.refused;
  t.refused = false;
  n = walk_cfi(v, start, stack, frames, max_depth, rec, &cacheable);
  // A walk cut short by a refused rule is not what the stack says: not cached.
  cacheable &= !t.refused;
  t.refused |= outer_refused;
  if (cacheable) {
    if (e.nreads % 2) { // the check reads pairs: repeat the last, which matches when it does
      e.reads[e.nreads] = e.reads[e.nreads - 1];
      ++e.nreads;
    }
    e.pc = start.pc;
    e.sp = start.sp;
    e.fp = start.fp;
    e.stack_hi = stack.hi;
    e.n = static_cast<uint32_t>(n);
    memcpy(e.frames, frames, n * sizeof(uintptr_t));
    e.memo = 0;
    e.tag = tag;
    if (memo)
      *memo = &e.memo;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.stack_cache_busy = false;
  return n;
}

constexpr int kUrcNoReason = 0;
constexpr int kUrcEndOfStack = 5;

struct DwarfWalk {
  const UnwindStart *start;
  uintptr_t *frames;
  size_t max_depth;
  size_t n;
  bool started;
};

int dwarf_cb(_Unwind_Context *ctx, void *arg) {
  auto *w = static_cast<DwarfWalk *>(arg);
  int before_insn = 0;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &before_insn);
  if (!w->started) {
    // Skip our own frames and the entry point's. libgcc reports, with each
    // frame, its callee's CFA, i.e. this frame's sp at the call: the entry
    // point's caller is the frame at start.pc with that sp (>=: some other
    // frame at start.pc, deeper, would have a lower one).
    if (ip == w->start->pc && _Unwind_GetCFA(ctx) >= w->start->sp)
      w->started = true;
    return kUrcNoReason;
  }
  if (ip == 0 || w->n >= w->max_depth)
    return kUrcEndOfStack;
  w->frames[w->n++] = ip;
  return w->n >= w->max_depth ? kUrcEndOfStack : kUrcNoReason;
}

size_t unwind_dwarf(const UnwindStart &start, uintptr_t *frames, size_t max_depth) {
  DwarfWalk w{&start, frames, max_depth, 1, false};
  if (max_depth > 1)
    _Unwind_Backtrace(dwarf_cb, &w);
  return w.n;
}

} // namespace

namespace unwind_state {
__thread Thread t_thread{};
ML_HOT_DATA std::atomic<uint64_t> g_seen_adds{0};
ML_HOT_DATA std::atomic<uint32_t> g_epoch{1};
} // namespace unwind_state

size_t unwind(UnwindMethod method, const UnwindStart &start, uintptr_t *frames, size_t max_depth,
              uint32_t **memo) {
  if (memo)
    *memo = nullptr;
  if (max_depth == 0)
    return 0;
  frames[0] = start.pc;
  if (max_depth == 1)
    return 1;
  if (method == UnwindMethod::kDwarf)
    return unwind_dwarf(start, frames, max_depth);
  Range stack;
  if (!stack_bounds(start.sp, &stack))
    return 1;
  if (method == UnwindMethod::kFramePointer)
    return unwind_fp(start, stack, frames, max_depth);
  return unwind_cfi(start, stack, frames, max_depth, memo);
}

size_t cfi::unwind_rules_only(const UnwindStart &start, uintptr_t *frames, size_t max_depth) {
  if (max_depth == 0)
    return 0;
  frames[0] = start.pc;
  Range stack;
  CacheView v;
  if (max_depth == 1 || !stack_bounds(start.sp, &stack) || !cache_view(&v))
    return 1;
  NoRecord none;
  bool cacheable;
  return walk_cfi(v, start, stack, frames, max_depth, none, &cacheable);
}

void unwind_thread_init() {
  Thread &t = t_thread;
  if (t.state == StackState::kUninit)
    init_thread_stack(t);
}

void unwind_thread_exit() {
  Thread &t = t_thread;
  if (t.stack_cache && !t.stack_cache_busy) {
    StackCache *c = t.stack_cache;
    t.stack_cache = nullptr;
    release_stack_cache(c);
  }
}

void unwind_modules_changed() {
  bump_epoch();
  refresh_code_table();
}

bool parse_unwind_method(const char *name, UnwindMethod *out) {
  static constexpr struct {
    const char *name;
    UnwindMethod method;
  } kNames[] = {{"fp", UnwindMethod::kFramePointer},
                {"cfi", UnwindMethod::kCfi},
                {"dwarf", UnwindMethod::kDwarf}};
  if (!name)
    return false;
  for (const auto &n : kNames) {
    if (strcmp(name, n.name) == 0) {
      *out = n.method;
      return true;
    }
  }
  return false;
}

const char *unwind_method_name(UnwindMethod method) {
  switch (method) {
  case UnwindMethod::kFramePointer:
    return "fp";
  case UnwindMethod::kCfi:
    return "cfi";
  case UnwindMethod::kDwarf:
    return "dwarf";
  }
  return "?";
}

} // namespace memlayout::preload
