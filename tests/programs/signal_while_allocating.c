/* Threads that allocate and free without a pause while the process is
 * ended by a signal (SIGTERM, its default action), as a server is stopped:
 * every event the recorder counts in its end record must be in the trace
 * (the handler gave up on the threads that were writing their own blocks).
 *
 *   signal_while_allocating [THREADS [MILLISECONDS]]   (default 16 100) */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *volatile g_sink;

static void *churn(void *arg) {
  unsigned x = (unsigned)(size_t)arg * 2654435761u + 1;
  void *live[64] = {0};
  for (;;) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    unsigned slot = x % 64;
    free(live[slot]);
    live[slot] = malloc(16 + x % 200);
    memset(live[slot], 1, 8);
    g_sink = live[slot];
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 16;
  long ms = argc > 2 ? atol(argv[2]) : 100;
  for (int i = 0; i < threads; ++i) {
    pthread_t t;
    pthread_create(&t, NULL, churn, (void *)(size_t)(i + 1));
    pthread_detach(t);
  }
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&pause, NULL);
  raise(SIGTERM);
  return 0;
}
