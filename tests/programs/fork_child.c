/* A parent and a forked child that both allocate; the child exits with 3.
 *
 *   fork_child LOG
 *
 * The parent's log goes to LOG, the child's to LOG.child. stdout: one line
 * from the child, then one from the parent after it reaped the child.
 *
 *   fork_child LOG threaded
 *
 * Forks 20 times while three other threads allocate without pause (the
 * moment allocator and recorder locks must be handled around fork); child i
 * allocates and exits with i % 5. */
#define _GNU_SOURCE
#include "ml_log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void *mlf_parent_alloc(size_t size) {
  void *p = malloc(size);
  memset(p, 'p', size);
  ml_log_alloc("malloc", "mlf_parent_alloc", p, size, 0, 0);
  return p;
}

NOINLINE void *mlf_child_alloc(size_t size) {
  void *p = calloc(1, size);
  ml_log_alloc("calloc", "mlf_child_alloc", p, size, 0, 0);
  return p;
}

NOINLINE void *mlf_parent_after_fork(size_t size) {
  void *p = malloc(size);
  memset(p, 'q', size);
  ml_log_alloc("malloc", "mlf_parent_after_fork", p, size, 0, 0);
  return p;
}

static volatile int g_stop;

/* Bounded, so the parent's trace stays small, and paced to overlap the forks. */
static void *spinner(void *arg) {
  (void)arg;
  for (unsigned long i = 0; !g_stop && i < 30000; ++i) {
    void *p = malloc(16 + i % 700);
    free(p);
    if (i % 50 == 0)
      usleep(10);
  }
  return NULL;
}

static int run_threaded(void) {
  pthread_t t[3];
  for (int i = 0; i < 3; ++i)
    pthread_create(&t[i], NULL, spinner, NULL);
  int statuses = 0;
  for (int i = 0; i < 20; ++i) {
    pid_t pid = fork();
    if (pid < 0)
      return 1;
    if (pid == 0) {
      for (int k = 0; k < 100; ++k)
        free(mlf_child_alloc(100 + (size_t)k));
      _exit(i % 5);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
      return 1;
    statuses += WEXITSTATUS(status);
  }
  g_stop = 1;
  for (int i = 0; i < 3; ++i)
    pthread_join(t[i], NULL);
  printf("threaded: 20 children, statuses sum %d\n", statuses);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[2], "threaded"))
    return run_threaded();
  if (argc != 2) {
    fprintf(stderr, "usage: %s LOG [threaded]\n", argv[0]);
    return 2;
  }
  void *before[100];
  for (int i = 0; i < 100; ++i)
    before[i] = mlf_parent_alloc(1000 + (size_t)i);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) {
    ml_log_count = 0; /* the child's log holds what the child did */
    /* The child frees some of what it inherited, allocates its own. */
    for (int i = 0; i < 100; i += 2) {
      ml_log_free("free", before[i]);
      free(before[i]);
    }
    void *mine[50];
    for (int i = 0; i < 50; ++i)
      mine[i] = mlf_child_alloc(2000 + (size_t)i);
    for (int i = 0; i < 50; i += 5) {
      ml_log_free("free", mine[i]);
      free(mine[i]);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.child", argv[1]);
    if (ml_log_write(path) != 0)
      return 1;
    printf("child: 50 blocks\n");
    exit(3);
  }
  void *after[30];
  for (int i = 0; i < 30; ++i)
    after[i] = mlf_parent_after_fork(3000 + (size_t)i);
  int status;
  if (waitpid(pid, &status, 0) != pid)
    return 1;
  printf("parent: child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  for (int i = 0; i < 100; ++i) {
    ml_log_free("free", before[i]);
    free(before[i]);
  }
  for (int i = 0; i < 30; ++i) {
    ml_log_free("free", after[i]);
    free(after[i]);
  }
  if (ml_log_write(argv[1]) != 0)
    return 1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 3 ? 0 : 1;
}
