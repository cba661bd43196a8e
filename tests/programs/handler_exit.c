/* exit() from a signal handler, the signal arriving at any moment of an
 * allocation loop: inside malloc or free, so inside the recorder too.
 *
 *   handler_exit USEC   (SIGALRM after USEC microseconds; exit status 42) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void on_alarm(int sig) {
  (void)sig;
  exit(42);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s USEC\n", argv[0]);
    return 2;
  }
  signal(SIGALRM, on_alarm);
  ualarm((useconds_t)atoi(argv[1]), 0);
  void *volatile slots[1000];
  for (;;) {
    for (int i = 0; i < 1000; ++i)
      slots[i] = malloc((size_t)i * 3 + 1);
    for (int i = 0; i < 1000; ++i)
      free(slots[i]);
  }
}
