/* A runtime that registers the thread's rseq area itself: it unregisters
 * glibc's registration and registers the same area with a signature of its
 * own, as a per-CPU allocator may, then allocates and sleeps (each sleep a
 * context switch, where the kernel checks the area's critical section
 * against the signature). In the main thread and in a second one.
 *
 *   own_rseq */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OWN_SIGNATURE 0x0badc0de

static int take_over_rseq(void) {
  if (__rseq_size == 0)
    return 0; /* glibc registered nothing: nothing to take over */
  void *area = (char *)__builtin_thread_pointer() + __rseq_offset;
  if (syscall(__NR_rseq, area, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) != 0)
    return -1;
  return syscall(__NR_rseq, area, 32, 0, OWN_SIGNATURE) == 0 ? 0 : -1;
}

static void *work(void *arg) {
  long *failed = arg;
  *failed = take_over_rseq() != 0;
  for (int i = 0; i < 5; ++i) {
    void *volatile p = malloc(100 + (size_t)i);
    free(p);
    usleep(1000);
  }
  return NULL;
}

int main(void) {
  long failed = 0;
  pthread_t t;
  if (pthread_create(&t, NULL, work, &failed) != 0)
    return 1;
  pthread_join(t, NULL);
  long main_failed = 0;
  work(&main_failed);
  printf("%s\n", failed || main_failed ? "could not register" : "done");
  return 0;
}
