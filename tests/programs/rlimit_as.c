/* A program that caps its own address space once it starts (as servers do
 * to fail early rather than swap), then allocates big buffers and small
 * records. Under rules its pools must not have spent the address space
 * before it set the cap, nor take most of what the cap leaves.
 *
 *   rlimit_as [MIB [EARLY]]   (default 512: the cap; 64 buffers of 1 MiB,
 *                              1000 records of 100 bytes; EARLY records of
 *                              48 bytes before the cap, default 0) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int main(int argc, char **argv) {
  long mib = argc > 1 ? atol(argv[1]) : 512;
  int early = argc > 2 ? atoi(argv[2]) : 0;
  for (int i = 0; i < early; ++i) {
    void *volatile kept_early = malloc(48);
    (void)kept_early;
  }
  struct rlimit cap = {(rlim_t)mib << 20, (rlim_t)mib << 20};
  if (setrlimit(RLIMIT_AS, &cap) != 0) {
    perror("setrlimit");
    return 1;
  }
  int buffers = 0, records = 0;
  for (int i = 0; i < 64; ++i) {
    char *b = malloc(1 << 20);
    if (b) {
      memset(b, i, 4096);
      ++buffers;
    }
  }
  static void *kept[1000];
  for (int i = 0; i < 1000; ++i)
    if ((kept[i] = malloc(100)) != NULL) {
      memset(kept[i], 1, 100);
      ++records;
    }
  printf("%d buffers, %d records\n", buffers, records);
  return 0;
}
