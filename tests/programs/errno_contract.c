/* The C and POSIX error contract of every allocation entry point: what each
 * call returns and what it leaves in errno, on success and on failure. Run
 * directly, under `memlayout record` and under `memlayout run --rules`, the
 * output must be the same for the same allocator: the interposer may not
 * change what the program observes. errno is set to EDOM (which no allocator
 * sets) before each call, so a failure that forgets errno shows as "kept".
 *
 *   errno_contract */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void errno_contract_new(void); /* errno_contract_new.cpp: operator new */

/* Through volatiles: the compiler must not fold the calls or drop the
 * allocations. */
static volatile size_t v0 = 0, v1 = 1, v3 = 3, v4 = 4, v64 = 64, v100 = 100;
static volatile size_t vmax = SIZE_MAX, vhalf = SIZE_MAX / 2, vodd_huge = SIZE_MAX / 2 + 2;
static void *volatile vnull = NULL;
static void *volatile sink;

static const char *errno_name(int e) {
  static char other[32];
  switch (e) {
  case EDOM:
    return "kept";
  case ENOMEM:
    return "ENOMEM";
  case EINVAL:
    return "EINVAL";
  case 0:
    return "0";
  }
  snprintf(other, sizeof other, "%d", e);
  return other;
}

void errno_contract_show(const char *what, const void *p, int err) {
  printf("%-44s %-7s errno %s\n", what, p ? "pointer" : "NULL", errno_name(err));
}

#define TRY(label, expr)                                                                           \
  do {                                                                                             \
    errno = EDOM;                                                                                  \
    void *p_ = (expr);                                                                             \
    int e_ = errno;                                                                                \
    errno_contract_show(label, p_, e_);                                                            \
    sink = p_;                                                                                     \
    free(p_);                                                                                      \
  } while (0)

/* posix_memalign returns its error and leaves errno and *out alone. */
static void try_posix_memalign(const char *label, size_t align, size_t size) {
  void *p = (void *)0x1;
  errno = EDOM;
  int rc = posix_memalign(&p, align, size);
  int e = errno;
  printf("%-44s rc %-6s errno %s, out %s\n", label, rc ? errno_name(rc) : "0", errno_name(e),
         rc == 0            ? "set"
         : p == (void *)0x1 ? "untouched"
                            : "changed");
  if (rc == 0)
    free(p);
}

/* A failed realloc leaves errno ENOMEM and the old block as it was. */
static void try_realloc_fails(const char *label, int array) {
  char *old = malloc(v100);
  memset(old, 0x5a, 100);
  errno = EDOM;
  void *p = array ? reallocarray(old, v1, vmax) : realloc(old, vmax);
  int e = errno;
  int kept = 1;
  for (int i = 0; i < 100; ++i)
    kept &= old[i] == 0x5a;
  printf("%-44s %-7s errno %s, old block %s\n", label, p ? "pointer" : "NULL", errno_name(e),
         kept ? "kept" : "changed");
  free(p ? p : old);
}

int main(void) {
  /* The first allocation of the process (the recorder sets itself up in it). */
  errno = EDOM;
  void *first = malloc(v100);
  int first_errno = errno;
  errno_contract_show("first malloc(100)", first, first_errno);
  free(first);

  TRY("malloc(100)", malloc(v100));
  TRY("malloc(SIZE_MAX)", malloc(vmax));
  TRY("calloc(4, 100)", calloc(v4, v100));
  TRY("calloc(SIZE_MAX/2, 3) overflows", calloc(vhalf, v3));
  TRY("calloc(1, SIZE_MAX)", calloc(v1, vmax));
  TRY("realloc(NULL, 100)", realloc(vnull, v100));
  TRY("realloc(NULL, SIZE_MAX)", realloc(vnull, vmax));
  try_realloc_fails("realloc(p, SIZE_MAX)", 0);
  try_realloc_fails("reallocarray(p, 1, SIZE_MAX)", 1);
  TRY("reallocarray(NULL, SIZE_MAX/2, 3) overflows", reallocarray(vnull, vhalf, v3));
  TRY("reallocarray(NULL, 4, 100)", reallocarray(vnull, v4, v100));
  {
    /* realloc(p, 0) frees p (glibc and jemalloc both): NULL, errno alone. */
    void *p = malloc(v100);
    errno = EDOM;
    void *q = realloc(p, v0);
    int e = errno;
    errno_contract_show("realloc(p, 0)", q, e);
    free(q);
  }
  TRY("memalign(64, 100)", memalign(v64, v100));
  TRY("memalign(3, 100)", memalign(v3, v100));
  TRY("memalign(0, 100)", memalign(v0, v100));
  TRY("memalign(SIZE_MAX/2+2, 100)", memalign(vodd_huge, v100));
  TRY("memalign(64, SIZE_MAX)", memalign(v64, vmax));
  TRY("aligned_alloc(64, 128)", aligned_alloc(v64, v64 * 2));
  TRY("aligned_alloc(3, 100)", aligned_alloc(v3, v100));
  TRY("aligned_alloc(0, 100)", aligned_alloc(v0, v100));
  TRY("aligned_alloc(64, SIZE_MAX)", aligned_alloc(v64, vmax));
  try_posix_memalign("posix_memalign(64, 100)", v64, v100);
  try_posix_memalign("posix_memalign(3, 100)", v3, v100);
  try_posix_memalign("posix_memalign(4, 100)", v4, v100);
  try_posix_memalign("posix_memalign(0, 100)", v0, v100);
  try_posix_memalign("posix_memalign(64, SIZE_MAX)", v64, vmax);
  TRY("valloc(100)", valloc(v100));
  TRY("valloc(SIZE_MAX)", valloc(vmax));
  TRY("pvalloc(100)", pvalloc(v100));
  TRY("pvalloc(SIZE_MAX)", pvalloc(vmax));
  {
    void *p = malloc(v100);
    errno = EDOM;
    free(p);
    free(vnull);
    printf("%-44s errno %s\n", "free(p), free(NULL)", errno_name(errno));
  }
  errno_contract_new();
  return 0;
}
