/* A program under a file size limit (RLIMIT_FSIZE: `ulimit -f` in a shell,
 * or its own setrlimit) that allocates enough for a trace to outgrow the
 * limit, then writes a file of its own until the limit stops it. It prints
 * what it saw: how far its write got, its errno, and the SIGXFSZ signals its
 * handler counted. Under `memlayout record` it must see what it sees
 * without: the recorder's writes past the limit fail, but neither their
 * EFBIG nor their SIGXFSZ may reach the program.
 *
 *   fsize_limit LIMIT ALLOCATIONS FILE handler|default
 *     LIMIT: bytes to set RLIMIT_FSIZE to, 0 to keep the one inherited;
 *       late:N sets it to N after the allocations (below what a trace of
 *       them already holds)
 *     handler: count SIGXFSZ; default: leave it be (the program's own write
 *     past the limit then kills it, as it would without the recorder) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile sig_atomic_t xfsz_signals;

static void on_xfsz(int sig) {
  (void)sig;
  ++xfsz_signals;
}

static int set_limit(long long limit) {
  struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
    perror("setrlimit");
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: fsize_limit LIMIT ALLOCATIONS FILE handler|default\n");
    return 2;
  }
  int late = strncmp(argv[1], "late:", 5) == 0;
  long long limit = atoll(argv[1] + (late ? 5 : 0));
  long allocations = atol(argv[2]);
  if (strcmp(argv[4], "handler") == 0)
    signal(SIGXFSZ, on_xfsz);
  if (limit > 0 && !late && set_limit(limit) != 0)
    return 1;
  /* Sizes and lifetimes from a generator, so the trace compresses poorly
   * and soon outgrows the limit. */
  static void *live[4096];
  unsigned long long x = 88172645463325252ull;
  size_t total = 0;
  for (long i = 0; i < allocations; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t slot = (size_t)(x % 4096);
    free(live[slot]);
    size_t size = 16 + (size_t)(x >> 40) % 2000;
    live[slot] = malloc(size);
    if (live[slot])
      memset(live[slot], 1, 8);
    total += size;
  }
  for (size_t i = 0; i < 4096; ++i)
    free(live[i]);
  printf("allocated %ld blocks, %zu bytes; SIGXFSZ so far: %d\n", allocations, total,
         (int)xfsz_signals);
  if (limit > 0 && late && set_limit(limit) != 0)
    return 1;
  fflush(stdout);

  /* The program's own file: written until the limit stops it. */
  int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror(argv[3]);
    return 1;
  }
  static char chunk[4096];
  long long written = 0;
  int err = 0;
  for (int i = 0; i < 1 << 16; ++i) {
    ssize_t w = write(fd, chunk, sizeof chunk);
    if (w < 0) {
      err = errno;
      break;
    }
    written += w;
  }
  close(fd);
  printf("wrote %lld bytes, then %s; SIGXFSZ: %d\n", written,
         err == EFBIG ? "EFBIG"
         : err        ? strerror(err)
                      : "no error",
         (int)xfsz_signals);
  return 0;
}
