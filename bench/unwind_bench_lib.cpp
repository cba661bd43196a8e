// Frames without frame pointers in a separate shared library (like Debian's
// libstdc++/libc), for unwind-bench's mixed call chains.
#include "unwind_bench_chain.h"

extern "C" [[gnu::noipa]] int unwind_bench_lib_step(BenchChain *c, int d) {
  int r = c->exe_step(c, d);
  asm volatile("" ::: "memory"); // keeps the frame: no tail call
  return r + 1;
}
