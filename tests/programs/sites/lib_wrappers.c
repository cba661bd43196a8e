/* Allocation wrappers in a shared library (mlt_lib_wrappers): nothing here
 * calls them, so only the program's debug info says who does. grab_mem has
 * two callers there (a wrapper), grab_zero one (a site of its own). Built
 * into the program itself as well (mlt_one_file_wrappers). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void *grab_mem(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fputs("out of memory\n", stderr);
    abort();
  }
  return p;
}

__attribute__((noinline)) void *grab_zero(size_t n) {
  void *p = calloc(1, n);
  if (!p) {
    fputs("out of memory\n", stderr);
    abort();
  }
  return p;
}
