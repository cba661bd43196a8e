/* The ways a process ends.
 *
 *   exit_paths MODE LOG
 *
 * exit         allocations, buffered stdout, exit(4)
 * _exit        buffered stdout that is never flushed, _exit(5)
 * abort        abort() (dies of SIGABRT)
 * segv         dies of SIGSEGV (a store through a null pointer)
 * term         dies of SIGTERM sent to itself (as from kill or a supervisor)
 * kill         dies of SIGKILL sent to itself: nothing of it runs after
 * term_altstack  a 4 KiB alternate signal stack, then dies of SIGTERM
 * reraise      its own SIGTERM handler cleans up, puts the default action back
 *              with signal() and raises it again, as sort and other GNU tools
 *              do: dies of SIGTERM
 * reraise_sigaction  the same with sigaction()
 * signal       handlers that allocate: SIGUSR1 raised 10 times, SIGALRM from
 *              a 100 us timer during an allocation loop; exit 0
 * thread_exit  exit(7) from a thread while three others keep allocating
 * quick_exit   an at_quick_exit handler that allocates, then quick_exit(6)
 * exit_wide    exit(259): the process ends with status 3
 * exit_group   the raw exit_group system call with status 8, as Go's os.Exit
 *              ends a process: no library function sees it */
#define _GNU_SOURCE
#include "ml_log.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static const char *g_log;

NOINLINE void *mlx_exit_alloc(size_t size) {
  void *p = malloc(size);
  memset(p, 'x', size);
  ml_log_alloc("malloc", "mlx_exit_alloc", p, size, 0, 0);
  return p;
}

static void allocate_some(int n) {
  for (int i = 0; i < n; ++i) {
    void *p = mlx_exit_alloc(64 + (size_t)i);
    if (i % 3) {
      ml_log_free("free", p);
      free(p);
    }
  }
}

/* ---- quick_exit --------------------------------------------------------------- */

/* Runs after quick_exit: its allocations are in the trace too. */
static void quick_exit_handler(void) {
  allocate_some(10);
  ml_log_write(g_log);
}

/* ---- signal ------------------------------------------------------------------ */

static void *g_handled[10];
static volatile sig_atomic_t g_nhandled;
static volatile sig_atomic_t g_alarms;

NOINLINE void *mls_handler_alloc(size_t size) {
  void *p = malloc(size);
  ml_log_alloc("malloc", "mls_handler_alloc", p, size, 0, 0);
  return p;
}

static void on_usr1(int sig) {
  (void)sig;
  if (g_nhandled < 10) {
    g_handled[g_nhandled] = mls_handler_alloc(96 + (size_t)g_nhandled);
    g_nhandled = g_nhandled + 1;
  }
}

/* Asynchronous: may land inside malloc, inside the recorder, anywhere. Not
 * async-signal-safe by the letter of POSIX, which is the point: programs do it
 * and glibc copes while the signal does not interrupt malloc itself... so only
 * touch memory when the main loop says it is outside the allocator. */
static volatile sig_atomic_t g_main_in_malloc;
static void on_alarm(int sig) {
  (void)sig;
  g_alarms = g_alarms + 1;
  if (!g_main_in_malloc) {
    void *p = malloc(40);
    free(p);
  }
}

static int run_signal(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  for (int i = 0; i < 10; ++i)
    raise(SIGUSR1);
  sa.sa_handler = on_alarm;
  sa.sa_flags = 0; /* no SA_RESTART: interrupted system calls fail with EINTR */
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval t = {{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &t, NULL);
  long sum = 0;
  for (int i = 0; i < 50000; ++i) {
    g_main_in_malloc = 1;
    char *p = malloc(32 + (size_t)(i % 200));
    g_main_in_malloc = 0;
    p[0] = (char)i;
    sum += p[0];
    g_main_in_malloc = 1;
    free(p);
    g_main_in_malloc = 0;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_IGN);
  for (int i = 0; i < g_nhandled; ++i) {
    ml_log_free("free", g_handled[i]);
    free(g_handled[i]);
  }
  printf("signal: %d handled, sum %ld\n", (int)g_nhandled, sum);
  return ml_log_write(g_log) == 0 ? 0 : 1;
}

/* ---- thread_exit ---------------------------------------------------------- */

static void *spinner(void *arg) {
  (void)arg;
  for (unsigned long i = 0;; ++i) {
    void *p = malloc(16 + i % 512);
    free(p);
    if (i % 1024 == 0)
      sched_yield();
  }
  return NULL;
}

static void *exiter(void *arg) {
  (void)arg;
  ml_log_thread("exiter");
  allocate_some(100);
  usleep(20000); /* the spinners are well into their loops */
  printf("thread_exit: exiting from a thread\n");
  if (ml_log_write(g_log) != 0)
    _exit(1);
  exit(7);
}

static int run_thread_exit(void) {
  pthread_t t[4];
  for (int i = 0; i < 3; ++i)
    pthread_create(&t[i], NULL, spinner, NULL);
  pthread_create(&t[3], NULL, exiter, NULL);
  pthread_join(t[3], NULL);
  return 99; /* not reached */
}

static int g_reraise_with_sigaction;

static void cleanup_and_reraise(int sig) {
  (void)!write(1, "cleanup\n", 8);
  if (g_reraise_with_sigaction) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
  } else {
    signal(sig, SIG_DFL);
  }
  raise(sig);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr,
            "usage: %s exit|_exit|abort|segv|term|reraise|reraise_sigaction|signal|"
            "thread_exit|quick_exit|exit_wide LOG\n",
            argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  g_log = argv[2];
  ml_log_thread("main");
  allocate_some(50);
  if (!strcmp(mode, "exit")) {
    printf("exit: buffered line\n");
    fprintf(stderr, "exit: to stderr\n");
    if (ml_log_write(g_log) != 0)
      return 1;
    exit(4);
  }
  if (!strcmp(mode, "quick_exit")) {
    printf("quick_exit: buffered line, lost\n");
    (void)!write(1, "quick_exit: written directly\n", 29);
    at_quick_exit(quick_exit_handler);
    quick_exit(6);
  }
  if (!strcmp(mode, "exit_wide")) {
    if (ml_log_write(g_log) != 0)
      return 1;
    exit(259);
  }
  if (!strcmp(mode, "exit_group")) {
    if (ml_log_write(g_log) != 0)
      return 1;
    syscall(SYS_exit_group, 8);
  }
  if (!strcmp(mode, "_exit")) {
    printf("_exit: this buffered line is never flushed\n");
    (void)!write(1, "_exit: written directly\n", 24);
    fprintf(stderr, "_exit: to stderr\n");
    if (ml_log_write(g_log) != 0)
      return 1;
    _exit(5);
  }
  if (!strcmp(mode, "abort")) {
    printf("abort: buffered line, lost\n");
    fprintf(stderr, "abort: aborting\n");
    if (ml_log_write(g_log) != 0)
      return 1;
    abort();
  }
  if (!strcmp(mode, "segv")) {
    fprintf(stderr, "segv: faulting\n");
    if (ml_log_write(g_log) != 0)
      return 1;
    volatile int *nowhere = NULL;
    *nowhere = 1;
    return 98;
  }
  if (!strcmp(mode, "term")) {
    fprintf(stderr, "term: terminating\n");
    if (ml_log_write(g_log) != 0)
      return 1;
    kill(getpid(), SIGTERM);
    pause();
    return 97;
  }
  if (!strcmp(mode, "term_altstack")) {
    static char small[4096] __attribute__((aligned(16)));
    stack_t ss = {.ss_sp = small, .ss_size = sizeof small, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0 || ml_log_write(g_log) != 0)
      return 1;
    kill(getpid(), SIGTERM);
    pause();
    return 95;
  }
  if (!strcmp(mode, "kill")) {
    if (ml_log_write(g_log) != 0)
      return 1;
    kill(getpid(), SIGKILL);
    pause();
    return 96;
  }
  if (!strcmp(mode, "reraise") || !strcmp(mode, "reraise_sigaction")) {
    g_reraise_with_sigaction = !strcmp(mode, "reraise_sigaction");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cleanup_and_reraise;
    sigaction(SIGTERM, &sa, NULL);
    if (ml_log_write(g_log) != 0)
      return 1;
    kill(getpid(), SIGTERM);
    pause();
    return 96;
  }
  if (!strcmp(mode, "signal"))
    return run_signal();
  if (!strcmp(mode, "thread_exit"))
    return run_thread_exit();
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
