// jemalloc's thread data key, created here: rename.sh points the
// pthread_key_create of its copy of jemalloc (libmlje.a) at this function.
#include <pthread.h>

namespace {

// jemalloc's thread data (its tcaches, its arena binding) is torn down by
// the destructor of a key it creates when it starts, before the key of any
// program that made its first pool since: in the same round of destructors,
// the program's run after it. An allocation there found jemalloc's data gone
// and jemalloc serves a thread in that state from arena 0 whatever arena it
// is asked for: a pool allocation in a key destructor came from outside the
// pool (seg_pool_of() NULL, and seg_free handed it to glibc, which aborted).
// Its cleanup is put off by one round (the key set again), so destructors
// of the round in which jemalloc's first comes see it whole; those of later
// rounds get no pool memory (alloc_large). Not by more: a thread that first
// used jemalloc in a destructor is first cleaned up a round later, and
// setting the key in glibc's last round (of four) skips the cleanup, which
// left the thread's cache linked in its arena from inside the thread's TLS,
// to be overwritten when glibc reused the stack (jemalloc crashed in
// tcache_arena_associate, 7 runs in 20).
pthread_key_t g_jemalloc_key;
void (*g_jemalloc_cleanup)(void *);
constinit thread_local bool tl_jemalloc_deferred = false;

void jemalloc_cleanup_later(void *data) {
  if (!tl_jemalloc_deferred) {
    tl_jemalloc_deferred = true;
    if (pthread_setspecific(g_jemalloc_key, data) == 0)
      return; // called again next round
  }
  tl_jemalloc_deferred = false;
  g_jemalloc_cleanup(data);
}

} // namespace

extern "C" int memlayout_seg_tsd_key_create(pthread_key_t *key, void (*cleanup)(void *)) {
  g_jemalloc_cleanup = cleanup;
  int err = pthread_key_create(key, cleanup ? jemalloc_cleanup_later : nullptr);
  if (err == 0)
    g_jemalloc_key = *key;
  return err;
}
