/* An index's latches and their names, allocated side by side by one
 * function, built -O2: a 48-byte latch (a lock and the fields its holder
 * writes) and a name of 33 bytes. Under jemalloc both are in the 48-byte
 * class, so no size class tells them apart, while the requested sizes do:
 * a rule by function and size routes the latches alone.
 *
 *   latch_names [N]   (default 20000)
 *
 * Prints a checksum of what it built. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct latch {
  volatile int lock;
  int holder;
  uint64_t version, readers, writes, waits;
  struct latch *next;
} latch_t;

typedef struct entry {
  latch_t *latch;
  char *name;
} entry_t;

static void build(entry_t *entries, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    latch_t *l = malloc(sizeof *l);
    memset(l, 0, sizeof *l);
    l->version = i;
    char *name = malloc(33);
    snprintf(name, 33, "latch-%026zu", i);
    entries[i].latch = l;
    entries[i].name = name;
  }
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
  entry_t *entries = calloc(n, sizeof *entries);
  if (!entries)
    return 1;
  build(entries, n);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += entries[i].latch->version + (unsigned char)entries[i].name[31];
  printf("%zu latches, checksum %llu\n", n, (unsigned long long)sum);
  for (size_t i = 0; i < n; ++i) {
    free(entries[i].latch);
    free(entries[i].name);
  }
  free(entries);
  return 0;
}
