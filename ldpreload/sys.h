// System helpers for code that must not allocate: memory straight from mmap,
// whole-file reads into caller buffers, number formatting, raw messages.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#define ML_LIKELY(x) __builtin_expect(!!(x), 1)
// The globals every allocation reads, gathered on one or two lines of one
// page: scattered over the library's data, each one was a page of its own to
// look up in the TLB on every allocation, among the program's own pages.
#define ML_HOT_DATA __attribute__((section("memlayout_hot")))
#define ML_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ML_EXPORT extern "C" __attribute__((visibility("default")))

namespace memlayout::preload::sys {

// The program's errno as it was, for the recorder's slow paths (a thread's
// first event, a flush, an unwind): their system calls may fail harmlessly
// (naming a mapping where the kernel cannot), and the program's errno after
// a successful malloc must be what it was before.
class KeepErrno {
public:
  KeepErrno() : saved_(errno) {}
  ~KeepErrno() { errno = saved_; }
  KeepErrno(const KeepErrno &) = delete;
  KeepErrno &operator=(const KeepErrno &) = delete;

private:
  int saved_;
};

// Zeroed, page-granular memory that never comes from the program's allocator.
// Each mapping is remembered (and, where the kernel can, named
// "[anon:memlayout]") so memory-map snapshots leave the recorder's own memory
// out of the program's.
void *map_pages(size_t bytes);
inline constexpr char kMappingName[] = "memlayout";

struct Range {
  uintptr_t start, end;
};
// Copies the recorder's mappings, sorted by address, into out[0..cap);
// returns how many there are (may exceed cap).
size_t own_mappings(Range *out, size_t cap);
void unmap_pages(void *p, size_t bytes);

// The recorder's file calls, as plain system calls: libc's open, read,
// pread, write and close are cancellation points, and a thread cancelled in
// one inside the recorder would unwind holding the recorder's locks (its own
// exit then waits on them for ever). Each returns what the system call does,
// errno set on failure as by libc.
int open_file(const char *path, int flags, unsigned mode = 0);
long read_some(int fd, void *buf, size_t n);
long pread_some(int fd, void *buf, size_t n, uint64_t offset);
void close_file(int fd);

// Reads a whole (proc) file into buf, NUL-terminates, returns bytes read or -1.
long read_file(const char *path, char *buf, size_t cap);

// Writes all of buf to fd, retrying on EINTR and short writes. Returns false
// on any other error (errno is left as the failing call set it). Never
// raises SIGXFSZ in the program (HoldXfsz).
bool write_all(int fd, const void *buf, size_t n);

// For the recorder's writes to files. Past RLIMIT_FSIZE the kernel fails a
// write with EFBIG and sends the writing thread SIGXFSZ, whose default action
// kills the program, and which a handler of the program's would see: neither
// may happen for a write of ours. Blocks SIGXFSZ for its lifetime and, at
// the end, takes back a SIGXFSZ that became pending meanwhile (one pending
// before, the program's own, stays for the program). Only a write that
// failed or came back short can have raised one (the kernel signals when it
// refuses a write starting at the limit): the caller says so with
// write_fell_short(), and a hold whose writes all completed costs two system
// calls, not four.
class HoldXfsz {
public:
  HoldXfsz();
  ~HoldXfsz();
  HoldXfsz(const HoldXfsz &) = delete;
  HoldXfsz &operator=(const HoldXfsz &) = delete;
  void write_fell_short() { fell_short_ = true; }

private:
  uint64_t old_mask_;
  bool pending_before_;
  bool fell_short_ = false;
};

// RLIMIT_FSIZE's soft limit in bytes, UINT64_MAX when there is none.
uint64_t file_size_limit();

// "memlayout: <msg>\n" on stderr, for the rare things a user must know
// (trace unwritable, options invalid). Never allocates.
void warn(const char *msg, const char *detail = nullptr);

// Unsigned decimal into buf (no NUL); returns chars written.
size_t format_u64(char *buf, uint64_t v);
// Parses a decimal; false on garbage or overflow.
bool parse_u64(const char *s, uint64_t *out);

// Kernel thread id, without glibc's caching games.
uint32_t gettid();
uint32_t getpid();
uint64_t monotonic_ns();
uint64_t realtime_ns();

inline uint64_t rdtsc() { return __builtin_ia32_rdtsc(); }

// About a millisecond of TSC ticks at 2-4 GHz.
inline constexpr uint64_t kMillisecondTicks = uint64_t{1} << 22;

// For checks that cost a system call and need not run more often than every
// `period` ticks (a limit, resident size): true for one caller, of any
// thread, once `period` has passed since `last` was set; `last` = 0 makes
// the next call true.
inline bool due(std::atomic<uint64_t> &last, uint64_t period) {
  uint64_t now = rdtsc(), then = last.load(std::memory_order_relaxed);
  return now - then >= period && last.compare_exchange_strong(then, now, std::memory_order_relaxed);
}

// BMI2's PDEP at full speed: Intel since Haswell, AMD since Zen 3 (family
// 0x19); Zen 1 and 2 (and Hygon) microcode it.
bool cpu_has_fast_pdep();

size_t page_size();

} // namespace memlayout::preload::sys
