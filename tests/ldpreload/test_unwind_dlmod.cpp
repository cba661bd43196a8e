// A module the tests dlopen after unwinding has started. Built twice with
// different frame sizes (UNWIND_DLMOD_FRAME) but the same code layout, so
// that the second copy, loaded where the first was, has different unwind
// rules at the same addresses.
#include "test_unwind_probe.h"

extern "C" {

[[gnu::noipa]] int unwind_dlmod_b(UnwindProbe *p) {
  volatile char pad[UNWIND_DLMOD_FRAME];
  pad[0] = 1;
  int r = p->capture(p);
  asm volatile("" ::: "memory");
  return r + pad[0];
}

[[gnu::noipa]] int unwind_dlmod_a(UnwindProbe *p) {
  int r = unwind_dlmod_b(p);
  asm volatile("" ::: "memory");
  return r + 1;
}
}
