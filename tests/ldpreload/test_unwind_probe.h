// Shared by the unwinder tests and the call chains they unwind through (some
// compiled without frame pointers, some in separate libraries).
#pragma once

#include <cstddef>
#include <cstdint>

struct UnwindProbe {
  // Called at the bottom of every chain; the tests point it at a capture
  // function compiled with frame pointers that runs every method.
  int (*capture)(UnwindProbe *);
  // test_unwind_nofp.cpp's chain: 0 leaves rbp alone, 1 loads a constant
  // into it, 2 points it at a fake frame record on the stack.
  int rbp_mode = 0;
  size_t max_depth = 64;
  static constexpr int kMethods = 4; // indexed by UnwindMethod's value
  size_t n[kMethods] = {};
  uintptr_t frames[kMethods][64] = {};
};

extern "C" {
// Without frame pointers (test_unwind_nofp.cpp): a -> b -> c -> d -> capture.
int unwind_nofp_a(UnwindProbe *p);
int unwind_nofp_b(UnwindProbe *p);
int unwind_nofp_c(UnwindProbe *p);
int unwind_nofp_d(UnwindProbe *p);
// Without frame pointers, for the stack cache's tests: caller_a or caller_b
// -> site -> probe, and mid_caller_a or mid_caller_b -> mid -> site -> probe.
// Callers of a pair have the same frame, and without a saved rbp each
// frame's walk reads one slot, its return address.
void unwind_nofp_memo_site(void (*probe)());
void unwind_nofp_memo_mid(void (*probe)());
void unwind_nofp_memo_caller_a(void (*probe)());
void unwind_nofp_memo_caller_b(void (*probe)());
void unwind_nofp_memo_mid_caller_a(void (*probe)());
void unwind_nofp_memo_mid_caller_b(void (*probe)());
// In a shared library without frame pointers: a -> b -> c -> capture.
int unwind_lib_a(UnwindProbe *p);
int unwind_lib_b(UnwindProbe *p);
int unwind_lib_c(UnwindProbe *p);
}
