/* Starts other programs every way a program can.
 *
 *   exec_parent MODE CHILD LOGDIR
 *
 * MODE: exec      allocate, then replace this image with CHILD (execv)
 *       forkexec  fork; the child execs CHILD; wait for it
 *       spawn     posix_spawn CHILD; wait for it
 *       system    system("CHILD ...") through /bin/sh
 *       echo      allocate, then execlp("echo", ...) (a program from the system)
 * CHILD is exec_child; each child writes its log to LOGDIR/<mode>.log. This
 * program's own log is LOGDIR/parent.log. */
#define _GNU_SOURCE
#include "ml_log.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void *mle_parent_alloc(size_t size) {
  void *p = malloc(size);
  memset(p, 'e', size);
  ml_log_alloc("malloc", "mle_parent_alloc", p, size, 0, 0);
  return p;
}

static int report(const char *what, int status) {
  if (WIFEXITED(status)) {
    printf("exec_parent: %s child exited %d\n", what, WEXITSTATUS(status));
    return WEXITSTATUS(status);
  }
  printf("exec_parent: %s child died\n", what);
  return 1;
}

/* LOGDIR/MODE.pid: the child's pid, for the test to find its trace. */
static void write_pid(const char *dir, const char *mode, pid_t pid) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.pid", dir, mode);
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "%ld\n", (long)pid);
    fclose(f);
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s exec|forkexec|spawn|system|echo CHILD LOGDIR\n", argv[0]);
    return 2;
  }
  const char *mode = argv[1], *child = argv[2], *dir = argv[3];
  char parent_log[4096], child_log[4096];
  snprintf(parent_log, sizeof parent_log, "%s/parent.log", dir);
  snprintf(child_log, sizeof child_log, "%s/%s.log", dir, mode);
  void *kept[10];
  for (int i = 0; i < 10; ++i)
    kept[i] = mle_parent_alloc(500 + (size_t)i);
  printf("exec_parent: %s\n", mode);
  fflush(stdout);
  char *child_argv[] = {(char *)child, child_log, (char *)mode, NULL};
  int rc = 0;
  if (!strcmp(mode, "exec") || !strcmp(mode, "echo")) {
    if (ml_log_write(parent_log) != 0)
      return 1;
    if (!strcmp(mode, "exec"))
      execv(child, child_argv);
    else
      execlp("echo", "echo", "exec_parent: echo ran", (char *)NULL);
    perror("exec");
    return 127;
  } else if (!strcmp(mode, "forkexec")) {
    pid_t pid = fork();
    if (pid == 0) {
      execv(child, child_argv);
      _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    rc = report(mode, status);
    write_pid(dir, mode, pid);
  } else if (!strcmp(mode, "spawn")) {
    pid_t pid;
    int err = posix_spawn(&pid, child, NULL, NULL, child_argv, environ);
    if (err) {
      fprintf(stderr, "posix_spawn: %s\n", strerror(err));
      return 1;
    }
    int status;
    waitpid(pid, &status, 0);
    rc = report(mode, status);
    write_pid(dir, mode, pid);
  } else if (!strcmp(mode, "system")) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s' system; true", child, child_log);
    int status = system(cmd);
    rc = report(mode, status);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  for (int i = 0; i < 10; ++i) {
    ml_log_free("free", kept[i]);
    free(kept[i]);
  }
  if (ml_log_write(parent_log) != 0)
    return 1;
  return rc;
}
