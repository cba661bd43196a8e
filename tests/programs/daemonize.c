/* A server that daemonizes as memcached -d and redis --daemonize do: forks,
 * the child starts a session and forks again, the parents exit at once and
 * the daemon works on (allocating) for a while.
 *
 *   daemonize [MS]   (default 600: how long the daemon works) */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char *volatile last_request; /* what a server keeps: no allocation elided */

int main(int argc, char **argv) {
  long ms = argc > 1 ? atol(argv[1]) : 600;
  char *config = malloc(256);
  if (!config)
    return 1;
  snprintf(config, 256, "serving for %ld ms", ms);
  if (fork() == 0) {
    setsid();
    if (fork() == 0) {
      for (long t = 0; t < ms; t += 20) {
        last_request = malloc(128);
        usleep(20000);
        free(last_request);
      }
      _exit(0);
    }
    _exit(0);
  }
  puts(config);
  free(config);
  return 0;
}
