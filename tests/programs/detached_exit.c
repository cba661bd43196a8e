/* Detached threads that each keep a block in a thread-specific value (freed
 * by its destructor) and allocate and free a few more; main waits until
 * every one of them has left the kernel, then allocates and frees as many
 * blocks of the sizes glibc's thread control blocks take, reusing their
 * addresses. glibc frees a detached thread's TLS vector on that thread,
 * after every TLS destructor has run.
 *
 *   detached_exit [THREADS]   (default 64) */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_key_t g_key;

static void drop(void *p) { free(p); }

static void *work(void *arg) {
  char *mine = malloc(344);
  memset(mine, 1, 344);
  pthread_setspecific(g_key, mine);
  for (int i = 0; i < 10; ++i) {
    char *volatile p = malloc(64 + (size_t)i * 8);
    p[0] = (char)i;
    free(p);
  }
  return arg;
}

static int threads_alive(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (!d)
    return 1;
  for (struct dirent *e; (e = readdir(d));)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 64;
  if (n < 1 || n > 1024)
    return 2;
  pthread_key_create(&g_key, drop);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, work, NULL) != 0)
      return 1;
  }
  while (threads_alive() > 1)
    usleep(1000);
  void *keep[256];
  for (int i = 0; i < 256; ++i)
    keep[i] = malloc(272 + (size_t)(i % 8) * 16);
  for (int i = 0; i < 256; ++i)
    free(keep[i]);
  printf("%d detached threads done\n", n);
  return 0;
}
