// A call chain without frame pointers (built with -fomit-frame-pointer -O2):
// only unwind tables can walk through it. noipa keeps each function a real
// frame; the arithmetic after each call keeps the call from being a tail call.
#include "test_unwind_probe.h"

extern "C" {

[[gnu::noipa]] int unwind_nofp_d(UnwindProbe *p) {
  int r = p->capture(p);
  asm volatile("" ::: "memory");
  return r + 1;
}

[[gnu::noipa]] int unwind_nofp_c(UnwindProbe *p) {
  int r = unwind_nofp_d(p);
  asm volatile("" ::: "memory");
  return r + 1;
}

[[gnu::noipa]] int unwind_nofp_b(UnwindProbe *p) {
  // rbp is just another callee-saved register here: put something in it
  // that a frame-pointer walk must reject. The compiler saves and restores
  // it around this function (and describes that in the CFI).
  volatile uintptr_t fake_frame[2] = {0, 0x10}; // {next rbp, "return address"}
  int r;
  if (p->rbp_mode == 1) {
    asm volatile("movq $0x1234, %%rbp\n\t"
                 "call unwind_nofp_c"
                 : "=a"(r), "+D"(p)
                 :
                 : "rbp", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "cc", "memory");
  } else if (p->rbp_mode == 2) {
    asm volatile("movq %2, %%rbp\n\t"
                 "call unwind_nofp_c"
                 : "=a"(r), "+D"(p)
                 : "r"(fake_frame)
                 : "rbp", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "cc", "memory");
  } else {
    r = unwind_nofp_c(p);
  }
  asm volatile("" ::: "memory");
  return r + 1;
}

[[gnu::noipa]] int unwind_nofp_a(UnwindProbe *p) {
  int r = unwind_nofp_b(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
}

[[gnu::noipa]] void unwind_nofp_memo_site(void (*probe)()) { probe(); }
[[gnu::noipa]] void unwind_nofp_memo_caller_a(void (*probe)()) { unwind_nofp_memo_site(probe); }
[[gnu::noipa]] void unwind_nofp_memo_caller_b(void (*probe)()) { unwind_nofp_memo_site(probe); }
[[gnu::noipa]] void unwind_nofp_memo_mid(void (*probe)()) { unwind_nofp_memo_site(probe); }
[[gnu::noipa]] void unwind_nofp_memo_mid_caller_a(void (*probe)()) { unwind_nofp_memo_mid(probe); }
[[gnu::noipa]] void unwind_nofp_memo_mid_caller_b(void (*probe)()) { unwind_nofp_memo_mid(probe); }
