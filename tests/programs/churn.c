/* A busy allocator user that writes no files of its own: for the disk-full
 * and write-error tests, where the trace cannot be written but the program
 * must carry on.
 *
 *   churn [ROUNDS [close-fds|slow]]
 *
 * close-fds: half way through, close every descriptor above 2 and open
 * /dev/null a few times, as daemons and careful exec'ers do.
 * slow: sleep 20 us after each round, as a program allocating now and then
 * does (the recorder's time sampling adapts to the rate of events).
 *
 * stdout: a checksum that depends on every block's content. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE unsigned char *mlk_churn_alloc(size_t size, unsigned char fill) {
  unsigned char *p = malloc(size);
  if (!p)
    abort();
  memset(p, fill, size);
  return p;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 200000;
  int close_fds = argc > 2 && !strcmp(argv[2], "close-fds");
  int slow = argc > 2 && !strcmp(argv[2], "slow");
  unsigned char *ring[256] = {0};
  unsigned long sum = 0;
  for (long i = 0; i < rounds; ++i) {
    if (close_fds && i == rounds / 2) {
      for (int fd = 3; fd < 4096; ++fd)
        close(fd);
      for (int k = 0; k < 8; ++k)
        if (open("/dev/null", O_RDONLY) < 0)
          return 1;
    }
    size_t slot = (size_t)i % 256;
    if (ring[slot]) {
      sum = sum * 31 + ring[slot][0];
      free(ring[slot]);
    }
    ring[slot] = mlk_churn_alloc(16 + (size_t)(i * 37) % 1000, (unsigned char)i);
    if (slow)
      usleep(20);
  }
  for (int i = 0; i < 256; ++i)
    free(ring[i]);
  printf("churn: %ld rounds, checksum %lu\n", rounds, sum);
  return 0;
}
