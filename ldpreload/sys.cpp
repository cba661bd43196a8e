#include "sys.h"

#include "spinlock.h"

#include <atomic>
#include <cerrno>
#include <cpuid.h>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memlayout::preload::sys {

namespace {
// Few and long-lived (tables, thread logs): a small array is enough; past it
// mappings go untracked and merely show up in snapshots.
constexpr size_t kMaxOwn = 4096;
Range g_own[kMaxOwn];
size_t g_nown = 0;
SpinLock g_own_lock;
} // namespace

bool cpu_has_fast_pdep() {
#if defined(__x86_64__)
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(ebx & (1u << 8))) // BMI2
    return false;
  unsigned vendor[3];
  __get_cpuid(0, &eax, &vendor[0], &vendor[2], &vendor[1]);
  if (memcmp(vendor, "GenuineIntel", 12) == 0)
    return true;
  if (memcmp(vendor, "AuthenticAMD", 12) != 0)
    return false;
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  unsigned family = (eax >> 8) & 0xf;
  if (family == 0xf)
    family += (eax >> 20) & 0xff;
  return family >= 0x19;
#else
  return false;
#endif
}

void *map_pages(size_t bytes) {
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return nullptr;
  {
    KeepErrno keep; // EINVAL where the kernel cannot name mappings
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, bytes, kMappingName);
  }
  auto start = reinterpret_cast<uintptr_t>(p);
  Range r{start, start + ((bytes + page_size() - 1) & ~(page_size() - 1))};
  LockGuard g(g_own_lock);
  if (g_nown < kMaxOwn) {
    size_t i = g_nown++;
    for (; i > 0 && g_own[i - 1].start > r.start; --i)
      g_own[i] = g_own[i - 1];
    g_own[i] = r;
  }
  return p;
}

void unmap_pages(void *p, size_t bytes) {
  if (!p)
    return;
  munmap(p, bytes);
  auto start = reinterpret_cast<uintptr_t>(p);
  LockGuard g(g_own_lock);
  for (size_t i = 0; i < g_nown; ++i)
    if (g_own[i].start == start) {
      for (; i + 1 < g_nown; ++i)
        g_own[i] = g_own[i + 1];
      --g_nown;
      break;
    }
}

size_t own_mappings(Range *out, size_t cap) {
  LockGuard g(g_own_lock);
  for (size_t i = 0; i < g_nown && i < cap; ++i)
    out[i] = g_own[i];
  return g_nown;
}

int open_file(const char *path, int flags, unsigned mode) {
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}
long read_some(int fd, void *buf, size_t n) { return syscall(SYS_read, fd, buf, n); }
long pread_some(int fd, void *buf, size_t n, uint64_t offset) {
  return syscall(SYS_pread64, fd, buf, n, offset);
}
void close_file(int fd) { syscall(SYS_close, fd); }

long read_file(const char *path, char *buf, size_t cap) {
  int fd = open_file(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t n = 0;
  while (n + 1 < cap) {
    long r = read_some(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    n += static_cast<size_t>(r);
  }
  close_file(fd);
  buf[n] = '\0';
  return static_cast<long>(n);
}

namespace {
// SIGXFSZ's bit in the kernel's sigset (the rt_sig* calls take 8 bytes).
constexpr uint64_t kXfszBit = uint64_t{1} << (SIGXFSZ - 1);

uint64_t pending_signals() {
  uint64_t set = 0;
  syscall(SYS_rt_sigpending, &set, sizeof set);
  return set;
}
} // namespace

HoldXfsz::HoldXfsz() {
  KeepErrno keep;
  uint64_t block = kXfszBit;
  old_mask_ = 0;
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &block, &old_mask_, sizeof block);
  // Unblocked until now, a SIGXFSZ for this thread would have been delivered:
  // only one the program holds blocked can be pending already.
  pending_before_ = (old_mask_ & kXfszBit) && (pending_signals() & kXfszBit);
}

HoldXfsz::~HoldXfsz() {
  KeepErrno keep;
  if (fell_short_ && !pending_before_ && (pending_signals() & kXfszBit)) {
    uint64_t set = kXfszBit;
    timespec now{};
    syscall(SYS_rt_sigtimedwait, &set, nullptr, &now, sizeof set);
  }
  if (!(old_mask_ & kXfszBit))
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_mask_, nullptr, sizeof old_mask_);
}

uint64_t file_size_limit() {
  KeepErrno keep;
  rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX;
  return rl.rlim_cur;
}

bool write_all(int fd, const void *buf, size_t n) {
  HoldXfsz hold;
  const char *p = static_cast<const char *>(buf);
  while (n) {
    long r = syscall(SYS_write, fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      hold.write_fell_short();
      return false;
    }
    if (static_cast<size_t>(r) < n)
      hold.write_fell_short();
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void warn(const char *msg, const char *detail) {
  KeepErrno keep;
  char line[1024];
  size_t n = 0;
  auto put = [&](const char *s) {
    for (; s && *s && n < sizeof line - 1; ++s)
      line[n++] = *s;
  };
  put("memlayout: ");
  put(msg);
  if (detail) {
    put(": ");
    put(detail);
  }
  line[n++] = '\n';
  write_all(2, line, n);
}

size_t format_u64(char *buf, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; ++i)
    buf[i] = tmp[n - 1 - i];
  return n;
}

bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s)
    return false;
  uint64_t v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9')
      return false;
    uint64_t d = static_cast<uint64_t>(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

uint32_t gettid() { return static_cast<uint32_t>(syscall(SYS_gettid)); }
uint32_t getpid() { return static_cast<uint32_t>(::getpid()); }

static uint64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
uint64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }
uint64_t realtime_ns() { return clock_ns(CLOCK_REALTIME); }

size_t page_size() {
  static size_t ps = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return ps;
}

} // namespace memlayout::preload::sys
