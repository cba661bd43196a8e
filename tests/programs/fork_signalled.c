/* Worker processes ended by a signal, as Python's multiprocessing.Pool ends
 * its workers (SIGTERM) or a supervisor its children: each forked child
 * allocates a few records, waits a little, and is terminated before it
 * wrote anything. Each child's trace must exist, name its sites and start
 * at the fork.
 *
 *   fork_signalled [CHILDREN [RECORDS]]   (default 3 10) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct record {
  long id;
  char name[24];
};

static void *volatile g_sink;

static void work(int records) {
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
  for (int i = 0; i < records; ++i) {
    struct record *r = malloc(sizeof *r);
    r->id = i;
    snprintf(r->name, sizeof r->name, "worker %d", i);
    g_sink = r;
  }
  raise(SIGTERM);
}

int main(int argc, char **argv) {
  int children = argc > 1 ? atoi(argv[1]) : 3;
  int records = argc > 2 ? atoi(argv[2]) : 10;
  int killed = 0;
  for (int c = 0; c < children; ++c) {
    pid_t pid = fork();
    if (pid == 0) {
      work(records);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
  }
  printf("%d of %d workers ended by SIGTERM\n", killed, children);
  return 0;
}
