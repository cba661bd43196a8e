/* An allocation path as a stripped distribution library has it (Debian's
 * libsqlite3.so.0: ?? -> sqlite3Malloc -> ?? -> sqlite3DbMallocZero ->
 * sqlite3FindFunction). Built -O2 and linked with -s (mlt_stripped_wrappers):
 * only the exported functions have names (.dynsym); the static helpers
 * between the wrappers have none, and a stack shows them as "??":
 *
 *   ?? (mem_raw) -> xmalloc_like -> ?? (zero_fill) -> db_malloc_zero
 *      -> lib_new_record / lib_new_index
 *
 * xmalloc_like and db_malloc_zero are wrappers (declared, as sqlite's are
 * built in: nothing can detect them through the unnamed frame below);
 * lib_new_record and lib_new_index are the sites. */
#include <stdlib.h>
#include <string.h>

struct record {
  long key;
  char name[56];
};
struct index_entry {
  long key;
  struct record *rec;
  char pad[48];
};

static size_t g_bytes; /* keeps the helpers apart */

static __attribute__((noinline)) void *mem_raw(size_t n) {
  void *p = malloc(n);
  if (!p)
    abort();
  g_bytes += n;
  return p;
}

void *xmalloc_like(size_t n) {
  void *p = mem_raw(n);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return p;
}

static __attribute__((noinline)) void *zero_fill(size_t n) {
  void *p = xmalloc_like(n);
  memset(p, 0, n);
  return p;
}

void *db_malloc_zero(size_t n) {
  void *p = zero_fill(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

struct record *lib_new_record(long key) {
  struct record *r = db_malloc_zero(sizeof *r);
  r->key = key;
  __asm__ volatile("" ::: "memory");
  return r;
}

struct index_entry *lib_new_index(long key, struct record *rec) {
  struct index_entry *e = db_malloc_zero(sizeof *e);
  e->key = key;
  e->rec = rec;
  __asm__ volatile("" ::: "memory");
  return e;
}

size_t lib_bytes(void) { return g_bytes; }
