/* Two layouts whose report fixes must not make the next finding (advise
 * checks its rules by the layout they make):
 *
 *   fix_layouts buckets [N]   N 256-byte buckets back to back, whose first 64
 *                             bytes are hot (--hot new_bucket=64): under glibc
 *                             the 272-byte chunks leave most hot parts across
 *                             a line; aligned to 64 in a pool of 256-byte
 *                             class they would sit 4 lines apart, on a quarter
 *                             of the L1 sets.
 *   fix_layouts notes [N]     per record, an 80-byte account, a 101-byte note,
 *                             a 200-byte audit and a 24-byte list cell, as
 *                             std::map, std::string, make_unique and std::list
 *                             interleave them: the notes spread over 4x the
 *                             pages they need, all at one line offset (no
 *                             straddle); a pool's 112-byte class would put
 *                             half of them across a line.
 *   fix_layouts aligned [N]   N 256-byte buffers from aligned_alloc(4096, ...):
 *                             a page apart, on 4 of the L1's 64 sets, because
 *                             the program asks for the alignment (jemalloc
 *                             serves them from its 4096-byte class).
 *
 * Prints a checksum; exit status 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bucket {
  long key, hash;
  struct bucket *next;
  long meta[5];
  char payload[192];
};

__attribute__((noinline, noclone)) struct bucket *new_bucket(long k) {
  struct bucket *b = calloc(1, sizeof *b);
  b->key = k;
  return b;
}

__attribute__((noinline, noclone)) char *new_account(long i) {
  char *p = malloc(80);
  memset(p, (int)i, 80);
  return p;
}

__attribute__((noinline, noclone)) char *new_note(long i) {
  char *p = malloc(101);
  memset(p, 'a' + (int)(i % 26), 100);
  p[100] = 0;
  return p;
}

__attribute__((noinline, noclone)) char *new_audit(long i) {
  char *p = malloc(200);
  memset(p, (int)i, 200);
  return p;
}

__attribute__((noinline, noclone)) char *new_cell(long i) {
  char *p = malloc(24);
  memset(p, (int)i, 24);
  return p;
}

__attribute__((noinline, noclone)) char *new_iobuf(long i) {
  char *p = aligned_alloc(4096, 256);
  memset(p, (int)i, 256);
  return p;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "buckets";
  long n = argc > 2 ? atol(argv[2]) : 4000;
  long sum = 0;
  if (!strcmp(mode, "buckets")) {
    for (long i = 0; i < n; i++)
      sum += new_bucket(i)->key;
  } else if (!strcmp(mode, "notes")) {
    for (long i = 0; i < n; i++) {
      sum += new_account(i)[0];
      sum += new_note(i)[0];
      sum += new_audit(i)[0];
      sum += new_cell(i)[0];
    }
  } else if (!strcmp(mode, "aligned")) {
    for (long i = 0; i < n; i++)
      sum += new_iobuf(i)[0];
  } else {
    fprintf(stderr, "usage: fix_layouts buckets|notes|aligned [N]\n");
    return 2;
  }
  printf("%ld\n", sum);
  return 0;
}
