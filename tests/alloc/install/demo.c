/* Uses the installed C API: a pool, an object in it, its stats. */
#include <memlayout/seg.h>
#include <stdio.h>

int main(void) {
  seg_pool *nodes = seg_pool_create("nodes", NULL);
  if (!nodes)
    return 1;
  void *n = seg_malloc(nodes, 64);
  struct seg_pool_stats s;
  if (!n || seg_pool_of(n) != nodes || seg_pool_stats(nodes, &s) != 0 || s.allocations != 1)
    return 2;
  seg_free(n);
  printf("c: %s ok\n", s.name);
  return 0;
}
