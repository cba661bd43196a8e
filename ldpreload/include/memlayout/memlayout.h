/* memlayout annotations: name phases and types for `memlayout report`.
 *
 *   memlayout_mark("loaded");           report --at mark:loaded
 *   memlayout_tag(node, "Node");        groups of tagged objects take the name
 *   memlayout_htm_aborts(aborts, n);    transactions that aborted, for the
 *                                       report's htm_* findings
 *
 * Header-only and safe to ship: nothing to link, and each call is a cheap
 * no-op when the program is not running under `memlayout record`. The
 * recorder's functions are looked up once by name (dlsym), so a program built
 * with these calls runs anywhere. Link with -ldl on glibc older than 2.34. */
#ifndef MEMLAYOUT_MEMLAYOUT_H
#define MEMLAYOUT_MEMLAYOUT_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*memlayout_mark_fn)(const char *);
typedef void (*memlayout_tag_fn)(const void *, const char *);

/* One aborted hardware transaction (or emulated one: trees/htm/). A conflict
 * names the 64-byte line and the bytes each side touched on it; a capacity
 * abort names the L1 set that overflowed and the transaction's lines in it.
 * `memlayout report` finds which allocation groups those lines belong to. */
enum {
  MEMLAYOUT_HTM_CONFLICT = 0,
  MEMLAYOUT_HTM_CAPACITY = 1,
  MEMLAYOUT_HTM_EXPLICIT = 2,
  MEMLAYOUT_HTM_OTHER = 3,
  /* Not an abort: `line` holds how many transactions of `region` committed
   * (or ran on the fallback path) since the last such entry. */
  MEMLAYOUT_HTM_COMMITS = 4
};
enum {
  MEMLAYOUT_HTM_OVERLAP = 1,        /* true conflict: the two sides' bytes overlap */
  MEMLAYOUT_HTM_OTHER_WRITES = 2,   /* the conflicting access was a write */
  MEMLAYOUT_HTM_SAME_KEY = 4,       /* both were operations on the same key */
  MEMLAYOUT_HTM_KEYS_KNOWN = 8,     /* both announced their key */
  MEMLAYOUT_HTM_BY_PLAIN = 16,      /* the other side was a plain (non-transactional) access */
  MEMLAYOUT_HTM_BY_LOCK = 32,       /* ... taking the fallback lock */
  MEMLAYOUT_HTM_WRITE_CAPACITY = 64 /* capacity: written lines overflowed their set */
};
struct memlayout_htm_abort {
  uint64_t line;       /* conflict: the line's address */
  uint64_t read_mask;  /* bytes of the line the aborted transaction read (bit i = byte i) */
  uint64_t write_mask; /* ... and wrote */
  uint64_t other_mask; /* bytes the conflicting access touched */
  uint8_t cause;       /* MEMLAYOUT_HTM_CONFLICT ... */
  uint8_t flags;       /* MEMLAYOUT_HTM_OVERLAP | ... */
  uint16_t nlines;     /* capacity: entries of lines[] */
  uint32_t set;        /* capacity: the L1 set that overflowed */
  uint32_t l1_sets, l1_ways; /* the L1 that bounds transactions */
  uint32_t tx_lines, tx_written_lines, tx_sets; /* capacity: the transaction's footprint */
  const uint64_t *lines; /* capacity: its lines in that set */
  const char *region;    /* the code region ("htm-bptree.op"), or NULL */
};
typedef void (*memlayout_htm_aborts_fn)(const struct memlayout_htm_abort *, size_t);

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

/* Records n aborted transactions (batch them: each call writes a record). */
static inline void memlayout_htm_aborts(const struct memlayout_htm_abort *aborts, size_t n) {
  static void *fn;
  void *f = memlayout__lookup(&fn, "memlayout_htm_aborts_impl");
  if (f && n)
    ((memlayout_htm_aborts_fn)f)(aborts, n);
}

/* Whether the program runs under `memlayout record` (annotations are kept). */
static inline int memlayout_recording(void) {
  static void *fn;
  return memlayout__lookup(&fn, "memlayout_htm_aborts_impl") != (void *)0;
}

#ifdef __cplusplus
}
#endif

#endif
