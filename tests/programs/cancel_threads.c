/* Workers that allocate until they are cancelled, as a server cancels the
 * handler of a dropped connection: each is cancelled at a cancellation
 * point of its own (pthread_testcancel, or usleep with "sleep"), the
 * recorder possibly mid-flush in another of its paths. A cancellation
 * point inside the recorder would unwind the thread with the recorder's
 * locks held, and its exit would wait on them for ever.
 *
 *   cancel_threads [ROUNDS [sleep]]   (default 100 rounds) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_sleep;

static void *handler(void *arg) {
  (void)arg;
  for (;;) {
    char *volatile buf = malloc(64 + (size_t)(rand() & 255));
    if (buf)
      memset(buf, 1, 64);
    if (g_sleep)
      usleep(1);
    else
      pthread_testcancel();
    free(buf);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100;
  g_sleep = argc > 2 && strcmp(argv[2], "sleep") == 0;
  int cancelled = 0;
  for (int i = 0; i < rounds; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, handler, NULL) != 0)
      return 1;
    usleep(200);
    pthread_cancel(t);
    void *result;
    pthread_join(t, &result);
    cancelled += result == PTHREAD_CANCELED;
  }
  printf("cancelled %d\n", cancelled);
  return 0;
}
