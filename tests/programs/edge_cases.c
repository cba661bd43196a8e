/* The corners of the C allocation API, each result printed: run with and
 * without the recorder, the output must be the same (the recorder forwards to
 * the program's own allocator and must not change its answers).
 *
 *   edge_cases */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Through volatiles: the compiler must not fold the calls. */
static volatile size_t v0 = 0, v24 = 24, v48 = 48, v64 = 64, v3 = 3, vhuge = SIZE_MAX - 4096;
static void *volatile vnull = NULL;

static void show(const char *what, void *p, int err) {
  printf("%-40s %s", what, p ? "pointer" : "NULL");
  if (!p)
    printf(" errno=%s", err == ENOMEM ? "ENOMEM" : err == EINVAL ? "EINVAL" : err ? "other" : "0");
  printf("\n");
}

#define TRY(label, expr)                                                                           \
  do {                                                                                             \
    errno = 0;                                                                                     \
    void *p_ = (expr);                                                                             \
    show(label, p_, errno);                                                                        \
    free(p_);                                                                                      \
  } while (0)

static void try_posix_memalign(const char *label, size_t align, size_t size) {
  void *p = (void *)0x1;
  int rc = posix_memalign(&p, align, size);
  printf("%-40s rc=%s%s\n", label,
         rc == 0        ? "0"
         : rc == EINVAL ? "EINVAL"
         : rc == ENOMEM ? "ENOMEM"
                        : "other",
         rc == 0            ? ""
         : p == (void *)0x1 ? ", out untouched"
                            : ", out changed");
  if (rc == 0)
    free(p);
}

/* A successful call leaves errno alone, the first of a thread included (the
 * recorder sets itself up then). */
static void *first_of_thread(void *arg) {
  (void)arg;
  errno = 0;
  void *p = malloc(v24);
  printf("%-40s errno=%d\n", "first malloc of a thread", errno);
  free(p);
  return NULL;
}

int main(void) {
  errno = 0;
  void *first = malloc(v24);
  printf("%-40s errno=%d\n", "first malloc of the process", errno);
  free(first);
  pthread_t t;
  if (pthread_create(&t, NULL, first_of_thread, NULL) == 0)
    pthread_join(t, NULL);
  TRY("malloc(0)", malloc(v0));
  TRY("malloc(huge)", malloc(vhuge));
  TRY("calloc(0, 8)", calloc(v0, 8));
  TRY("calloc(overflow)", calloc(vhuge, 16));
  TRY("realloc(NULL, 0)", realloc(vnull, v0));
  TRY("reallocarray(NULL, overflow)", reallocarray(vnull, vhuge, 16));
  TRY("aligned_alloc(64, 64)", aligned_alloc(v64, v64));
  TRY("aligned_alloc(64, 48) size not multiple", aligned_alloc(v64, v48));
  TRY("aligned_alloc(0, 48)", aligned_alloc(v0, v48));
  TRY("aligned_alloc(24, 48)", aligned_alloc(v24, v48));
  TRY("aligned_alloc(64, huge)", aligned_alloc(v64, vhuge));
  TRY("memalign(0, 48)", memalign(v0, v48));
  TRY("memalign(24, 48)", memalign(v24, v48));
  TRY("memalign(3, 48)", memalign(v3, v48));
  TRY("valloc(0)", valloc(v0));
  TRY("pvalloc(0)", pvalloc(v0));
  try_posix_memalign("posix_memalign(64, 100)", v64, 100);
  try_posix_memalign("posix_memalign(24, 100)", v24, 100);
  try_posix_memalign("posix_memalign(0, 100)", v0, 100);
  try_posix_memalign("posix_memalign(64, huge)", v64, vhuge);
  printf("%-40s %zu\n", "malloc_usable_size(NULL)", malloc_usable_size(NULL));

  /* errno is left alone by calls that succeed */
  errno = 1234;
  void *a = malloc(100);
  void *b = realloc(a, 1000);
  void *c = calloc(10, 10);
  free(b);
  free(c);
  free(NULL);
  printf("%-40s %d\n", "errno after successful calls", errno);
  return 0;
}
