/* One-line static inline constructors over an out-of-line pool, folded into
 * the loop that fills an index, as terse C code has them. At -O2 GCC's line
 * table gives the constructors' line to some of the loop's own instructions
 * (scheduled outside the inlined ranges): a file=PATH:LINE rule must route
 * the constructor's objects, not also the caller's index.
 *
 *   mlt_oneline_ctors [N]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>

typedef struct item { long key; struct item *left, *right; long payload[5]; } item_t;
typedef struct edit { long words[8]; } edit_t;

__attribute__((noinline)) static void *slab_take(size_t n) { void *p = malloc(n); if (!p) abort(); ((char *)p)[0] = 0; return p; }
static inline item_t *make_item(long k) { item_t *it = slab_take(sizeof *it); it->key = k; return it; }
static inline edit_t *make_edit(void) { edit_t *e = slab_take(sizeof *e); e->words[0] = 1; return e; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  void **index = malloc(sizeof(void *) * 2 * (size_t)n);
  long sum = 0;
  for (int i = 0; i < n; i++) {
    index[2 * i] = make_item(i);
    index[2 * i + 1] = make_edit();
  }
  for (int i = 0; i < n; i++)
    sum += ((item_t *)index[2 * i])->key + ((edit_t *)index[2 * i + 1])->words[0];
  printf("%d %ld\n", n, sum);
  return 0;
}
