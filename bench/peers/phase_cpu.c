/* LD_PRELOAD helper for bench/peers/compare_trees.sh: the CPU time a
 * benchmark's threads got during its measured phase.
 *
 * Every harness compared (memlayout-bench, ASCYLIB's, synchrobench's,
 * lockFreeIBST's) times its run the same way: the main thread sleeps for the
 * run's duration while the workers operate, then tells them to stop. This
 * library wraps nanosleep and clock_nanosleep; around the longest sleep of
 * at least half a second it reads the process's CPU time (getrusage), and at
 * exit it prints to stderr
 *
 *   phase_cpu: wall S cpu S
 *
 * On a machine shared with other work, throughput per CPU-second of the
 * workers is steadier than throughput per wall second: a run that got half
 * the CPUs did half the operations in the same CPU time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static double longest_wall = 0, longest_cpu = 0;

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static double wall_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int measured(const struct timespec *req) {
  return req && (req->tv_sec > 0 || req->tv_nsec >= 500000000L);
}

static void record(double w0, double c0) {
  double w = wall_seconds() - w0;
  if (w > longest_wall) {
    longest_wall = w;
    longest_cpu = cpu_seconds() - c0;
  }
}

int nanosleep(const struct timespec *req, struct timespec *rem) {
  static int (*real)(const struct timespec *, struct timespec *);
  if (!real)
    real = (int (*)(const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "nanosleep");
  if (!measured(req))
    return real(req, rem);
  double w0 = wall_seconds(), c0 = cpu_seconds();
  int r = real(req, rem);
  record(w0, c0);
  return r;
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
  static int (*real)(clockid_t, int, const struct timespec *, struct timespec *);
  if (!real)
    real = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(
        RTLD_NEXT, "clock_nanosleep");
  if (flags != 0 || !measured(req)) /* absolute sleeps are not a run's duration */
    return real(clock, flags, req, rem);
  double w0 = wall_seconds(), c0 = cpu_seconds();
  int r = real(clock, flags, req, rem);
  record(w0, c0);
  return r;
}

__attribute__((destructor)) static void report(void) {
  if (longest_wall > 0)
    fprintf(stderr, "phase_cpu: wall %.6f cpu %.6f\n", longest_wall, longest_cpu);
}
