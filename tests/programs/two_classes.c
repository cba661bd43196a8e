/* A store whose one constructor makes records of two sizes (a short key
 * record and a long one), through the program's own xmalloc, kept live: one
 * call site, two size classes. Rules may route each size to a pool of its
 * own, or both to one pool whose classes differ from the allocator's.
 *
 *   two_classes [N] [SHORT LONG]   (default 4000 records, 32 and 40 bytes) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fputs("out of memory\n", stderr);
    exit(1);
  }
  return p;
}

typedef struct record {
  long key;
  long len;
  char bytes[];
} record_t;

static __attribute__((noinline)) record_t *make_record(long key, size_t size) {
  record_t *r = xmalloc(size);
  r->key = key;
  r->len = (long)(size - sizeof *r);
  memset(r->bytes, (int)(key & 0x7f), size - sizeof *r);
  return r;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4000;
  size_t shorter = argc > 3 ? (size_t)atol(argv[2]) : 32,
         longer = argc > 3 ? (size_t)atol(argv[3]) : 40;
  record_t **all = xmalloc(sizeof *all * (size_t)n);
  long sum = 0;
  for (int i = 0; i < n; ++i)
    all[i] = make_record(i, i % 2 ? longer : shorter);
  for (int i = 0; i < n; ++i)
    sum += all[i]->key + all[i]->len;
  printf("%d %ld\n", n, sum);
  for (int i = 0; i < n; ++i)
    free(all[i]);
  free(all);
  return 0;
}
