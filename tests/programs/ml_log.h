/* What a test program did, for the integration tests to find in its trace.
 *
 * Each allocation, reallocation and free the program makes on purpose is
 * logged into a static table (no heap: the log must not add allocations of its
 * own) and written at the end as text lines to the file named on the command
 * line:
 *
 *   A <api> <function> <ptr> <size> <usable> <tid> <align>
 *   R <api> <function> <old> <ptr> <size> <usable> <tid>
 *   F <api> <ptr> <tid>
 *   T <tid> <role>                        a thread the program ran
 *   P <pid> <ppid> <role>                 this process
 *
 * <function> is the (noinline) function that made the call: the innermost
 * frame the recorder must report. Plain C, usable from C++. */
#ifndef ML_TEST_LOG_H
#define ML_TEST_LOG_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ML_LOG_CAPACITY
#define ML_LOG_CAPACITY 200000
#endif

struct ml_log_entry {
  char kind; /* 'A', 'R', 'F', 'T', 'P' */
  const char *api;
  const char *fn;
  uintptr_t old, ptr;
  size_t size, usable, align;
  long tid;
};

static struct ml_log_entry ml_log_table[ML_LOG_CAPACITY];
static unsigned long ml_log_count;
static unsigned long ml_log_dropped;

static inline long ml_tid(void) { return (long)syscall(SYS_gettid); }

static inline struct ml_log_entry *ml_log_slot(void) {
  unsigned long i = __atomic_fetch_add(&ml_log_count, 1, __ATOMIC_RELAXED);
  if (i >= ML_LOG_CAPACITY) {
    __atomic_fetch_add(&ml_log_dropped, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  return &ml_log_table[i];
}

static inline void ml_log_alloc(const char *api, const char *fn, const void *p, size_t size,
                                size_t usable, size_t align) {
  struct ml_log_entry *e = ml_log_slot();
  if (e) {
    e->kind = 'A';
    e->api = api;
    e->fn = fn;
    e->ptr = (uintptr_t)p;
    e->size = size;
    e->usable = usable;
    e->align = align;
    e->tid = ml_tid();
  }
}

static inline void ml_log_realloc(const char *api, const char *fn, uintptr_t old, const void *p,
                                  size_t size, size_t usable) {
  struct ml_log_entry *e = ml_log_slot();
  if (e) {
    e->kind = 'R';
    e->api = api;
    e->fn = fn;
    e->old = old;
    e->ptr = (uintptr_t)p;
    e->size = size;
    e->usable = usable;
    e->tid = ml_tid();
  }
}

static inline void ml_log_free(const char *api, const void *p) {
  struct ml_log_entry *e = ml_log_slot();
  if (e) {
    e->kind = 'F';
    e->api = api;
    e->ptr = (uintptr_t)p;
    e->tid = ml_tid();
  }
}

static inline void ml_log_thread(const char *role) {
  struct ml_log_entry *e = ml_log_slot();
  if (e) {
    e->kind = 'T';
    e->fn = role;
    e->tid = ml_tid();
  }
}

/* Writes the table to path with write(2) only; returns 0 on success. */
static inline int ml_log_write(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  char line[512];
  unsigned long n = ml_log_count < ML_LOG_CAPACITY ? ml_log_count : ML_LOG_CAPACITY;
  int len = snprintf(line, sizeof line, "P %ld %ld main\n", (long)getpid(), (long)getppid());
  int bad = write(fd, line, (size_t)len) != len;
  for (unsigned long i = 0; i < n && !bad; ++i) {
    const struct ml_log_entry *e = &ml_log_table[i];
    switch (e->kind) {
    case 'A':
      len = snprintf(line, sizeof line, "A %s %s %#lx %zu %zu %ld %zu\n", e->api, e->fn,
                     (unsigned long)e->ptr, e->size, e->usable, e->tid, e->align);
      break;
    case 'R':
      len = snprintf(line, sizeof line, "R %s %s %#lx %#lx %zu %zu %ld\n", e->api, e->fn,
                     (unsigned long)e->old, (unsigned long)e->ptr, e->size, e->usable, e->tid);
      break;
    case 'F':
      len = snprintf(line, sizeof line, "F %s %#lx %ld\n", e->api, (unsigned long)e->ptr, e->tid);
      break;
    case 'T':
      len = snprintf(line, sizeof line, "T %ld %s\n", e->tid, e->fn);
      break;
    default:
      len = 0;
    }
    bad = len > 0 && write(fd, line, (size_t)len) != len;
  }
  if (ml_log_dropped) {
    len = snprintf(line, sizeof line, "X dropped %lu\n", ml_log_dropped);
    bad |= write(fd, line, (size_t)len) != len;
  }
  return close(fd) != 0 || bad ? -1 : 0;
}

#ifdef __cplusplus
}
#endif

#endif
