/* memlayout annotations: name phases and types for `memlayout report`.
 *
 *   memlayout_mark("loaded");           report --at mark:loaded
 *   memlayout_tag(node, "Node");        groups of tagged objects take the name
 *
 * Header-only and safe to ship: nothing to link, and each call is a cheap
 * no-op when the program is not running under `memlayout record`. The
 * recorder's functions are looked up once by name (dlsym), so a program built
 * with these calls runs anywhere. Link with -ldl on glibc older than 2.34. */
#ifndef MEMLAYOUT_MEMLAYOUT_H
#define MEMLAYOUT_MEMLAYOUT_H

#include <dlfcn.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*memlayout_mark_fn)(const char *);
typedef void (*memlayout_tag_fn)(const void *, const char *);

/* Resolved once per translation unit; (void *)1 marks "looked up, absent". */
static inline void *memlayout__lookup(void **slot, const char *name) {
  void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!f) {
    f = dlsym(RTLD_DEFAULT, name);
    if (!f)
      f = (void *)1;
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f == (void *)1 ? (void *)0 : f;
}

/* Marks a moment of the program (a phase boundary) by name. */
static inline void memlayout_mark(const char *name) {
  static void *fn;
  void *f = memlayout__lookup(&fn, "memlayout_mark_impl");
  if (f)
    ((memlayout_mark_fn)f)(name);
}

/* Names the type of the heap object at ptr (call it right after allocating). */
static inline void memlayout_tag(const void *ptr, const char *type_name) {
  static void *fn;
  void *f = memlayout__lookup(&fn, "memlayout_tag_impl");
  if (f)
    ((memlayout_tag_fn)f)(ptr, type_name);
}

#ifdef __cplusplus
}
#endif

#endif
