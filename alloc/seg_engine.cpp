#include "seg_engine.h"

#include "seg_core.h"
#include "seg_mallocx.h"
#include "seg_tcache.h"

#include <cerrno>
#include <pthread.h>

namespace memlayout::seg {

namespace {

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_started = false;
bool g_have_key = false;
pthread_key_t g_exit_key;
constinit thread_local bool tl_exit_armed = false;

void on_thread_exit(void *) { thread_exit(); }

void before_fork() { pthread_mutex_lock(&g_lock); }
void after_fork_parent() { pthread_mutex_unlock(&g_lock); }
void after_fork_child() {
  // The only thread left is the one that forked and took the lock.
  pthread_mutex_init(&g_lock, nullptr);
  thread_caches_after_fork_child();
}

} // namespace

void engine_lock() { pthread_mutex_lock(&g_lock); }
void engine_unlock() { pthread_mutex_unlock(&g_lock); }

bool engine_start_locked() {
  if (g_started)
    return true;
  // Any mallctl initialises jemalloc, which registers its fork handlers.
  unsigned narenas = 0;
  size_t len = sizeof narenas;
  if (int err = mlje_mallctl("arenas.narenas", &narenas, &len, nullptr, 0)) {
    errno = err == EAGAIN ? ENOMEM : err;
    return false;
  }
  g_have_key = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  g_started = true;
  return true;
}

void arm_thread_exit() {
  if (tl_exit_armed || !g_have_key)
    return;
  tl_exit_armed = true;
  pthread_setspecific(g_exit_key, &tl_exit_armed);
}

} // namespace memlayout::seg
