// A shared library without frame pointers, calling back into the test.
#include "test_unwind_probe.h"

extern "C" {

[[gnu::noipa]] int unwind_lib_c(UnwindProbe *p) {
  volatile char pad[96]; // a frame of some size, so the CFA offset matters
  pad[0] = 1;
  int r = p->capture(p);
  asm volatile("" ::: "memory");
  return r + pad[0];
}

[[gnu::noipa]] int unwind_lib_b(UnwindProbe *p) {
  int r = unwind_lib_c(p);
  asm volatile("" ::: "memory");
  return r + 1;
}

[[gnu::noipa]] int unwind_lib_a(UnwindProbe *p) {
  int r = unwind_lib_b(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
}
