#include "switch_watch.h"

#include <cerrno>
#include <cstddef>
#include <sys/syscall.h>

// glibc's description of the thread's rseq area (2.35 on): weak, so that the
// recorder still loads where the C library has none.
extern "C" {
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
}

namespace memlayout::preload::switch_watch {

namespace {

// The kernel's struct rseq_cs (linux/rseq.h).
struct alignas(32) CriticalSection {
  uint32_t version;
  uint32_t flags;
  uint64_t start_ip;
  uint64_t post_commit_offset;
  uint64_t abort_ip;
};

// The fields of struct rseq read here: cpu_id is negative where the kernel
// did not register the area for this thread.
constexpr size_t kCpuIdOffset = 4;
constexpr size_t kCriticalSectionOffset = 8;
constexpr int kRseqFlagUnregister = 1; // linux/rseq.h's RSEQ_FLAG_UNREGISTER

} // namespace

#if defined(__x86_64__)
// Code that never runs, and after it glibc's RSEQ_SIG (x86: 0x53053053) and
// the abort address, so that the descriptor passes the kernel's checks. The
// range holds one instruction, never jumped to: the thread is never inside it.
__asm__(".pushsection .text.memlayout_switch_watch,\"ax\",@progbits\n"
        ".balign 16\n"
        ".globl memlayout_switch_watch_never\n"
        ".hidden memlayout_switch_watch_never\n"
        "memlayout_switch_watch_never:\n"
        "  ud2\n"
        ".long 0x53053053\n"
        ".globl memlayout_switch_watch_abort\n"
        ".hidden memlayout_switch_watch_abort\n"
        "memlayout_switch_watch_abort:\n"
        "  ud2\n"
        ".popsection\n");

extern "C" {
extern const char memlayout_switch_watch_never[] __attribute__((visibility("hidden")));
extern const char memlayout_switch_watch_abort[] __attribute__((visibility("hidden")));
}

namespace {
const CriticalSection g_never_entered = {
    0, 0, reinterpret_cast<uint64_t>(memlayout_switch_watch_never), 2,
    reinterpret_cast<uint64_t>(memlayout_switch_watch_abort)};
// The rseq system call without libc's syscall(), which the preload
// interposes to see the program's own registrations: -errno on failure.
long rseq_call(void *area, unsigned len, int flags, unsigned sig) {
  long ret;
  register long r10 __asm__("r10") = sig;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "0"(long{SYS_rseq}), "D"(area), "S"(long{len}), "d"(long{flags}), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
}

// Whether the area is registered for this thread with glibc's signature: the
// kernel answers a second registration of the same area and length with
// EBUSY when the signature is the one it holds, EPERM when it is not, EINVAL
// for another area or length. A program that registered the area again with
// a signature of its own would have its thread killed at its next switch by
// a descriptor the kernel now finds unsigned.
bool registered_with_glibc_signature(void *area) {
  constexpr unsigned kRseqSig = 0x53053053;
  const unsigned lengths[] = {32, (__rseq_size + 31) / 32 * 32};
  for (unsigned len : lengths) {
    long r = rseq_call(area, len, 0, kRseqSig);
    if (r == -EBUSY)
      return true;
    if (r == 0) { // it was not registered after all: leave it as it was
      rseq_call(area, len, kRseqFlagUnregister, kRseqSig);
      return false;
    }
    if (r != -EINVAL)
      return false;
  }
  return false;
}

} // namespace

uint64_t *thread_word() {
  if (&__rseq_size == nullptr || &__rseq_offset == nullptr ||
      __rseq_size < kCriticalSectionOffset + sizeof(uint64_t))
    return nullptr;
  auto *area = static_cast<char *>(__builtin_thread_pointer()) + __rseq_offset;
  if (*reinterpret_cast<volatile int32_t *>(area + kCpuIdOffset) < 0)
    return nullptr; // this thread's registration failed
  return registered_with_glibc_signature(area)
             ? reinterpret_cast<uint64_t *>(area + kCriticalSectionOffset)
             : nullptr;
}

void arm(uint64_t *word) {
  __atomic_store_n(word, reinterpret_cast<uint64_t>(&g_never_entered), __ATOMIC_RELAXED);
}

void disarm(uint64_t *word) {
  uint64_t ours = reinterpret_cast<uint64_t>(&g_never_entered);
  __atomic_compare_exchange_n(word, &ours, 0, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
#else
uint64_t *thread_word() { return nullptr; }
void arm(uint64_t *word) { *word = 1; }
void disarm(uint64_t *) {}
#endif

} // namespace memlayout::preload::switch_watch
