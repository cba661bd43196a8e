#pragma once

struct BenchChain {
  int (*exe_step)(BenchChain *, int);
  int (*at_bottom)(BenchChain *);
  bool mixed; // alternate with frames from the frame-pointer-less library
};

extern "C" int unwind_bench_lib_step(BenchChain *c, int d);
