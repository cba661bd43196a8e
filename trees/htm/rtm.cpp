#include "rtm.h"

#include <cpuid.h>
#include <immintrin.h>

#include <mutex>

namespace memlayout::trees::htm {
namespace {

constexpr int kProbeTransactions = 256;

// Empty transactions: on a CPU whose TSX microcode forces aborts, none commits.
__attribute__((target("rtm"))) int committed_empty_transactions() {
  int committed = 0;
  for (int i = 0; i < kProbeTransactions; ++i)
    if (_xbegin() == _XBEGIN_STARTED) {
      _xend();
      ++committed;
    }
  return committed;
}

std::string probe() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7)
    return "CPUID has no leaf 7: this CPU has no RTM";
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  if (!(ebx & (1u << 11)))
    return "CPUID.(EAX=7,ECX=0):EBX.RTM[bit 11] is 0: this CPU has no RTM (or TSX is disabled)";
  if (edx & (1u << 11))
    return "CPUID.(EAX=7,ECX=0):EDX.RTM_ALWAYS_ABORT[bit 11] is 1: every transaction aborts";
  if (committed_empty_transactions() == 0)
    return "XBEGIN never committed in " + std::to_string(kProbeTransactions) +
           " empty transactions: RTM is disabled (microcode or hypervisor)";
  return {};
}

} // namespace

bool rtm_usable(std::string *why) {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [] { reason = probe(); });
  if (why)
    *why = reason;
  return reason.empty();
}

__attribute__((target("rtm"))) unsigned rtm_begin() { return _xbegin(); }
__attribute__((target("rtm"))) void rtm_end() { _xend(); }
__attribute__((target("rtm"))) void rtm_abort_lock_held() {
  _xabort(kAbortLockHeld);
  __builtin_trap(); // outside a transaction xabort is a no-op: callers are inside one
}
__attribute__((target("rtm"))) void rtm_abort_need_records() {
  _xabort(kAbortNeedRecords);
  __builtin_trap();
}
__attribute__((target("rtm"))) bool rtm_in_transaction() { return _xtest() != 0; }

AbortInfo rtm_abort_info(unsigned status) {
  AbortInfo a;
  a.retry_hint = status & _XABORT_RETRY;
  if (status & _XABORT_EXPLICIT) {
    a.cause = AbortCause::kExplicit;
    a.explicit_code = static_cast<uint8_t>(_XABORT_CODE(status));
  } else if (status & _XABORT_CONFLICT) {
    a.cause = AbortCause::kConflict;
  } else if (status & _XABORT_CAPACITY) {
    a.cause = AbortCause::kCapacity;
  } else {
    a.cause = AbortCause::kOther;
  }
  return a;
}

} // namespace memlayout::trees::htm
